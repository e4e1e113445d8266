/* Fuzz pfr_systemd_unit_parse (a unit file's text) and pfr_systemd_name_ok over the same bytes:
 * no crash, no leak, and what the parser hands out is trimmed: no key with '=' or a line break,
 * no blank around keys and values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_systemd_unit.h"

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int check(const char *section, const char *key, const char *value, void *ctx)
{
    size_t *n = ctx;
    size_t k = strlen(key), v = strlen(value);
    if (!section[0] || strchr(key, '=') || strchr(key, '\n') || strchr(value, '\n'))
        abort();
    if ((k && (blank(key[0]) || blank(key[k - 1]))) ||
        (v && (blank(value[0]) || blank(value[v - 1]))))
        abort();
    return ++*n > 100000 ? 1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    pfr_systemd_unit_parse((const char *)data, size, check, &n);
    char name[PFR_SYSTEMD_NAME_MAX + 1];
    size_t m = size < PFR_SYSTEMD_NAME_MAX ? size : PFR_SYSTEMD_NAME_MAX;
    memcpy(name, data, m);
    name[m] = '\0';
    if (pfr_systemd_name_ok(name) && (strchr(name, '/') || strlen(name) >= PFR_SYSTEMD_NAME_MAX))
        abort();
    return 0;
}
