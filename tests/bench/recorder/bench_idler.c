/* Benchmark workload: a mostly idle process. Every few seconds it wakes up and works for about a
 * millisecond, so a profiler sees it now and then (and must keep what it knows about it).
 *
 * SIGUSR1 is a roll call: the process then works ROLL_CALL_MS of CPU at once, so a profiler
 * started before it meets it in its warm-up. Without it a 100 Hz sampler meets these processes
 * one by one over many minutes (their wake-ups are short), and the "steady state" a benchmark
 * measures would still be the profiler's discovery of them, with only some of them known. */
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ROLL_CALL_MS 100

static volatile sig_atomic_t roll_called;

static void on_roll_call(int sig)
{
    (void)sig;
    roll_called = 1;
}

__attribute__((noinline)) static void tick(void)
{
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < 300000; i++)
        x += i;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void answer_roll_call(void)
{
    double end = cpu_s() + ROLL_CALL_MS / 1e3;
    while (cpu_s() < end)
        tick();
}

int main(int argc, char **argv)
{
    srand((unsigned)getpid());
    double period = argc > 1 ? atof(argv[1]) : 3.0;
    struct sigaction sa = {.sa_handler = on_roll_call};
    sigaction(SIGUSR1, &sa, NULL);
    for (;;) {
        useconds_t us = (useconds_t)(period * 1e6 * (0.5 + (double)rand() / RAND_MAX));
        usleep(us); /* a roll call cuts it short (EINTR) */
        if (roll_called) {
            roll_called = 0;
            answer_roll_call();
        }
        tick();
    }
}
