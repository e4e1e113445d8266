#!/bin/bash
# The tiers' measure (store_retention.c, measure()) at full scale, timed on a ring made of 200
# copies of a scaled ring's rows (bench_horizon svc200 --scale 200: its ids, streams and chains
# offset, blobs of the same sizes), as 200 streams in one ring of 200 times the cap would hold.
#   tests/bench/store/tiers_measure_cost.sh SCALED_RING.db [OUT.db]   (OUT on /dev/shm; ~0.5 GB)
# The store's indexes (store_migrate.c: covering the measure's columns); OLD_INDEXES=1: those
# before them (2026-11-30), for a side-by-side figure.
set -e
SRC=$1; DST=${2:-/dev/shm/pfr-full200.db}
if [ "${OLD_INDEXES:-0}" = 1 ]; then
    DICT_INDEX="CREATE INDEX dicts_base ON dicts(base_id, id);"
    CHUNK_INDEXES="CREATE INDEX chunks_base ON chunks(base_id); CREATE INDEX chunks_tier ON chunks(tier);"
else
    DICT_INDEX="CREATE INDEX dicts_base_nbytes ON dicts(base_id, id, nbytes);"
    CHUNK_INDEXES="CREATE INDEX chunks_base_tier ON chunks(base_id, tier); CREATE INDEX chunks_tier_id ON chunks(tier, id, nbytes);"
fi
rm -f $DST
sqlite3 $DST <<SQL
PRAGMA page_size=4096; PRAGMA auto_vacuum=INCREMENTAL; PRAGMA journal_mode=WAL;
CREATE TABLE dicts(id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL,  base_id INTEGER NOT NULL, parent_id INTEGER NOT NULL, nbytes INTEGER NOT NULL,  crc INTEGER NOT NULL, data BLOB NOT NULL);
$DICT_INDEX
CREATE TABLE chunks(id INTEGER PRIMARY KEY AUTOINCREMENT, stream_id INTEGER NOT NULL,  base_id INTEGER NOT NULL, dict_id INTEGER NOT NULL, start_ns INTEGER NOT NULL,  end_ns INTEGER NOT NULL, nbytes INTEGER NOT NULL, crc INTEGER NOT NULL,  totals BLOB NOT NULL, tier INTEGER NOT NULL DEFAULT 0);
CREATE INDEX chunks_stream ON chunks(stream_id, end_ns, start_ns);
$CHUNK_INDEXES
CREATE TABLE chunk_data(id INTEGER PRIMARY KEY, data BLOB NOT NULL);
ATTACH '$SRC' AS s;
WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 199)
INSERT INTO dicts SELECT d.id + k.i * 10000000, d.stream_id + k.i * 1000, d.base_id + k.i * 10000000, CASE d.parent_id WHEN 0 THEN 0 ELSE d.parent_id + k.i * 10000000 END, d.nbytes, d.crc, randomblob(d.nbytes) FROM k, s.dicts d ORDER BY d.id, k.i;
WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 199)
INSERT INTO chunks SELECT c.id + k.i * 10000000, c.stream_id + k.i * 1000, c.base_id + k.i * 10000000, c.dict_id + k.i * 10000000, c.start_ns, c.end_ns, c.nbytes, c.crc, c.totals, c.tier FROM k, s.chunks c ORDER BY c.id, k.i;
WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 199)
INSERT INTO chunk_data SELECT c.id + k.i * 10000000, randomblob(length(c.data)) FROM k, s.chunk_data c ORDER BY c.id, k.i;
SQL
ls -la $DST
sqlite3 $DST "select count(*) from chunks; select count(*), sum(nbytes) from dicts; pragma page_count"
for run in 1 2 3; do
sqlite3 $DST <<SQL
PRAGMA cache_size = -4096;
.timer on
SELECT tier, sum(nbytes) + count(*) * 96 FROM chunks GROUP BY tier;
SELECT c.t, sum(d.nbytes) FROM dicts d JOIN (SELECT base_id, min(tier) AS t FROM chunks GROUP BY base_id) c ON d.base_id = c.base_id WHERE c.t > 0 GROUP BY c.t;
SELECT coalesce(min(start_ns), 0) FROM chunks WHERE tier = 3;
SQL
done
rm -f "$DST" "$DST-wal" "$DST-shm"
