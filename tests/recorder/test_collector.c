/* The collector's posting rule: a source whose due says it has no work is left asleep, its time
 * covered by its next collection; it is still collected once a minute, and always at the stop. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector.h"

#define SEC 1000000000LL

typedef struct fake {
    bool due;
    int collections;
    int64_t start, end; /* of the last collection */
    int64_t asked_end;  /* the end_ns due was last asked about */
} fake;

static int fake_collect(void *self, int64_t start_ns, int64_t end_ns, pfr_emit_fn emit,
                        void *emit_ctx)
{
    (void)emit;
    (void)emit_ctx;
    fake *f = self;
    f->collections++;
    f->start = start_ns;
    f->end = end_ns;
    return 0;
}

static bool fake_due(void *self, int64_t end_ns)
{
    fake *f = self;
    f->asked_end = end_ns;
    return f->due;
}

static const pfr_source_ops due_ops = {.name = "fake", .collect = fake_collect, .due = fake_due};
static const pfr_source_ops plain_ops = {.name = "plain", .collect = fake_collect};

typedef struct rig {
    fake f;
    int efd;
    pfr_collector *c;
} rig;

static void rig_start(rig *r, const pfr_source_ops *ops)
{
    r->f = (fake){0};
    r->efd = eventfd(0, EFD_CLOEXEC);
    assert_true(r->efd >= 0);
    pfr_source src = {.ops = ops, .self = &r->f};
    assert_int_equal(pfr_collector_start(&src, 100 * SEC, r->efd, NULL, &r->c), 0);
}

static void rig_stop(rig *r)
{
    assert_int_equal(pfr_collector_stop(r->c, 5 * SEC), 0);
    close(r->efd);
}

/* Serve the collector until its posted collection has ended. */
static void settle(rig *r)
{
    for (int i = 0; i < 500 && !pfr_collector_serve(r->c, NULL, NULL); i++) {
        struct pollfd p = {.fd = r->efd, .events = POLLIN};
        poll(&p, 1, 10);
        uint64_t v;
        if (p.revents & POLLIN)
            assert_int_equal(read(r->efd, &v, sizeof(v)), sizeof(v));
    }
    assert_true(pfr_collector_serve(r->c, NULL, NULL));
}

static void post_and_settle(rig *r, int64_t end, bool always)
{
    assert_int_equal(pfr_collector_post(r->c, end, always), 0);
    settle(r);
}

static void test_not_due_is_left_asleep(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, &due_ops);
    post_and_settle(&r, 110 * SEC, false);
    assert_int_equal(r.f.asked_end, 110 * SEC);
    assert_int_equal(r.f.collections, 0);
    assert_int_equal(pfr_collector_next_start(r.c), 100 * SEC);
    pfr_collector_stats st;
    pfr_collector_stats_get(r.c, &st);
    assert_int_equal(st.not_due, 1);
    assert_int_equal(st.collections, 0);

    /* due: one collection covers the interval left to it as well */
    r.f.due = true;
    post_and_settle(&r, 120 * SEC, false);
    assert_int_equal(r.f.collections, 1);
    assert_int_equal(r.f.start, 100 * SEC);
    assert_int_equal(r.f.end, 120 * SEC);
    assert_int_equal(pfr_collector_next_start(r.c), 120 * SEC);
    rig_stop(&r);
}

static void test_collected_at_least_once_a_minute(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, &due_ops);
    int64_t end = 100 * SEC;
    for (int i = 0; i < 5; i++) { /* 50 s: not due */
        end += 10 * SEC;
        post_and_settle(&r, end, false);
    }
    assert_int_equal(r.f.collections, 0);
    end += 10 * SEC; /* 60 s since the last collection's end: collected, due or not */
    post_and_settle(&r, end, false);
    assert_int_equal(r.f.collections, 1);
    assert_int_equal(r.f.start, 100 * SEC);
    assert_int_equal(r.f.end, 160 * SEC);
    pfr_collector_stats st;
    pfr_collector_stats_get(r.c, &st);
    assert_int_equal(st.not_due, 5);
    rig_stop(&r);
}

static void test_always_and_no_due(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, &due_ops);
    post_and_settle(&r, 105 * SEC, true); /* the stop's last collection */
    assert_int_equal(r.f.collections, 1);
    assert_int_equal(r.f.end, 105 * SEC);
    rig_stop(&r);

    rig_start(&r, &plain_ops); /* a source without due: every interval */
    post_and_settle(&r, 110 * SEC, false);
    post_and_settle(&r, 120 * SEC, false);
    assert_int_equal(r.f.collections, 2);
    assert_int_equal(r.f.start, 110 * SEC);
    rig_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_due_is_left_asleep),
        cmocka_unit_test(test_collected_at_least_once_a_minute),
        cmocka_unit_test(test_always_and_no_due),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
