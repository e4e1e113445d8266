/*
 * Pins (store_pins.c, store_pin_api.c): the table (add, list, remove, bad input), the budget
 * (automatic pins released first, manual ones kept), eviction passing pinned chunks, pins
 * released when they are the last thing left, a second connection pinning beside the writer,
 * and the migration of a schema 2 ring.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "pfr_store.h"
#include "store_test_util.h"

#define SEC 1000000000LL
#define T0  (1700000000LL * SEC)

struct fx {
    char *dir, *db;
    pfr_store *s;
};

static int open_writer(struct fx *f, uint64_t max_bytes, uint64_t pin_max)
{
    char err[256];
    pfr_store_opts o = {.max_bytes = max_bytes,
                        .pin_max_bytes = pin_max,
                        .reserve = {.mode = PFR_STORE_RESERVE_OFF}};
    int rc = pfr_store_open(f->db, &o, &f->s, err, sizeof(err));
    if (rc)
        fprintf(stderr, "open: %s\n", err);
    return rc;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->dir = pfr_tu_tmpdir("pins");
    f->db = pfr_tu_path(f->dir, "ring.db");
    *state = f;
    return open_writer(f, 64ull << 20, 0) ? -1 : 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    pfr_store_close(f->s);
    pfr_tu_rmdir(f->dir);
    free(f->dir);
    free(f->db);
    free(f);
    return 0;
}

/* n intervals of 10 s from T0 + first*10 s for services a and b (host h1, h2). */
static void fill(pfr_store *s, int first, int n, size_t samples)
{
    static pfr_kv h1 = {"host.name", "h1"}, h2 = {"host.name", "h2"};
    for (int i = first; i < first + n; i++) {
        int64_t start = T0 + i * 10 * SEC;
        pfr_profile *pa = pfr_tu_small_profile((unsigned)i, samples, "ebpf:cpu:nanoseconds");
        pfr_profile *pb = pfr_tu_small_profile((unsigned)i + 7, samples, "ebpf:cpu:nanoseconds");
        pfr_chunk_in in[2] = {{"svc-a", &h1, 1, start, start + 10 * SEC, pa},
                              {"svc-b", &h2, 1, start, start + 10 * SEC, pb}};
        assert_int_equal(pfr_store_append_batch(s, in, 2, NULL), 0);
        pfr_profile_free(pa);
        pfr_profile_free(pb);
    }
}

struct pinlist {
    size_t n;
    pfr_pin_info v[16];
    char reason[16][64], origin[16][64], service[16][32];
};

static int collect(const pfr_pin_info *p, void *ctx)
{
    struct pinlist *l = ctx;
    if (l->n < 16) {
        l->v[l->n] = *p;
        snprintf(l->reason[l->n], 64, "%s", p->reason);
        snprintf(l->origin[l->n], 64, "%s", p->origin);
        snprintf(l->service[l->n], 32, "%s", p->service ? p->service : "");
        l->n++;
    }
    return 0;
}

static struct pinlist list(pfr_store *s)
{
    struct pinlist l = {0};
    assert_int_equal(pfr_store_pins(s, collect, &l), 0);
    return l;
}

static int pin(pfr_store *s, int from, int to, const char *service, const char *origin,
               pfr_pin_result *r, char *err)
{
    pfr_pin_in in = {.from_ns = T0 + from * 10 * SEC,
                     .to_ns = T0 + to * 10 * SEC,
                     .service = service,
                     .reason = "incident 42",
                     .origin = origin};
    return pfr_store_pin_add(s, &in, r, err, 256);
}

static int count_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)m;
    (void)p;
    (void)ctx;
    return 0;
}

/* Chunks of service svc whose start lies in [from, to) intervals. */
static size_t chunks_in(pfr_store *s, const char *svc, int from, int to)
{
    pfr_store_filter f = {
        .from_ns = T0 + from * 10 * SEC, .to_ns = T0 + to * 10 * SEC, .service = svc};
    pfr_scan_stats st = {0};
    assert_int_equal(pfr_store_scan(s, &f, PFR_SCAN_META_ONLY, count_cb, NULL, &st), 0);
    return st.chunks;
}

static void test_table(void **state)
{
    struct fx *f = *state;
    fill(f->s, 0, 30, 12);
    char err[256];
    pfr_pin_result r;
    assert_int_equal(pin(f->s, 5, 10, "svc-a", "manual:alice (uid 1000)", &r, err), 0);
    assert_true(r.id > 0);
    assert_true(r.bytes > 0);
    assert_int_equal(r.nreleased, 0);
    pfr_kv lab = {"host.name", "h2"};
    pfr_pin_in in = {T0, T0 + 50 * SEC, NULL, &lab, 1, "oom kill of pid 7", "trigger:oom"};
    pfr_pin_result r2;
    assert_int_equal(pfr_store_pin_add(f->s, &in, &r2, err, sizeof(err)), 0);
    struct pinlist l = list(f->s);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].id, r.id);
    assert_string_equal(l.service[0], "svc-a");
    assert_string_equal(l.reason[0], "incident 42");
    assert_string_equal(l.origin[0], "manual:alice (uid 1000)");
    assert_false(l.v[0].automatic);
    assert_int_equal(l.v[0].bytes, r.bytes);
    assert_true(l.v[1].automatic);
    assert_string_equal(l.origin[1], "trigger:oom");
    assert_int_equal(l.v[1].nlabels, 1);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_get(f->s, &st), 0);
    assert_int_equal(st.pins, 2);
    assert_true(st.pinned_bytes >= r.bytes);
    assert_int_equal(st.pin_max_bytes, (64ull << 20) / 4);
    /* a reader handle lists the same, and releases one */
    pfr_store *ro = NULL;
    pfr_store_opts o = {.read_only = true};
    assert_int_equal(pfr_store_open(f->db, &o, &ro, err, sizeof(err)), 0);
    assert_int_equal(list(ro).n, 2);
    assert_int_equal(pfr_store_pin_remove(ro, r.id, err, sizeof(err)), 0);
    assert_int_equal(pfr_store_pin_remove(ro, r.id, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "no pin"));
    pfr_store_close(ro);
    assert_int_equal(list(f->s).n, 1);
}

static void test_bad_input(void **state)
{
    struct fx *f = *state;
    fill(f->s, 0, 5, 6);
    char err[256];
    pfr_pin_result r;
    assert_int_equal(pin(f->s, 4, 2, "svc-a", "manual:x", &r, err), -EINVAL);
    assert_non_null(strstr(err, "after its end"));
    assert_int_equal(pin(f->s, 2, 2, "svc-a", "manual:x", &r, err), -EINVAL);
    assert_non_null(strstr(err, "empty"));
    assert_int_equal(pin(f->s, 0, 2, "no-such", "manual:x", &r, err), -ENOENT);
    assert_non_null(strstr(err, "no service \"no-such\""));
    assert_int_equal(pin(f->s, 0, 2, NULL, "someone", &r, err), -EINVAL);
    assert_non_null(strstr(err, "origin"));
    char *big = malloc(10241);
    memset(big, 'x', 10240);
    big[10240] = 0;
    pfr_pin_in in = {T0, T0 + SEC, NULL, NULL, 0, big, "manual:x"};
    assert_int_equal(pfr_store_pin_add(f->s, &in, &r, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "10240 bytes, longer than the 1024"));
    big[1024] = 0; /* exactly the limit: kept */
    assert_int_equal(pfr_store_pin_add(f->s, &in, &r, err, sizeof(err)), 0);
    in.reason = "";
    assert_int_equal(pfr_store_pin_add(f->s, &in, &r, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "needs a reason"));
    in.reason = "r";
    pfr_kv bad = {"a=b", "c"};
    in.labels = &bad;
    in.nlabels = 1;
    assert_int_equal(pfr_store_pin_add(f->s, &in, &r, err, sizeof(err)), -EINVAL);
    free(big);
    assert_int_equal(list(f->s).n, 1);
}

/* The budget: automatic pins released oldest first, manual ones never for a new pin. */
static void test_budget(void **state)
{
    struct fx *f = *state;
    fill(f->s, 0, 40, 30);
    char err[256];
    pfr_pin_result r;
    /* measure what 10 intervals of svc-a keep, then set the budget to 25 of them */
    assert_int_equal(pin(f->s, 0, 10, "svc-a", "manual:m", &r, err), 0);
    uint64_t ten = r.bytes;
    assert_int_equal(pfr_store_pin_remove(f->s, r.id, err, sizeof(err)), 0);
    pfr_store_close(f->s);
    f->s = NULL;
    assert_int_equal(open_writer(f, 64ull << 20, ten * 25 / 10), 0);
    pfr_pin_result a1, a2, m1, a3;
    assert_int_equal(pin(f->s, 0, 10, "svc-a", "trigger:oom", &a1, err), 0);
    assert_int_equal(pin(f->s, 10, 20, "svc-a", "trigger:signal", &a2, err), 0);
    /* a manual pin of 10 more: 30 > 25, the oldest automatic one goes */
    assert_int_equal(pin(f->s, 20, 30, "svc-a", "manual:bob", &m1, err), 0);
    assert_int_equal(m1.nreleased, 1);
    assert_int_equal(m1.released[0], a1.id);
    assert_true(m1.pinned_bytes <= m1.budget);
    /* an overlapping pin costs only what it adds */
    pfr_pin_result ov;
    assert_int_equal(pin(f->s, 22, 28, "svc-a", "manual:bob", &ov, err), 0);
    assert_int_equal(ov.nreleased, 0);
    assert_int_equal(pfr_store_pin_remove(f->s, ov.id, err, sizeof(err)), 0);
    /* an automatic one: a2 goes */
    assert_int_equal(pin(f->s, 30, 40, "svc-a", "trigger:psi", &a3, err), 0);
    assert_int_equal(a3.nreleased, 1);
    assert_int_equal(a3.released[0], a2.id);
    /* another manual one: a3 goes, and then only the manual pin is left: refused */
    pfr_pin_result m2;
    assert_int_equal(pin(f->s, 0, 10, "svc-b", "manual:carol", &m2, err), 0);
    assert_int_equal(m2.released[0], a3.id);
    assert_int_equal(pin(f->s, 10, 20, "svc-b", "manual:carol", &r, err), -ENOSPC);
    assert_non_null(strstr(err, "budget"));
    struct pinlist l = list(f->s);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].id, m1.id);
    assert_int_equal(l.v[1].id, m2.id);
    pfr_store_stats st;
    assert_int_equal(pfr_store_stats_quick(f->s, &st), 0);
    assert_int_equal(st.pins_released, 3);
    assert_int_equal(st.pins, 2);
}

/* Extending a pin (triggers coalescing their windows): the range becomes the union, the
 * budget is applied as for a new pin (an older automatic pin goes, never the pin itself). */
static void test_extend(void **state)
{
    struct fx *f = *state;
    fill(f->s, 0, 40, 30);
    char err[256];
    pfr_pin_result r, a1, a2, e;
    assert_int_equal(pin(f->s, 0, 10, "svc-a", "manual:m", &r, err), 0);
    uint64_t ten = r.bytes;
    assert_int_equal(pfr_store_pin_remove(f->s, r.id, err, sizeof(err)), 0);
    pfr_store_close(f->s);
    f->s = NULL;
    assert_int_equal(open_writer(f, 64ull << 20, ten * 25 / 10), 0);
    assert_int_equal(pin(f->s, 0, 10, "svc-a", "trigger:oom", &a1, err), 0);
    assert_int_equal(pin(f->s, 20, 25, "svc-a", "trigger:psi", &a2, err), 0);
    /* a2 grows to 20..35: 10 + 15 > 25 intervals, so a1 (older, automatic) goes */
    assert_int_equal(
        pfr_store_pin_extend(f->s, a2.id, T0 + 300 * SEC, T0 + 350 * SEC, &e, err, sizeof(err)), 0);
    assert_int_equal(e.id, a2.id);
    assert_int_equal(e.nreleased, 1);
    assert_int_equal(e.released[0], a1.id);
    struct pinlist l = list(f->s);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].from_ns, T0 + 200 * SEC);
    assert_int_equal(l.v[0].to_ns, T0 + 350 * SEC);
    assert_true(l.v[0].bytes > ten);
    assert_int_equal(pfr_store_pin_extend(f->s, 999, T0, T0 + SEC, &e, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "no pin 999"));
    assert_int_equal(pfr_store_pin_extend(f->s, a2.id, T0 + SEC, T0, &e, err, sizeof(err)),
                     -EINVAL);
    /* past the budget with nothing automatic left to release: refused, the pin unchanged */
    assert_int_equal(pfr_store_pin_extend(f->s, a2.id, T0, T0 + 400 * SEC, &e, err, sizeof(err)),
                     -ENOSPC);
    assert_int_equal(list(f->s).v[0].from_ns, T0 + 200 * SEC);
}

/* Eviction passes pinned chunks; when pins are all that is left, they go too (counted). */
static void test_eviction_skips_pins(void **state)
{
    struct fx *f = *state;
    pfr_store_close(f->s);
    f->s = NULL;
    pfr_tu_rmdir(f->dir);
    free(f->dir);
    free(f->db);
    f->dir = pfr_tu_tmpdir("pins");
    f->db = pfr_tu_path(f->dir, "ring.db");
    assert_int_equal(open_writer(f, 1ull << 20, 0), 0);
    fill(f->s, 0, 30, 40);
    char err[256];
    pfr_pin_result r;
    assert_int_equal(pin(f->s, 5, 15, "svc-a", "manual:alice", &r, err), 0);
    size_t kept = chunks_in(f->s, "svc-a", 5, 15);
    assert_int_equal(kept, 10);
    /* far more than the cap: everything old goes but the pin */
    pfr_store_stats st;
    int i = 30;
    do {
        fill(f->s, i, 20, 40);
        i += 20;
        assert_int_equal(pfr_store_stats_quick(f->s, &st), 0);
    } while (st.evicted < 400);
    assert_int_equal(chunks_in(f->s, "svc-a", 5, 15), 10);
    assert_int_equal(chunks_in(f->s, "svc-b", 5, 15), 0);
    assert_int_equal(chunks_in(f->s, "svc-a", 0, 5), 0);
    assert_int_equal(chunks_in(f->s, "svc-a", 15, 20), 0);
    assert_int_equal(pfr_store_check(f->s, NULL, err, sizeof(err)), 0);
    /* the pinned chunks read back whole */
    pfr_store_filter fl = {.from_ns = T0 + 50 * SEC, .to_ns = T0 + 150 * SEC, .service = "svc-a"};
    pfr_scan_stats ss = {0};
    assert_int_equal(pfr_store_scan(f->s, &fl, 0, count_cb, NULL, &ss), 0);
    assert_int_equal(ss.chunks, 10);
    assert_int_equal(ss.corrupt, 0);
    assert_int_equal(st.pins_released, 0);
    pfr_store_close(f->s);
    f->s = NULL;
    /* a budget as large as the cap, and a pin of all time: when the ring must make room, the
     * pin is the last thing left and is released (the newest intervals are written) */
    assert_int_equal(open_writer(f, 1ull << 20, 1ull << 20), 0);
    pfr_pin_in all = {1, INT64_MAX, NULL, NULL, 0, "everything", "manual:alice"};
    assert_int_equal(pfr_store_pin_add(f->s, &all, &r, err, sizeof(err)), 0);
    uint64_t before = st.evicted;
    do {
        fill(f->s, i, 20, 40);
        i += 20;
        assert_int_equal(pfr_store_stats_quick(f->s, &st), 0);
    } while (st.evicted < before + 200);
    assert_int_equal(st.pins_released, 2);
    assert_int_equal(st.pins, 0);
    assert_int_equal(pfr_store_check(f->s, NULL, err, sizeof(err)), 0);
}

/* A read-only handle pins through a connection of its own while the writer has appended (and
 * goes on appending); the writer's eviction sees the pin. */
static void test_reader_pins_beside_writer(void **state)
{
    struct fx *f = *state;
    fill(f->s, 0, 10, 8);
    pfr_store *ro = NULL;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    assert_int_equal(pfr_store_open(f->db, &o, &ro, err, sizeof(err)), 0);
    pfr_pin_result r;
    assert_int_equal(pin(ro, 2, 4, "svc-b", "manual:x", &r, err), 0);
    assert_true(r.lock_ns > 0);
    assert_int_equal(r.budget, (64ull << 20) / 4); /* the writer's, from meta */
    fill(f->s, 10, 5, 8);
    assert_int_equal(list(f->s).n, 1);
    pfr_store_close(ro);
}

/* A schema 2 ring (no pins table, no tiers) opens read-write and migrates; readers refuse it
 * before. */
static void test_migrate_v2(void **state)
{
    struct fx *f = *state;
    fill(f->s, 0, 5, 8);
    pfr_store_close(f->s);
    f->s = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP INDEX chunks_tier_id; DROP INDEX chunks_base_tier;"
                                  " DROP TABLE pins; ALTER TABLE chunks DROP COLUMN tier;"
                                  " PRAGMA user_version = 2;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    char err[256];
    pfr_store *r = NULL;
    pfr_store_opts ro = {.read_only = true};
    assert_int_equal(pfr_store_open(f->db, &ro, &r, err, sizeof(err)), -EPROTO);
    assert_int_equal(open_writer(f, 64ull << 20, 0), 0);
    pfr_pin_result res;
    assert_int_equal(pin(f->s, 0, 3, "svc-a", "manual:x", &res, err), 0);
    assert_int_equal(list(f->s).n, 1);
    assert_int_equal(chunks_in(f->s, "svc-a", 0, 5), 5);
    assert_int_equal(pfr_store_check(f->s, NULL, err, sizeof(err)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_skips_pins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_pins_beside_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v2, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
