/* Peak memory and time of symbolizing a file, each in a child of its own:
 *   sym_peak [-c CACHE_BYTES] [-n ADDRESSES] FILE...
 * prints, per file, how much VmHWM rose over VmRSS, the wall time, the frames named and the
 * files refused by reason. For measuring the symbolizer's bounds on real and hostile files. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolizer.h"

#include "hostile.h"

int main(int argc, char **argv)
{
    pfr_sym_opts opts = {0};
    unsigned n = 200;
    int c;
    while ((c = getopt(argc, argv, "c:n:")) != -1) {
        if (c == 'c')
            opts.max_cache_bytes = strtoull(optarg, NULL, 0);
        else if (c == 'n')
            n = (unsigned)strtoul(optarg, NULL, 0);
        else
            return 2;
    }
    int bad = 0;
    for (int i = optind; i < argc; i++) {
        struct hg_file_result r;
        if (pfr_hg_measure_file(argv[i], &opts, n, 120, &r) != 0) {
            printf("%s: failed (crashed, timed out or not mappable)\n", argv[i]);
            bad = 1;
            continue;
        }
        printf("%s: peak +%ld KiB, %.1f ms, %u/%u named, %u with a line, parsed %" PRIu64
               ", errors %" PRIu64,
               argv[i], r.peak_kb, (double)r.ns / 1e6, r.named, n, r.lined, r.st.files_parsed,
               r.st.errors);
#ifdef PFR_SYM_REFUSAL_H
        for (int k = PFR_REFUSED_NONE + 1; k < PFR_NREFUSALS; k++)
            if (r.st.files_refused[k])
                printf(", refused %s %" PRIu64, pfr_refusal_name(k), r.st.files_refused[k]);
#endif
        printf("\n");
    }
    return bad;
}
