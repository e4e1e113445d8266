/* Writes the binary seeds of the fuzz corpora: corpus/elf (synthetic Go-like executables) and
 * corpus/convert (an endpoint byte and a pprof body per endpoint). Run by hand when the formats
 * change: scrape_make_seeds tests/scrape/corpus */
#include <stdio.h>
#include <stdlib.h>

#include "pfr_scrape.h"
#include "scrape_elf.h"
#include "scrape_elfgen.h"
#include "scrape_testutil.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    static const unsigned elf_flags[] = {EG_GO | EG_SYMTAB, EG_GO | EG_PCLNTAB, EG_SYMTAB,
                                         EG_GO | EG_SYMTAB | EG_AS_OBJECT};
    char path[4096];
    for (size_t i = 0; i < sizeof(elf_flags) / sizeof(elf_flags[0]); i++) {
        uint8_t *b;
        size_t len;
        if (pfr_eg_go_binary(elf_flags[i], SC_PPROF_SYMBOL, 0, &b, &len))
            return 1;
        snprintf(path, sizeof(path), "%s/elf/seed-%zu", argv[1], i);
        if (pfr_tu_write_file(path, b, len))
            return 1;
        free(b);
    }
    for (int ep = 0; ep < PFR_SCRAPE_NUM_ENDPOINTS; ep++) {
        uint8_t *b;
        size_t len;
        if (pfr_tu_make_profile(ep, 3, &b, &len))
            return 1;
        uint8_t *out = malloc(len + 1);
        out[0] = (uint8_t)ep;
        for (size_t i = 0; i < len; i++)
            out[i + 1] = b[i];
        snprintf(path, sizeof(path), "%s/convert/%s", argv[1], pfr_scrape_endpoint_name(ep));
        if (pfr_tu_write_file(path, out, len + 1))
            return 1;
        free(out);
        free(b);
    }
    return 0;
}
