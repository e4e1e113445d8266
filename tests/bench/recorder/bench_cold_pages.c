/* Host calibration for the recorder's heap on huge pages (recorder/heap_pages.h): what looking
 * things up in a table costs after the thread slept, with the table on 4 KiB pages and on 2 MiB
 * transparent huge pages, side by side in one run (the rounds alternate, so both meet the same
 * host). The table is 4 MiB of sorted 16-byte entries, as the kernel's symbols are in the
 * symbolizer; a round sleeps SLEEP_MS, then makes 20 binary searches (about an interval's new
 * kernel frames) and reads this thread's CPU around them.
 *
 * Usage: bench_cold_pages SLEEP_MS [ROUNDS]  (ROUNDS of each page size, 10 if none). Prints the
 * median CPU of a round on each and their ratio, and how much of the huge one the kernel gave
 * huge pages (AnonHugePages of this process). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define TABLE_BYTES (4u << 20)
#define HUGE_BYTES  (2u << 20)
#define SEARCHES    20
#define MAX_ROUNDS  1000

struct entry {
    uint64_t addr, name;
};

static double thread_cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* A table of n entries, on huge pages if asked (2 MiB aligned, MADV_HUGEPAGE before the first
 * touch); NULL if it cannot be mapped. */
static struct entry *new_table(size_t n, int huge)
{
    size_t len = n * sizeof(struct entry) + HUGE_BYTES;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct entry *t =
        (struct entry *)(((uintptr_t)p + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
    madvise(t, n * sizeof(*t), huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < n; i++)
        t[i] = (struct entry){.addr = (uint64_t)i * 4096 + 7, .name = i};
    return t;
}

static size_t search(const struct entry *t, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long anon_huge_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    int sleep_ms = argc > 1 ? atoi(argv[1]) : 0;
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    if (sleep_ms <= 0 || rounds <= 0 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: bench_cold_pages SLEEP_MS [ROUNDS (1-%d)]\n", MAX_ROUNDS);
        return 2;
    }
    size_t n = TABLE_BYTES / sizeof(struct entry);
    struct entry *tab[2] = {new_table(n, 0), new_table(n, 1)};
    if (!tab[0] || !tab[1]) {
        fprintf(stderr, "bench_cold_pages: mmap: %s\n", strerror(errno));
        return 1;
    }
    static double us[2][MAX_ROUNDS];
    unsigned seed = 1;
    uint64_t sink = 0;
    /* one warm-up round each, not counted: the first touches were page faults */
    for (int r = -1; r < rounds; r++) {
        for (int h = 0; h < 2; h++) {
            usleep((useconds_t)sleep_ms * 1000);
            double t0 = thread_cpu_us();
            for (int s = 0; s < SEARCHES; s++) {
                seed = seed * 1103515245u + 12345u;
                sink += search(tab[h], n, (uint64_t)(seed % (n * 2)) * 4096);
            }
            if (r >= 0)
                us[h][r] = thread_cpu_us() - t0;
        }
    }
    for (int h = 0; h < 2; h++)
        qsort(us[h], (size_t)rounds, sizeof(double), cmp_double);
    double small = us[0][rounds / 2], huge = us[1][rounds / 2];
    printf("after %d ms asleep, %d searches of a 4 MiB table (median of %d rounds, CPU us): "
           "4 KiB pages %.1f, 2 MiB pages %.1f, ratio %.2f; AnonHugePages %ld kB%s\n",
           sleep_ms, SEARCHES, rounds, small, huge, huge > 0 ? small / huge : 0.0, anon_huge_kib(),
           sink == 42 ? " " : "");
    return 0;
}
