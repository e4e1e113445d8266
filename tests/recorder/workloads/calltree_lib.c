/* A known call tree for the recorder tests: each round, pfr_heavy() does three units of work and
 * pfr_light() one, both through the same leaf, so 3/4 of the CPU time is under pfr_heavy. Built
 * -O0 -fno-omit-frame-pointer -fno-inline so the frames exist as written. */
#include <time.h>

#define UNIT 100000ul

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void pfr_burn(unsigned long n)
{
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++)
        x += i;
}

__attribute__((noinline)) void pfr_heavy(unsigned long unit)
{
    pfr_burn(3 * unit);
}

__attribute__((noinline)) void pfr_light(unsigned long unit)
{
    pfr_burn(unit);
}

__attribute__((noinline)) void pfr_work_loop(double seconds)
{
    double end = now_s() + seconds;
    /* the length of a round varies at random (heavy stays 3x light in every round): a fixed
     * round could beat against the fixed sampling period and bias the split */
    unsigned long long seed = (unsigned long long)(now_s() * 1e9);
    while (now_s() < end) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        unsigned long unit = UNIT / 2 + (unsigned long)(seed >> 33) % UNIT;
        pfr_heavy(unit);
        pfr_light(unit);
    }
}
