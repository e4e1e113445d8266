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

__attribute__((noinline)) void pfr_heavy(void)
{
    pfr_burn(3 * UNIT);
}

__attribute__((noinline)) void pfr_light(void)
{
    pfr_burn(UNIT);
}

__attribute__((noinline)) void pfr_work_loop(double seconds)
{
    double end = now_s() + seconds;
    while (now_s() < end) {
        pfr_heavy();
        pfr_light();
    }
}
