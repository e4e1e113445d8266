/* The host of the hostile sections (hostile_itest.py): two frames of CPU for argv[1] seconds.
 * The test strips its .eh_frame and gives it sections crafted the way a local attacker would. */
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) void pfr_hostile_leaf(void)
{
    volatile unsigned long x = 0;
    for (int i = 0; i < 100000; i++)
        x += (unsigned long)i;
}

__attribute__((noinline)) void pfr_hostile_mid(void)
{
    pfr_hostile_leaf();
}

int main(int argc, char **argv)
{
    double end = now() + (argc > 1 ? atof(argv[1]) : 10.0);
    while (now() < end)
        pfr_hostile_mid();
    return 0;
}
