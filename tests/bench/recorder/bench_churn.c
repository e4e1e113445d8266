/* Benchmark workload: a busy host's process churn. Starts RATE short-lived processes a second
 * (PROGRAM ARGS..., output to /dev/null) at random moments (a Poisson process: evenly spaced
 * starts would beat with a sampler's period and be always or never sampled), and reaps them,
 * until killed. Each child
 * is a real dynamically linked program, so a profiler that samples it has its mappings and
 * files to deal with, as with shell scripts, cron jobs and compilers on real hosts.
 *
 * Usage: bench_churn RATE PROGRAM [ARGS...] */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_until(const struct timespec *t)
{
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL) != 0) {
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_churn RATE PROGRAM [ARGS...]\n");
        return 2;
    }
    double rate = atof(argv[1]);
    if (rate <= 0) {
        fprintf(stderr, "bench_churn: RATE must be positive\n");
        return 2;
    }
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    srand48((long)next.tv_nsec ^ (long)getpid());
    for (;;) {
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_RDWR);
            if (null >= 0) {
                dup2(null, 1);
                dup2(null, 2);
            }
            execv(argv[2], argv + 2);
            _exit(127);
        }
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        /* exponential gaps of mean 1/RATE; 1 - drand48() is in (0, 1] */
        next.tv_nsec += (long)(-log(1.0 - drand48()) / rate * 1e9);
        while (next.tv_nsec >= 1000000000) { /* a gap may span seconds */
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        sleep_until(&next);
    }
}
