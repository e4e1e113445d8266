/* A short-lived process: spins argv[1] milliseconds (default 50) and exits. */
#include <stdlib.h>
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

int main(int argc, char **argv)
{
    pfr_short_spin(argc > 1 ? atof(argv[1]) : 50.0);
    return 0;
}
