/* Host calibration for the recorder benchmarks: the CPU a thread is charged for waking after a
 * sleep and going back to sleep, doing nothing else. On a quiet bare-metal host that is a few
 * microseconds; on a shared VM it grows with the time asleep (caches, TLB and the guest's pages
 * gone cold), and a daemon's CPU on that host is then mostly its wake-ups: a figure to read
 * beside a profiler's wakes a second (bench_recorder.py) and to compare runs on different days.
 *
 * Usage: bench_wake SLEEP_MS [COUNT]  (COUNT 0 or none: until SIGINT/SIGTERM). Prints the
 * median, lowest and highest CPU per wake-up, in microseconds, from /proc/thread-self/schedstat
 * (the scheduler's run time, to the nanosecond). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_WAKES 4096

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

/* Run time of this thread so far, ns; -1 if unreadable. */
static long long run_ns(int fd)
{
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return atoll(buf);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: bench_wake SLEEP_MS [COUNT]\n");
        return 2;
    }
    int ms = atoi(argv[1]);
    long count = argc > 2 ? atol(argv[2]) : 0;
    if (count <= 0 || count > MAX_WAKES)
        count = MAX_WAKES;
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "bench_wake: /proc/thread-self/schedstat: %s\n", strerror(errno));
        return 1;
    }
    static long long cost[MAX_WAKES];
    long n = 0;
    /* a wake's cost: from the end of one sleep's preparation to the start of the next, i.e. the
     * run time charged across one poll() that slept */
    long long before = run_ns(fd);
    while (!stop && n < count) {
        if (poll(NULL, 0, ms) < 0 && errno == EINTR)
            break;
        long long after = run_ns(fd);
        if (before >= 0 && after >= before)
            cost[n++] = after - before;
        before = run_ns(fd);
    }
    close(fd);
    if (n == 0) {
        printf("bench_wake: no wake-up measured\n");
        return 1;
    }
    qsort(cost, (size_t)n, sizeof(cost[0]), cmp_ll);
    printf("bench_wake: %ld wake-ups after %d ms asleep: median %.1f us of CPU each (lowest %.1f, "
           "highest %.1f)\n",
           n, ms, (double)cost[n / 2] / 1e3, (double)cost[0] / 1e3, (double)cost[n - 1] / 1e3);
    return 0;
}
