/* Benchmark workload: spins forever through deep-ish call stacks (depth 20..40, several
 * distinct stacks) and counts finished work units in a shared file (argv[1]) so the harness can
 * measure the work rate while a profiler runs. With argv[2], it stays on that CPU.
 *
 * The spinning reads the clock in a loop and adds up the gaps between two reads: the time the
 * CPU was taken from the workload. Short gaps are interrupts (a sampling profiler's stack walk
 * runs there, on the workload's time, where neither the profiler's CPU time nor BPF statistics
 * see it); long ones are other tasks running. A profiler's sampling interrupts come once a
 * period on each CPU, so the short gaps are also added up by their start time modulo each
 * sampling period of the benchmarks (100, 99, 98, 97, 96 Hz): the profiler's gaps pile up in one
 * phase, the rest spread out, and the harness tells them apart (bench_recorder.py, gap_cost).
 *
 * The file, native-endian u64s: [0] work units, [1] ns in short gaps, [2] their number, [3] ns
 * in long gaps, [4] their number, [5] phase bin width in ns, [6] number of periods; then for
 * each period: its length in ns, its number of bins B, B gap counts, B gap ns. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define UNIT 20000ul
/* A read of the clock takes ~20-50 ns here: a longer gap is time taken away. */
#define GAP_NS 500u
/* An interrupt, even one walking a deep kernel stack, is done well within this; a longer gap is
 * a context switch. */
#define LONG_GAP_NS 100000u
#define BIN_NS      2000u

enum { WORK, SHORT_NS, SHORT_N, LONG_NS, LONG_N, BIN, NPERIODS, HEADER = 8 };

/* 100 Hz (pfr-recorder), 99 Hz (perf -F 99, bpftrace hz:99), 98 Hz (bpftrace beside perf in
 * bench_sample_cost.py, perf in bench_unwind.py), 97 Hz (an earlier pfr-recorder there, the
 * frame-pointer recorder in bench_unwind.py) and 96 Hz (perf --call-graph dwarf there): the
 * kernel's cpu-clock period for a frequency f is 1e9 / f ns. */
static const uint64_t periods[] = {1000000000u / 100u, 1000000000u / 99u, 1000000000u / 98u,
                                   1000000000u / 97u, 1000000000u / 96u};
#define NPHASES  (sizeof(periods) / sizeof(periods[0]))
#define MAX_BINS 5300u /* 96 Hz: 5209 bins of 2 us */

struct phase {
    volatile uint64_t *count, *ns;
    uint64_t period;
};

static volatile uint64_t *counter;
static struct phase phases[NPHASES];
static uint64_t gaps[BIN]; /* this unit's, added to the file when it ends */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void note_gap(uint64_t start, uint64_t d)
{
    if (d >= LONG_GAP_NS) {
        gaps[LONG_NS] += d;
        gaps[LONG_N] += 1;
        return;
    }
    gaps[SHORT_NS] += d;
    gaps[SHORT_N] += 1;
    for (size_t i = 0; i < NPHASES; i++) {
        uint64_t b = (start % phases[i].period) / BIN_NS;
        phases[i].count[b] += 1;
        phases[i].ns[b] += d;
    }
}

__attribute__((noinline)) static void spin(unsigned long n)
{
    uint64_t last = now_ns();
    for (unsigned long i = 0; i < n; i++) {
        uint64_t t = now_ns();
        if (t - last >= GAP_NS)
            note_gap(last, t - last);
        last = t;
    }
}

__attribute__((noinline)) static void descend_b(int d);

__attribute__((noinline)) static void descend_a(int d)
{
    if (d <= 0)
        spin(UNIT);
    else
        descend_b(d - 1);
}

__attribute__((noinline)) static void descend_b(int d)
{
    if (d <= 0)
        spin(UNIT);
    else
        descend_a(d - 1);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (argc > 2) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(atoi(argv[2]), &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0)
            return 1;
    }
    size_t size = (HEADER + NPHASES * (2 + 2 * MAX_BINS)) * sizeof(uint64_t);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
        return 1;
    counter = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (counter == MAP_FAILED)
        return 1;
    counter[BIN] = BIN_NS;
    counter[NPERIODS] = NPHASES;
    volatile uint64_t *p = counter + HEADER;
    for (size_t i = 0; i < NPHASES; i++) {
        uint64_t nbins = periods[i] / BIN_NS + 1;
        p[0] = periods[i];
        p[1] = nbins;
        phases[i] = (struct phase){p + 2, p + 2 + nbins, periods[i]};
        p += 2 + 2 * nbins;
    }
    for (uint64_t i = 0;; i++) {
        descend_a(20 + (int)(i % 21));
        gaps[WORK] = 1;
        /* one writer per file: plain stores, read by the harness between units or mid-way */
        for (int c = 0; c < BIN; c++) {
            __atomic_store_n(&counter[c], counter[c] + gaps[c], __ATOMIC_RELAXED);
            gaps[c] = 0;
        }
    }
}
