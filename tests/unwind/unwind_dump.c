/* unwind_dump FILE...: the unwind rows pfr would give the sampler for each file, as text (file
 * virtual address, kind, off, arg), then the build's figures, with the process's peak RSS so far
 * (one file a run to measure a build's). For humans and benchmarks; not installed. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "unwind_table.h"

static const char *const kinds[PFR_UW_KINDS] = {
    [PFR_UW_NONE] = "none",
    [PFR_UW_CFA_RSP] = "rsp",
    [PFR_UW_CFA_RBP] = "rbp",
    [PFR_UW_PLT] = "plt",
    [PFR_UW_SIGNAL] = "signal",
    [PFR_UW_END] = "end",
    [PFR_UW_CFA_DEREF_RBP] = "deref_rbp",
};

static int dump(const char *path, unsigned flags, size_t max_rows, int quiet)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return 1;
    }
    pfr_unwind_table t;
    char err[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = pfr_unwind_table_build_capped(fd, flags, max_rows, &t, err, sizeof(err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    close(fd);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (rc < 0) {
        int why = pfr_unwind_refusal(rc);
        fprintf(stderr, "%s: %s (%s)%s%s\n", path, err, strerror(-rc),
                why >= 0 ? ", refused: " : "", why >= 0 ? pfr_unwind_refusal_name(why) : "");
        fprintf(stderr, "  after %.1f ms, peak rss %ld KiB (this process so far)\n", ms,
                ru.ru_maxrss);
        return 1;
    }
    size_t count[PFR_UW_KINDS] = {0};
    for (size_t i = 0; i < t.nrows; i++) {
        uint32_t r = t.rows[i].rule;
        unsigned kind = PFR_UW_RULE_KIND(r);
        int off = kind == PFR_UW_CFA_DEREF_RBP ? (int)PFR_UW_RULE_SOFF(r) : (int)PFR_UW_RULE_OFF(r);
        if (kind < PFR_UW_KINDS)
            count[kind]++;
        if (!quiet)
            printf("%#" PRIx64 " %s off %d arg %d\n", t.base + t.rows[i].pc,
                   kind < PFR_UW_KINDS ? kinds[kind] : "?", off, PFR_UW_RULE_ARG(r));
    }
    printf("%s: base %#" PRIx64 " delta %#" PRIx64 " fdes %" PRIu64 " rows_in %" PRIu64
           " rows %zu unsupported %" PRIu64 "%s, %.1f ms\n",
           path, t.base, t.delta, t.stats.fdes, t.stats.rows_in, t.nrows, t.stats.unsupported,
           t.stats.debug_frame ? " (.debug_frame)" : "", ms);
    printf("  peak rss %ld KiB (this process so far)\n", ru.ru_maxrss);
    printf("  by kind:");
    for (unsigned k = 0; k < PFR_UW_KINDS; k++)
        printf(" %s %zu", kinds[k], count[k]);
    printf("\n");
    pfr_unwind_table_free(&t);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned flags = 0;
    size_t max_rows = 0;
    int quiet = 0, i = 1, rc = 0;
    char *end = NULL;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-q") == 0)
            quiet = 1;
        else if (strcmp(argv[i], "--go") == 0)
            flags |= PFR_UNWIND_BUILD_GO;
        else if (strcmp(argv[i], "--max-rows") == 0 && i + 1 < argc)
            max_rows = strtoull(argv[++i], &end, 10);
        else
            break;
        if (end && *end)
            break;
    }
    if (i >= argc || (end && *end)) {
        fprintf(stderr,
                "usage: unwind_dump [-q] [--go] [--max-rows N] FILE...\n"
                "  -q              the figures only, not the rows\n"
                "  --go            build Go programs' tables too\n"
                "  --max-rows N    give up past N rows, as the recorder does past its\n"
                "                  map's capacity (default: the library's, 2Mi)\n"
                "The other limits are the library's (unwind_table.h), as in the recorder.\n");
        return 2;
    }
    for (; i < argc; i++)
        rc |= dump(argv[i], flags, max_rows, quiet);
    return rc;
}
