/* settings_demo: a program made of the demo tables, for settings_demo_test.sh. It prints the
 * settings it ends up with, one "key=value" a line, and what each [sink NAME] was given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_units.h"
#include "settings_demo_table.h"

extern char **environ;

static int print_sink_value(void *ctx, const pfr_settings_group *g, const char *instance,
                            const pfr_setting *row, const char *value,
                            enum pfr_settings_layer layer, const char *where, char *err,
                            size_t errlen)
{
    static const char *const layers[] = {"file", "env", "flag"};
    (void)ctx, (void)g, (void)where, (void)err, (void)errlen;
    printf("sink %s %s=%s (%s)\n", instance ? instance : "*", row->key, value, layers[layer]);
    return 0;
}

static void print_conf(const struct demo_conf *c)
{
    char b[64];
    printf("store=%s\n", c->store ? c->store : "(none)");
    printf("interval=%s\n", pfr_format_duration(c->interval_ns, b, sizeof(b)));
    printf("cpu_hz=%u\n", c->cpu_hz);
    printf("max_store_bytes=%s\n", pfr_format_size(c->max_bytes, b, sizeof(b)));
    printf("port=%u\n", (unsigned)c->port);
    printf("dwarf=%s\n", c->dwarf ? "true" : "false");
    printf("unwind=%s\n", demo_modes[c->mode]);
    printf("budget_ms=%lld\n", (long long)c->budget_ms);
    printf("token=%s\n", c->token ? "(set)" : "(none)");
    printf("name=%s\n", c->name ? c->name : "(none)");
    printf("once=%s\n", c->once ? "true" : "false");
    for (size_t i = 0; i < c->rules.n; i++)
        printf("rule=%s\n", c->rules.v[i]);
}

int main(int argc, char **argv)
{
    struct demo_conf c = {0};
    char err[1024];
    pfr_settings_args a;
    pfr_settings *s = pfr_settings_new("demo", "PFR_DEMO_", "Usage: settings_demo [OPTIONS]");
    int rc = s ? 0 : 1;
    if (rc == 0)
        pfr_settings_set_sample_header(s, "demo.ini: the settings demo's configuration.\n\n"
                                          "Layers, later wins: built-in defaults < this file < "
                                          "environment (PFR_DEMO_<KEY>) < flags.");
    if (rc == 0 &&
        (pfr_settings_bind(s, &demo_group, &c, err, sizeof(err)) ||
         pfr_settings_bind(s, &demo_service_group, &c, err, sizeof(err)) ||
         pfr_settings_bind_collect(s, &demo_sink_group, print_sink_value, NULL, err, sizeof(err))))
        rc = 1;
    if (rc == 0 &&
        pfr_settings_load(s, argc, argv, environ, "PFR_DEMO_CONFIG",
                          "/nonexistent/pfr-settings-demo.ini", NULL, &a, err, sizeof(err)))
        rc = 2;
    if (rc) {
        fprintf(stderr, "settings_demo: %s\n", s ? err : "out of memory");
    } else if (a.print_settings) {
        pfr_settings_write(s, a.print_settings, stdout);
    } else if (a.help) {
        pfr_settings_write_help(s, stdout);
    } else if (a.version) {
        printf("settings_demo 1\n");
    } else if (a.first_operand < argc) {
        fprintf(stderr, "settings_demo: unexpected argument '%s'\n", argv[a.first_operand]);
        rc = 2;
    } else {
        print_conf(&c);
    }
    if (s) {
        pfr_settings_release(&demo_group, &c);
        pfr_settings_release(&demo_service_group, &c);
    }
    pfr_settings_free(s);
    return rc;
}
