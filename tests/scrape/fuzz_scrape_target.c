/* libFuzzer: the config line "URL service=NAME key=value ..." and URL normalisation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_scrape.h"
#include "scrape_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *line = malloc(size + 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    pfr_scrape_target *t = NULL;
    char err[256];
    if (pfr_scrape_parse_target(line, &t, err, sizeof(err)) == 0) {
        struct sc_want w;
        /* what the parser accepted, adding accepts too */
        if (pfr_scrape_want_make(&w, t->url, t->service, t->labels, t->nlabels, PFR_SCRAPE_STATIC,
                                 0, 0, err, sizeof(err)) != 0)
            __builtin_trap();
        if (strstr(w.base, "/debug/pprof") == NULL)
            __builtin_trap();
        pfr_scrape_want_free(&w);
        free(t);
    }
    free(line);
    return 0;
}
