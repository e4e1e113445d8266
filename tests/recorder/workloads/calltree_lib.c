/* A known call tree for the recorder tests: each round, pfr_heavy() runs for three units of this
 * thread's CPU time and pfr_light() for one, both in the same leaf, so 3/4 of the CPU time under
 * the two is under pfr_heavy. Built -O0 -fno-omit-frame-pointer -fno-inline so the frames exist as
 * written.
 *
 * The split is kept by the thread's CPU clock, not by counting iterations: an iteration does not
 * cost the same in every build and call (gcc's -fPIC -O0 library gave pfr_heavy 71.7% of perf's
 * samples for 3/4 of the iterations, issue 35). The work loop lays out a schedule on that clock,
 * a slot of 3 units for pfr_heavy then 1 for pfr_light, and the leaf spins until its slot ends. A
 * leaf overshoots its slot by less than one chunk of spinning, which the next slot loses: the
 * overshoots cancel, so each function's CPU time is its slots' to within a chunk over the run. */
#include <time.h>

/* spins between two reads of the CPU clock: a read is a system call (1-6 us here), a chunk is
 * 50-250 us, so the leaf spends a few percent of its time in the kernel, alike in both slots */
#define CHUNK   50000ul
#define UNIT_NS 1000000ll /* a unit of CPU time is 1-3 ms, drawn at random each round */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* spins until this thread's CPU clock reads until_ns */
__attribute__((noinline)) void pfr_burn(long long until_ns)
{
    volatile unsigned long x = 0;
    while (cpu_ns() < until_ns)
        for (unsigned long i = 0; i < CHUNK; i++)
            x += i;
}

__attribute__((noinline)) void pfr_heavy(long long until_ns)
{
    pfr_burn(until_ns);
}

__attribute__((noinline)) void pfr_light(long long until_ns)
{
    pfr_burn(until_ns);
}

__attribute__((noinline)) void pfr_work_loop(double seconds)
{
    double end = now_s() + seconds;
    /* the length of a round varies at random (heavy stays 3x light in every round): a fixed
     * round could beat against the fixed sampling period and bias the split */
    unsigned long long seed = (unsigned long long)(now_s() * 1e9);
    long long slot = cpu_ns();
    while (now_s() < end) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        long long unit = UNIT_NS + (long long)((seed >> 33) % (2 * UNIT_NS));
        pfr_heavy(slot += 3 * unit);
        pfr_light(slot += unit);
    }
}
