/* The spin of the short-lived workloads: argv-given milliseconds of CPU in a frame of its own. */
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

__attribute__((noinline)) void pfr_short_spin(double ms)
{
    volatile unsigned long x = 0;
    double end = now_ms() + ms;
    while (now_ms() < end)
        for (int i = 0; i < 1000; i++)
            x += (unsigned long)i;
}
