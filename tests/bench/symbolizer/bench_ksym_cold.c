/* Kernel symbol lookups on a cold table: the symbolizer names a few new kernel frames an
 * interval, seconds after its last look at the table, and in a guest a page not touched for a
 * second or more can cost tens of µs to touch again (docs/benchmarks.md, "Cold pages").
 * /proc/kallsyms is read once (pfr_sym_kallsyms_read); then, ROUNDS times, after PAUSE seconds
 * of sleep, LOOKUPS random text addresses are looked up by pfr_sym_kallsyms_find (the table as
 * the symbolizer keeps it: on a huge page where the kernel gives one, searched through the index
 * of its blocks) and by a binary search of every symbol in a copy made by malloc (the peer: the
 * table as it was kept before), in an order that alternates by round, so that neither warms the
 * other's pages. Prints the median thread-CPU µs a lookup of each,
 * their ratio, and a check that both found the same symbols.
 * Usage (as root, for the addresses): bench_ksym_cold [ROUNDS 15] [PAUSE 3] [LOOKUPS 20] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sym_kallsyms.h"

static double thread_cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* The peer: the last symbol at or below addr, by a binary search of all of them. */
static const struct pfr_sym_ksym *flat_find(const struct pfr_sym_ksym *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &v[lo - 1] : NULL;
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), by_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    double pause = argc > 2 ? atof(argv[2]) : 3;
    int lookups = argc > 3 ? atoi(argv[3]) : 20;
    if (rounds < 1 || rounds > 1000 || pause < 0 || lookups < 1 || lookups > 100000) {
        fprintf(stderr, "usage: %s [ROUNDS] [PAUSE_S] [LOOKUPS]\n", argv[0]);
        return 2;
    }
    struct pfr_sym_kallsyms k = {0};
    char err[256] = "";
    if (pfr_sym_kallsyms_read("/proc/kallsyms", &k, err, sizeof(err)) || k.n < 2) {
        fprintf(stderr, "kallsyms: %s%s\n", err, k.restricted ? " (addresses hidden: root?)" : "");
        return 1;
    }
    /* the peer's own copy: the two never share a page */
    struct pfr_sym_ksym *flat = malloc(k.n * sizeof(*flat));
    double *idx_us = calloc((size_t)rounds, sizeof(double));
    double *flat_us = calloc((size_t)rounds, sizeof(double));
    uint64_t *probe = calloc((size_t)lookups, sizeof(uint64_t));
    if (!flat || !idx_us || !flat_us || !probe)
        return 1;
    memcpy(flat, k.v, k.n * sizeof(*flat));
    uint64_t lo = k.v[0].addr, span = k.v[k.n - 1].addr - lo;
    size_t differ = 0;
    srand(1);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < lookups; i++)
            probe[i] = lo + (uint64_t)(((double)rand() / RAND_MAX) * (double)span);
        for (int turn = 0; turn < 2; turn++) {
            bool index = (turn == 0) == (r % 2 == 0);
            struct timespec ts = {(time_t)pause, (long)((pause - (double)(time_t)pause) * 1e9)};
            nanosleep(&ts, NULL);
            double t0 = thread_cpu_us();
            for (int i = 0; i < lookups; i++) {
                const struct pfr_sym_ksym *a =
                    index ? pfr_sym_kallsyms_find(&k, probe[i]) : flat_find(flat, k.n, probe[i]);
                __asm__ volatile("" : : "r"(a) : "memory");
            }
            double us = (thread_cpu_us() - t0) / lookups;
            (index ? idx_us : flat_us)[r] = us;
        }
        for (int i = 0; i < lookups; i++) { /* warm now: the same answers? */
            const struct pfr_sym_ksym *a = pfr_sym_kallsyms_find(&k, probe[i]);
            const struct pfr_sym_ksym *b = flat_find(flat, k.n, probe[i]);
            if ((a ? a->addr : 0) != (b && probe[i] - b->addr < PFR_KSYM_MAX_SPAN ? b->addr : 0))
                differ++;
        }
    }
    double mi = median(idx_us, (size_t)rounds), mf = median(flat_us, (size_t)rounds);
    printf("kallsyms: %zu symbols (%.1f MiB), index of %zu blocks; %d rounds of %d lookups after "
           "%.1f s of sleep each\n",
           k.n, (double)(k.n * sizeof(*k.v)) / 1048576.0, k.ntop, rounds, lookups, pause);
    printf("µs a lookup (thread CPU, median of rounds): index %.2f, search of all (peer) %.2f, "
           "index / peer %.2f\n",
           mi, mf, mf > 0 ? mi / mf : 0);
    printf("answers that differ: %zu\n", differ);
    pfr_sym_kallsyms_free(&k);
    free(flat);
    free(idx_us);
    free(flat_us);
    free(probe);
    return differ ? 1 : 0;
}
