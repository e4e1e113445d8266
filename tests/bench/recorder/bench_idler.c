/* Benchmark workload: a mostly idle process. Every few seconds it wakes up and works for about a
 * millisecond, so a profiler sees it now and then (and must keep what it knows about it). */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) static void tick(void)
{
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 300000; i++)
        x += i;
}

int main(int argc, char **argv)
{
    srand((unsigned)getpid());
    double period = argc > 1 ? atof(argv[1]) : 3.0;
    for (;;) {
        useconds_t us = (useconds_t)(period * 1e6 * (0.5 + (double)rand() / RAND_MAX));
        usleep(us);
        tick();
    }
}
