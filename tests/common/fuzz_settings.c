/* Fuzz pfr_settings_load_text (the demo's tables, a collected [sink NAME] group included) and
 * the pfr_units parsers over the same bytes: a refusal is fine, a crash or a leak is not, and a
 * value read back from what is printed must be the same value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_units.h"
#include "settings_demo_table.h"

static int take(void *ctx, const pfr_settings_group *g, const char *instance,
                const pfr_setting *row, const char *value, enum pfr_settings_layer layer,
                const char *where, char *err, size_t errlen)
{
    (void)ctx, (void)g, (void)instance, (void)row, (void)layer, (void)where, (void)err;
    (void)errlen;
    return strlen(value) > 100 ? -EINVAL : 0;
}

static void units(const char *s)
{
    char err[256], b[64];
    int64_t ns, back_ns;
    if (pfr_parse_duration(s, &ns, err, sizeof(err)) == 0 &&
        (pfr_parse_duration(pfr_format_duration(ns, b, sizeof(b)), &back_ns, NULL, 0) ||
         back_ns != ns))
        abort();
    uint64_t u, back;
    if (pfr_parse_size(s, &u, err, sizeof(err)) == 0 &&
        (pfr_parse_size(pfr_format_size(u, b, sizeof(b)), &back, NULL, 0) || back != u))
        abort();
    bool v;
    pfr_parse_count(s, 1000, &u, err, sizeof(err));
    pfr_parse_bool(s, &v, err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (size < 64)
        units(s);
    struct demo_conf c = {0};
    char err[1024];
    static const char *const ignore[] = {"other", NULL};
    pfr_settings *st = pfr_settings_new("fuzz", "PFR_FUZZ_", "usage");
    if (st && !pfr_settings_bind(st, &demo_group, &c, err, sizeof(err)) &&
        !pfr_settings_bind(st, &demo_service_group, &c, err, sizeof(err)) &&
        !pfr_settings_bind_collect(st, &demo_sink_group, take, NULL, err, sizeof(err)))
        pfr_settings_load_text(st, s, size, "fuzz.ini", ignore, err, sizeof(err));
    pfr_settings_release(&demo_group, &c);
    pfr_settings_release(&demo_service_group, &c);
    pfr_settings_free(st);
    free(s);
    return 0;
}
