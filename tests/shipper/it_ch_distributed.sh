#!/usr/bin/env bash
# Coroot on a ClickHouse cluster: Replicated tables made ON CLUSTER, read through
# profiling_*_distributed. The shipper then inserts through the Distributed tables (rows land on
# the shards Coroot's sharding keys give), retries double nothing, Coroot's query through the
# Distributed tables shows the ring, and create_tables makes no plain table of its own there.
#
# What the embedded engine can run: a cluster "coroot" of one shard, this engine itself (its
# config file gives remote_servers); no Keeper, so the local tables are plain MergeTree with a
# deduplication window where a real cluster has ReplicatedMergeTree. No second node, no second
# shard, no replica.
source "$(dirname "$0")/lib.sh"
need_chdb
cat >"$T/cluster.xml" <<'XML'
<clickhouse>
  <tcp_port>9000</tcp_port>
  <remote_servers>
    <coroot>
      <shard><replica><host>localhost</host><port>9000</port></replica></shard>
    </coroot>
  </remote_servers>
</clickhouse>
XML
mkring --services 3 --intervals 6 --stacks 40 --seed 31 --end-ago-s 120
start_front --config "$T/cluster.xml"
[ "$(chq_db default "SELECT cluster, is_local FROM system.clusters")" = "$(printf 'coroot\t1')" ] ||
    fail "the engine has no cluster coroot of itself"

# Coroot's schema on a cluster (MergeTree for Replicated*), the Distributed tables as Coroot
# makes them, but profiling_profiles not yet.
chq_db default "CREATE DATABASE coroot" || fail "CREATE DATABASE"
chq "CREATE TABLE profiling_stacks (ServiceName LowCardinality(String), Hash UInt64,
       LastSeen DateTime64(9), Stack Array(String))
     ENGINE ReplacingMergeTree PRIMARY KEY (ServiceName, Hash) PARTITION BY toDate(LastSeen)
     ORDER BY (ServiceName, Hash) SETTINGS non_replicated_deduplication_window = 1000" || fail "stacks"
chq "CREATE TABLE profiling_samples (ServiceName LowCardinality(String), Type LowCardinality(String),
       Start DateTime64(9), End DateTime64(9), Labels Map(LowCardinality(String), String),
       StackHash UInt64, Value Int64)
     ENGINE MergeTree PARTITION BY toDate(Start)
     ORDER BY (ServiceName, Type, toUnixTimestamp(Start), toUnixTimestamp(End))
     SETTINGS non_replicated_deduplication_window = 1000" || fail "samples"
chq "CREATE TABLE profiling_stacks_distributed AS profiling_stacks
     ENGINE = Distributed(coroot, currentDatabase(), profiling_stacks, Hash)" || fail "stacks_distributed"
chq "CREATE TABLE profiling_samples_distributed AS profiling_samples
     ENGINE = Distributed(coroot, currentDatabase(), profiling_samples, StackHash)" || fail "samples_distributed"

# create_tables must not make profiling_profiles (a plain table where Coroot wants a replicated
# one): the sink waits for Coroot, nothing inserted.
rc=0
ship_ch --once --deadline 3s >"$T/refuse.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "the shipper shipped without profiling_profiles"
grep -q "not creating tables: database coroot is on a ClickHouse cluster (it has Distributed tables" "$T/refuse.log" ||
    fail "no clear refusal: $(tail -3 "$T/refuse.log")"
[ "$(chq "EXISTS TABLE profiling_profiles")" = 0 ] || fail "the shipper created profiling_profiles"
[ "$(chq "SELECT count() FROM profiling_samples")" = 0 ] || fail "rows went in anyway"
"$SHIPPER" status --store "$T/ring.db" --state "$T/state.db" --sink clickhouse \
    --url "http://127.0.0.1:$CH_PORT" --database coroot >"$T/status.txt" 2>&1 || fail "status failed"
grep -q "^  database      coroot$" "$T/status.txt" || fail "status does not name the database: $(cat "$T/status.txt")"
grep -q "not creating tables" "$T/status.txt" || fail "status does not show why the sink waits"

# Coroot makes the rest; the first samples insert is stored but its answer lost.
chq "CREATE TABLE profiling_profiles (ServiceName LowCardinality(String), Type LowCardinality(String),
       LastSeen DateTime64(9)) ENGINE ReplacingMergeTree PRIMARY KEY (ServiceName, Type)
     PARTITION BY toDate(LastSeen)" || fail "profiles"
chq "CREATE MATERIALIZED VIEW profiling_profiles_mv TO profiling_profiles AS
     SELECT ServiceName, Type, max(End) AS LastSeen FROM profiling_samples GROUP BY ServiceName, Type" || fail "mv"
ch_fault "mode=lost&count=1&match=INSERT%20INTO%20profiling_samples_distributed"
ship_ch --once --batch-chunks 6 >"$T/ship.log" 2>&1 || fail "shipping failed: $(tail -3 "$T/ship.log")"
grep -q "fault=lost.*INSERT INTO profiling_samples_distributed" "$T/front.log" || fail "the fault did not hit"
grep "status=200" "$T/front.log" | grep "INSERT INTO profiling_stacks_distributed" >/dev/null ||
    fail "stacks did not go through profiling_stacks_distributed"
if grep "status=200" "$T/front.log" | grep -E "INSERT INTO profiling_(samples|stacks) \(" >/dev/null; then
    fail "rows went into the local tables, not through the Distributed ones"
fi
check_ch_exact # the retried insert doubled nothing

# More of the same stacks, later: the stacks' LastSeen is asked through the Distributed table
# (that question, and it alone, answered 503 once).
mkring --services 3 --intervals 3 --stacks 40 --seed 31
ch_fault "mode=503&count=1&match=FROM%20profiling_stacks_distributed%20WHERE"
ship_ch --once --batch-chunks 6 >"$T/ship2.log" 2>&1 || fail "shipping failed: $(tail -3 "$T/ship2.log")"
grep -q "fault=503 .*q=SELECT indexOf(" "$T/front.log" ||
    fail "the stacks' LastSeen was not asked through profiling_stacks_distributed"
grep -q "asking for the stacks' LastSeen: HTTP 503" "$T/ship2.log" || fail "the 503 did not reach the lookup"
check_ch_exact
check_ch_hashes
read -r first last < <(ring_span)
CH_TABLES=_distributed compare_flame "$first" "$last"
[ "$(chq "SELECT count(DISTINCT ServiceName, Type) FROM profiling_profiles")" = 3 ] ||
    fail "profiling_profiles_mv was not fed"
echo PASS
