/* Starts RATE processes per second for SECONDS seconds (argv: rate seconds program [args...]),
 * from 4 spawner processes at once (one spawner is limited by exec latency), reaping them as
 * they exit. Prints how many it started. */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPAWNERS 4

extern char **environ;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spawner(double rate, double seconds, char **argv, int out)
{
    double t0 = now_s();
    long started = 0, failed = 0;
    while (now_s() - t0 < seconds) {
        double wait = t0 + (double)(started + failed) / rate - now_s();
        if (wait > 0) {
            struct timespec ts = {.tv_sec = (time_t)wait,
                                  .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        }
        pid_t pid;
        if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) == 0)
            started++;
        else
            failed++;
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
    }
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    long r[2] = {started, failed};
    if (write(out, r, sizeof(r)) != sizeof(r))
        _exit(1);
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: spawn_storm RATE SECONDS PROGRAM [ARGS...]\n");
        return 2;
    }
    double rate = atof(argv[1]), seconds = atof(argv[2]);
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    double t0 = now_s();
    for (int i = 0; i < SPAWNERS; i++)
        if (fork() == 0)
            spawner(rate / SPAWNERS, seconds, &argv[3], fds[1]);
    close(fds[1]);
    long started = 0, failed = 0, r[2];
    while (read(fds[0], r, sizeof(r)) == sizeof(r)) {
        started += r[0];
        failed += r[1];
    }
    while (wait(NULL) > 0)
        ;
    printf("started %ld failed %ld in %.2f s\n", started, failed, now_s() - t0);
    return failed ? 1 : 0;
}
