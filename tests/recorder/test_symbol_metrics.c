/*
 * The symbol cache's metrics belong to the daemon, which owns the shared symbolizer
 * (daemon_services.h): no source's table has them, and the daemon publishes them itself, so
 * they are right whichever sources use the symbolizer (a Go heap or Java source with no CPU
 * collection behind them). Here a caller other than the CPU source symbolizes one of this
 * program's functions, and the daemon's publication shows that file parsed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_metrics.h"
#include "daemon_services.h"
#include "pfr_metrics.h"
#include "pfr_shared_sym.h"
#include "source.h"

static bool table_has(const pfr_metric_table *t, const char *prefix)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (strncmp(t->rows[i].name, prefix, strlen(prefix)) == 0)
            return true;
    return false;
}

static void owned_by_the_daemon(void **state)
{
    (void)state;
    size_t n;
    const pfr_source_desc *const *src = pfr_recorder_sources(&n);
    for (size_t i = 0; i < n; i++)
        for (const pfr_metric_table *const *t = src[i]->metrics; t && *t; t++) {
            assert_false(table_has(*t, "pfr_symbol_"));
            assert_false(table_has(*t, "pfr_frames_unresolved_total"));
        }
    bool found = false;
    for (const pfr_metric_table *const *t = pfr_daemon_metric_tables; *t; t++)
        found |= *t == &pfr_daemon_symbolizer_metrics;
    assert_true(found);
    assert_true(table_has(&pfr_daemon_symbolizer_metrics, "pfr_symbol_cache_bytes"));
    assert_true(table_has(&pfr_daemon_symbolizer_metrics, "pfr_frames_unresolved_total"));
}

/* The value of the series line "name value" in text, or -1. */
static double value_in(const char *text, const char *name)
{
    char key[128];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

static void published_by_the_daemon(void **state)
{
    (void)state;
    pfr_sym_opts o = {.max_cache_bytes = 7u << 20, .no_dwarf = true};
    pfr_daemon_services s = {0};
    assert_int_equal(pfr_shared_sym_new(&o, &s.sym), 0);
    pfr_daemon_metrics *m;
    char err[256];
    assert_int_equal(pfr_daemon_metrics_new("", &m, err, sizeof(err)), 0);
    pfr_symbolizer *sym = pfr_shared_sym_acquire(s.sym);
    assert_int_equal(pfr_symbolizer_add_process(sym, getpid()), 0);
    pfr_sym_frame fr[4];
    int nf = pfr_symbolize_user(sym, getpid(), (uint64_t)(uintptr_t)&value_in, fr, 4);
    pfr_shared_sym_release(s.sym);
    assert_true(nf >= 1);
    assert_string_equal(fr[0].function, "value_in");

    pfr_daemon_services_publish(&s, m);
    char *text;
    size_t len;
    assert_int_equal(pfr_metrics_render(pfr_daemon_metrics_registry(m), &text, &len), 0);
    assert_true(value_in(text, "pfr_symbol_cache_bound_bytes") == 7u << 20);
    assert_true(value_in(text, "pfr_symbol_files_parsed_total") >= 1);
    assert_true(value_in(text, "pfr_symbol_files_cached") >= 1);
    assert_true(value_in(text, "pfr_symbol_cache_bytes") > 0);
    free(text);
    pfr_daemon_metrics_free(m);
    pfr_shared_sym_free(s.sym);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(owned_by_the_daemon),
        cmocka_unit_test(published_by_the_daemon),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
