/*
 * Pins, the public calls (pfr_store.h): add (with the budget), list, remove. The rows and the
 * matching are store_pins.c's; eviction's side is in store_write.c. Design: docs/store.md,
 * "Pins".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_handle.h"
#include "store_pins.h"

/* The calling thread's involuntary context switches: how often a loaded machine took the CPU
 * from it (told apart from the time the pin itself took with the lock). */
static long involuntary_switches(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

static int64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The budget in force: a writer's own; a reader's from the writer's settings in meta (a quarter
 * of the writer's cap when the writer predates pins; its own cap's quarter without a writer). */
static uint64_t pin_budget(pfr_store *s)
{
    if (!s->read_only)
        return s->pin_max_bytes;
    int64_t v = 0;
    if (pfr_st_query_int(&s->sql, "SELECT value FROM meta WHERE key = 'pin_max_bytes'", &v) == 0 &&
        v > 0)
        return (uint64_t)v;
    if (pfr_st_query_int(&s->sql, "SELECT value FROM meta WHERE key = 'max_bytes'", &v) == 0 &&
        v > 0)
        return (uint64_t)v / 4;
    return s->max_bytes / 4;
}

/* The connection a pin is written through: a writer's own, or for a read-only handle one of its
 * own, read-write, for one transaction (the recorder may hold the ring's writer meanwhile: WAL
 * lets the two take turns). */
struct pin_conn {
    struct store_db own;
    struct store_db *d;
};

static int conn_open(pfr_store *s, struct pin_conn *c, char *err, size_t errlen)
{
    *c = (struct pin_conn){0};
    if (!s->read_only) {
        c->d = &s->sql;
        return 0;
    }
    int rc =
        sqlite3_open_v2(s->path, &c->own.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_extended_result_codes(c->own.db, 1);
        sqlite3_busy_timeout(c->own.db, s->sql.busy_ms);
        /* the last connection to close must leave -wal and -shm, as the writer does */
        int persist = 1;
        sqlite3_file_control(c->own.db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        /* No sync while the lock is held: the recorder's writer would wait for our fdatasync
         * (3-30 ms here). NORMAL would still sync the WAL's header when the transaction is the
         * first after a checkpoint reset the WAL (5 ms seen beside the recorder), so OFF, and
         * conn_sync makes the pin durable after the lock is released. A power cut before that
         * loses the pin, not the ring's consistency: frames are checksummed and salted against
         * the header, so recovery keeps the last whole commit. What OFF would break, a
         * checkpoint writing pages of an unsynced WAL into the database, this connection never
         * does: no automatic checkpoint, none at close (the writer or the next one does it). */
        sqlite3_db_config(c->own.db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
        rc = sqlite3_exec(c->own.db, "PRAGMA synchronous = OFF; PRAGMA wal_autocheckpoint = 0",
                          NULL, NULL, NULL);
    }
    if (rc != SQLITE_OK) {
        char msg[600];
        snprintf(msg, sizeof(msg),
                 "cannot open %s to write a pin (pins need write access "
                 "to the ring: run as its owner or root)",
                 s->path);
        rc = pfr_st_fail(&c->own, pfr_store_errno(rc), err, errlen, msg);
        pfr_st_db_close(&c->own);
        return rc;
    }
    c->d = &c->own;
    return 0;
}

/* After the commit, outside the lock: the WAL (which holds the transaction's frames) synced, so a
 * pin whose call returned survives a power cut, as a chunk does. */
static int conn_sync(pfr_store *s, struct pin_conn *c)
{
    if (c->d != &c->own)
        return 0; /* a writer's own connection commits with synchronous=FULL */
    char path[4096];
    if (snprintf(path, sizeof(path), "%s-wal", s->path) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* no WAL: checkpointed into the database */
    int rc = fdatasync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

static void conn_close(struct pin_conn *c)
{
    if (c->d == &c->own)
        pfr_st_db_close(&c->own);
}

static int txn_end(struct store_db *d, int rc)
{
    if (!rc)
        rc = pfr_st_exec(d, "COMMIT");
    if (rc && !sqlite3_get_autocommit(d->db))
        pfr_st_exec(d, "ROLLBACK");
    return rc;
}

static int service_known(struct store_dict *dict, const char *service)
{
    int rc = pfr_st_streams_refresh(dict);
    if (rc)
        return rc;
    for (size_t i = 0; i < dict->nstreams; i++)
        if (!dict->streams[i].bad && strcmp(dict->streams[i].service, service) == 0)
            return 0;
    return -ENOENT;
}

/* The budget's decision for candidate cand of pins (id 0: a new pin, borrowed from the caller),
 * in a read transaction: automatic pins released oldest first (never the candidate) while they
 * all keep more than the budget. -ENOSPC when the manual pins (or the candidate alone) still
 * do. */
static int plan(pfr_store *s, struct store_pins *pins, int64_t cand, pfr_pin_result *r,
                int64_t *released, size_t *nreleased, char *err, size_t errlen)
{
    r->budget = pin_budget(s);
    uint64_t total = 0;
    long v;
    int rc;
    while ((rc = pfr_st_pins_bytes(&s->dict, pins, &total)) == 0 && total > r->budget &&
           (v = pfr_st_pins_victim(pins, false)) >= 0) {
        if (*nreleased < PFR_PIN_RELEASED_MAX)
            released[*nreleased] = pins->v[v].id;
        ++*nreleased;
        pfr_st_pins_drop(pins, (size_t)v);
    }
    for (size_t i = 0; i < pins->n; i++)
        if (pins->v[i].id == cand)
            r->bytes = pins->v[i].bytes;
    r->pinned_bytes = total;
    if (!rc && total > r->budget) {
        char msg[320];
        snprintf(msg, sizeof(msg),
                 "the pin would keep %.1f MiB and all pins %.1f MiB, over their budget of %.1f "
                 "MiB (pin_max_bytes), which manual pins hold: release one (pfr pins, pfr unpin "
                 "ID) or pin a shorter range",
                 r->bytes / 1048576.0, total / 1048576.0, r->budget / 1048576.0);
        return pfr_st_fail(NULL, -ENOSPC, err, errlen, msg);
    }
    return rc ? pfr_st_fail(&s->sql, rc, err, errlen, "cannot measure the pinned chunks") : 0;
}

/* A new pin: the pins with it last (borrowed from in), planned. */
static int plan_add(pfr_store *s, const pfr_pin_in *in, pfr_pin_result *r, int64_t *released,
                    size_t *nreleased, char *err, size_t errlen)
{
    struct store_pins pins;
    int rc = pfr_st_pins_load(&s->sql, &pins);
    if (rc)
        return pfr_st_fail(&s->sql, rc, err, errlen, "cannot read the pins");
    if (VEC_RESERVE(pins.v, pins.cap, pins.n + 1)) {
        pfr_st_pins_free(&pins);
        return -ENOMEM;
    }
    /* mem NULL: nothing of it is freed; not automatic: never released for itself */
    pins.v[pins.n++] = (struct store_pin){
        .from_ns = in->from_ns,
        .to_ns = in->to_ns,
        .service = (char *)in->service,
        .labels = (pfr_kv *)in->labels,
        .nlabels = in->nlabels,
    };
    rc = plan(s, &pins, 0, r, released, nreleased, err, errlen);
    pfr_st_pins_free(&pins);
    return rc;
}

int pfr_store_pin_add(pfr_store *s, const pfr_pin_in *in, pfr_pin_result *out, char *err,
                      size_t errlen)
{
    pfr_pin_result r = {0};
    if (err && errlen)
        err[0] = 0;
    int rc = pfr_st_pins_validate(in, err, errlen);
    if (rc)
        return rc;
    int64_t released[PFR_PIN_RELEASED_MAX];
    size_t nrel = 0;
    if ((rc = pfr_st_begin_read(&s->sql)) != 0)
        return pfr_st_fail(&s->sql, rc, err, errlen, "cannot read the ring");
    if (in->service && (rc = service_known(&s->dict, in->service)) != 0) {
        pfr_st_end_read(&s->sql);
        if (rc != -ENOENT)
            return pfr_st_fail(&s->sql, rc, err, errlen, "cannot read the ring's streams");
        char msg[320];
        snprintf(msg, sizeof(msg), "no service \"%.200s\" in the ring (pfr ls lists them)",
                 in->service);
        return pfr_st_fail(NULL, rc, err, errlen, msg);
    }
    rc = plan_add(s, in, &r, released, &nrel, err, errlen);
    pfr_st_end_read(&s->sql);
    if (rc)
        return rc;

    struct pin_conn c;
    if ((rc = conn_open(s, &c, err, errlen)) != 0)
        return rc;
    /* The write lock is held from here to the commit: deletes, one insert, one counter. */
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    rc = pfr_st_exec(c.d, "BEGIN IMMEDIATE");
    if (rc) {
        pfr_st_fail(c.d, rc, err, errlen, "cannot lock the ring to write a pin");
        conn_close(&c);
        return rc;
    }
    t0 = now_ns(CLOCK_MONOTONIC);
    long csw0 = involuntary_switches();
    size_t gone = 0;
    for (size_t i = 0; i < nrel && i < PFR_PIN_RELEASED_MAX && !rc; i++) {
        rc = pfr_st_pins_delete(c.d, released[i]);
        if (rc == -ENOENT) /* released meanwhile (by hand, or by eviction) */
            rc = 0;
        else if (!rc)
            gone++;
    }
    if (!rc)
        rc = pfr_st_pins_insert(c.d, in, now_ns(CLOCK_REALTIME), r.bytes, &r.id);
    if (!rc && gone)
        rc = pfr_st_meta_add(c.d, "pins_released", (int64_t)gone);
    if (rc)
        pfr_st_fail(c.d, rc, err, errlen, "cannot write the pin");
    rc = txn_end(c.d, rc);
    if (rc && err && errlen && !err[0])
        pfr_st_fail(c.d, rc, err, errlen, "cannot commit the pin");
    r.lock_ns = (uint64_t)(now_ns(CLOCK_MONOTONIC) - t0);
    long csw = involuntary_switches() - csw0;
    r.lock_preempted = csw > 0 ? (uint32_t)csw : 0;
    if (!rc && (rc = conn_sync(s, &c)) != 0)
        pfr_st_fail(NULL, rc, err, errlen, "cannot sync the ring's WAL after writing the pin");
    conn_close(&c);
    r.nreleased = nrel;
    memcpy(r.released, released,
           sizeof(int64_t) * (nrel < PFR_PIN_RELEASED_MAX ? nrel : PFR_PIN_RELEASED_MAX));
    if (!rc && out)
        *out = r;
    return rc;
}

int pfr_store_pin_extend(pfr_store *s, int64_t id, int64_t from_ns, int64_t to_ns,
                         pfr_pin_result *out, char *err, size_t errlen)
{
    pfr_pin_result r = {.id = id};
    if (err && errlen)
        err[0] = 0;
    if (from_ns >= to_ns)
        return pfr_st_fail(NULL, -EINVAL, err, errlen, "the range is empty or backwards");
    int64_t released[PFR_PIN_RELEASED_MAX];
    size_t nrel = 0;
    int64_t from = from_ns, to = to_ns;
    struct store_pins pins;
    int rc = pfr_st_begin_read(&s->sql);
    if (rc)
        return pfr_st_fail(&s->sql, rc, err, errlen, "cannot read the ring");
    if ((rc = pfr_st_pins_load(&s->sql, &pins)) != 0) {
        pfr_st_end_read(&s->sql);
        return pfr_st_fail(&s->sql, rc, err, errlen, "cannot read the pins");
    }
    rc = -ENOENT;
    for (size_t i = 0; i < pins.n; i++) {
        struct store_pin *p = &pins.v[i];
        if (p->id != id)
            continue;
        from = p->from_ns = p->from_ns < from_ns ? p->from_ns : from_ns;
        to = p->to_ns = p->to_ns > to_ns ? p->to_ns : to_ns;
        p->automatic = false; /* never released for itself */
        rc = 0;
    }
    if (rc == -ENOENT) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no pin %lld (pfr pins lists them)", (long long)id);
        pfr_st_fail(NULL, rc, err, errlen, msg);
    } else {
        rc = plan(s, &pins, id, &r, released, &nrel, err, errlen);
    }
    pfr_st_pins_free(&pins);
    pfr_st_end_read(&s->sql);
    if (rc)
        return rc;
    struct pin_conn c;
    if ((rc = conn_open(s, &c, err, errlen)) != 0)
        return rc;
    if ((rc = pfr_st_exec(c.d, "BEGIN IMMEDIATE")) != 0) {
        pfr_st_fail(c.d, rc, err, errlen, "cannot lock the ring to extend a pin");
        conn_close(&c);
        return rc;
    }
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    size_t gone = 0;
    for (size_t i = 0; i < nrel && i < PFR_PIN_RELEASED_MAX && !rc; i++) {
        rc = pfr_st_pins_delete(c.d, released[i]);
        if (rc == -ENOENT)
            rc = 0;
        else if (!rc)
            gone++;
    }
    if (!rc)
        rc = pfr_st_pins_set_range(c.d, id, from, to, r.bytes);
    if (!rc && gone)
        rc = pfr_st_meta_add(c.d, "pins_released", (int64_t)gone);
    if (rc)
        pfr_st_fail(c.d, rc, err, errlen,
                    rc == -ENOENT ? "the pin was released meanwhile" : "cannot extend the pin");
    rc = txn_end(c.d, rc);
    r.lock_ns = (uint64_t)(now_ns(CLOCK_MONOTONIC) - t0);
    if (!rc && (rc = conn_sync(s, &c)) != 0)
        pfr_st_fail(NULL, rc, err, errlen, "cannot sync the ring's WAL after extending the pin");
    conn_close(&c);
    r.nreleased = nrel;
    memcpy(r.released, released,
           sizeof(int64_t) * (nrel < PFR_PIN_RELEASED_MAX ? nrel : PFR_PIN_RELEASED_MAX));
    if (!rc && out)
        *out = r;
    return rc;
}

int pfr_store_pins(pfr_store *s, pfr_pin_cb cb, void *ctx)
{
    struct store_pins pins = {0};
    uint64_t total;
    int rc = pfr_st_begin_read(&s->sql);
    if (rc)
        return rc;
    if ((rc = pfr_st_pins_load(&s->sql, &pins)) == 0)
        rc = pfr_st_pins_bytes(&s->dict, &pins, &total);
    pfr_st_end_read(&s->sql);
    for (size_t i = 0; !rc && i < pins.n; i++) {
        const struct store_pin *p = &pins.v[i];
        pfr_pin_info info = {
            .id = p->id,
            .from_ns = p->from_ns,
            .to_ns = p->to_ns,
            .created_ns = p->created_ns,
            .service = p->service,
            .labels = p->labels,
            .nlabels = p->nlabels,
            .reason = p->reason,
            .origin = p->origin,
            .automatic = p->automatic,
            .bytes = p->bytes,
        };
        rc = cb(&info, ctx);
    }
    pfr_st_pins_free(&pins);
    return rc;
}

int pfr_store_pin_remove(pfr_store *s, int64_t id, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    struct pin_conn c;
    int rc = conn_open(s, &c, err, errlen);
    if (rc)
        return rc;
    if ((rc = pfr_st_exec(c.d, "BEGIN IMMEDIATE")) != 0) {
        pfr_st_fail(c.d, rc, err, errlen, "cannot lock the ring to release a pin");
        conn_close(&c);
        return rc;
    }
    rc = pfr_st_pins_delete(c.d, id);
    if (rc == -ENOENT) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no pin %lld (pfr pins lists them)", (long long)id);
        pfr_st_fail(NULL, rc, err, errlen, msg);
    } else if (rc) {
        pfr_st_fail(c.d, rc, err, errlen, "cannot release the pin");
    }
    rc = txn_end(c.d, rc);
    if (rc && err && errlen && !err[0])
        pfr_st_fail(c.d, rc, err, errlen, "cannot commit");
    if (!rc && (rc = conn_sync(s, &c)) != 0)
        pfr_st_fail(NULL, rc, err, errlen, "cannot sync the ring's WAL");
    conn_close(&c);
    return rc;
}
