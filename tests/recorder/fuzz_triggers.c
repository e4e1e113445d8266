/* Fuzz the triggers' parsers of outside input: POST /pin's query (split at '&' and '=' as the
 * HTTP server does), PSI texts and memory.events texts. The first byte picks the parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trig_internal.h"

static void query(const char *text)
{
    char *copy = strdup(text);
    if (!copy)
        return;
    pfr_pin_arg args[16];
    size_t n = 0;
    for (char *save = NULL, *kv = strtok_r(copy, "&", &save); kv && n < 16;
         kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (eq)
            *eq = '\0';
        args[n++] = (pfr_pin_arg){kv, eq ? eq + 1 : NULL};
    }
    static const pfr_triggers_config cfg = {.before_ns = 600000000000LL,
                                            .after_ns = 120000000000LL};
    pfr_pin_request *r = malloc(sizeof(*r));
    char err[512];
    if (r && pfr_pin_query_parse(args, n, 1800000000000000000LL, &cfg, r, err, sizeof(err)) == 0) {
        if (r->from_ns > r->to_ns || strlen(r->reason) > PFR_PIN_REASON_MAX || !r->reason[0])
            abort();
    }
    free(r);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 3) {
    case 0: {
        char *s = malloc(len + 1);
        if (!s)
            return 0;
        memcpy(s, text, len);
        s[len] = '\0';
        query(s);
        free(s);
        break;
    }
    case 1: {
        pfr_psi p;
        if (pfr_trig_psi_parse(text, len, &p) == 0 && !(p.some_avg10 >= 0 && p.some_avg10 <= 100))
            abort();
        break;
    }
    default: {
        uint64_t high;
        pfr_trig_memory_events_high(text, len, &high);
        break;
    }
    }
    return 0;
}
