/* goheap_dump: collect Go heap profiles of the given pids and print them (a debugging aid and
 * the tool the shell-level checks drive). Usage:
 *   goheap_dump [-m enabled|force] [-n COUNT] [-i INTERVAL_MS] [-q] PID...            */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pfr_goheap.h"
#include "pfr_goheap_sym.h"

static int quiet;

static void on_profile(void *ctx, const pfr_goheap_proc *in, pfr_profile *p)
{
    (void)ctx;
    printf("profile pid=%d exe=%s go=%s rate=%" PRId64 " buckets=%zu baseline=%d samples=%zu "
           "alloc_total=%" PRId64 "B/%" PRId64 " inuse=%" PRId64 "B/%" PRId64
           " interval_alloc=%" PRId64 "B/%" PRId64 "\n",
           (int)in->pid, in->exe, in->go_version, in->mem_profile_rate, in->buckets, in->baseline,
           pfr_profile_num_samples(p), in->alloc_bytes_total, in->alloc_objects_total,
           in->inuse_bytes, in->inuse_objects, in->interval_alloc_bytes,
           in->interval_alloc_objects);
    for (size_t i = 0; !quiet && i < pfr_profile_num_samples(p); i++) {
        const int64_t *v = pfr_profile_sample_values(p, i);
        pfr_frame fr[64];
        size_t n = pfr_profile_sample_frames(p, i, fr, 64);
        printf("  %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 ":", v[0], v[1], v[2], v[3]);
        for (size_t k = 0; k < n && k < 64; k++)
            printf(" %s(%s:%" PRId64 ")", fr[k].function, fr[k].file, fr[k].line);
        printf("\n");
    }
    pfr_profile_free(p);
}

static void on_event(void *ctx, const pfr_goheap_event *ev)
{
    (void)ctx;
    printf("event kind=%d pid=%d exe=%s err=%d msg=%s\n", ev->kind, (int)ev->pid, ev->exe, ev->err,
           ev->msg);
}

int main(int argc, char **argv)
{
    enum pfr_goheap_mode mode = PFR_GOHEAP_ENABLED;
    int count = 1, interval_ms = 1000, opt;
    while ((opt = getopt(argc, argv, "m:n:i:q")) != -1) {
        if (opt == 'm' && pfr_goheap_parse_mode(optarg, &mode) == 0)
            continue;
        if (opt == 'n')
            count = atoi(optarg);
        else if (opt == 'i')
            interval_ms = atoi(optarg);
        else if (opt == 'q')
            quiet = 1;
        else
            return 2;
    }
    size_t npids = (size_t)(argc - optind);
    pid_t *pids = calloc(npids + 1, sizeof(*pids));
    for (size_t i = 0; i < npids; i++)
        pids[i] = atoi(argv[optind + (int)i]);
    pfr_symbolizer *sym;
    if (pfr_symbolizer_new(&(pfr_sym_opts){0}, &sym) < 0)
        return 1;
    pfr_goheap_opts o = {.mode = mode, .resolver = pfr_goheap_sym_resolver(sym)};
    pfr_goheap *c;
    if (pfr_goheap_new(&o, &c) < 0)
        return 1;
    pfr_goheap_sink sink = {NULL, on_profile, on_event};
    for (int k = 0; k < count; k++) {
        if (k)
            usleep((useconds_t)interval_ms * 1000);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        int rc = pfr_goheap_collect(c, now, npids ? pids : NULL, npids, &sink);
        printf("collect %d rc=%d\n", k, rc);
    }
    pfr_goheap_stats st;
    pfr_goheap_get_stats(c, &st);
    printf("stats go=%" PRIu64 " profiles=%" PRIu64 " not_sampling=%" PRIu64 " forced=%" PRIu64
           " stripped=%" PRIu64 " walk_errors=%" PRIu64 " buckets=%" PRIu64 " reads=%" PRIu64
           " bytes=%" PRIu64 " resolves=%" PRIu64 " ns=%" PRIu64 "\n",
           st.go_processes, st.profiles, st.not_sampling, st.rates_forced, st.stripped_binaries,
           st.walk_errors, st.buckets_read, st.mem_reads, st.mem_bytes, st.resolver_calls,
           st.collect_ns);
    pfr_goheap_free(c);
    pfr_symbolizer_free(sym);
    free(pids);
    return 0;
}
