/* The triggers' victims (triggers_itest.py): each mode ends (or does not end) the way a trigger
 * must see, or must not.
 *   segv      dies of SIGSEGV (a null store)
 *   abort     dies of SIGABRT
 *   handled   takes 1000 SIGSEGVs in a handler that skips past them, then exits 0 (a JVM's
 *             null checks: no death, no trigger)
 *   exit11    exits with status 11 (SIGSEGV's number, but no signal)
 *   alloc     touches memory until the OOM killer ends it
 *   spin S    burns CPU for S seconds of wall time
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf back;
static volatile sig_atomic_t caught;

static void on_segv(int sig)
{
    (void)sig;
    caught++;
    siglongjmp(back, 1);
}

static int handled(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    for (int i = 0; i < 1000; i++) {
        if (sigsetjmp(back, 1) == 0) {
            volatile int *p = NULL;
            *p = i;
        }
    }
    printf("caught %d\n", (int)caught);
    return caught == 1000 ? 0 : 1;
}

/* Every block is chained to the one before, so no compiler can prove the memory unused and
 * drop the allocations (clang removes a malloc whose block is never read). */
static void *volatile last;

static void alloc(void)
{
    for (;;) {
        void **p = malloc(1 << 20);
        if (!p)
            continue;
        memset(p, 1, 1 << 20);
        *p = last;
        last = p;
    }
}

static void spin(double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile unsigned long x = 0;
    do {
        for (int i = 0; i < 1000000; i++)
            x += (unsigned long)i;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "segv") == 0) {
        volatile int *p = NULL;
        *p = 1;
    } else if (strcmp(mode, "abort") == 0) {
        abort();
    } else if (strcmp(mode, "handled") == 0) {
        return handled();
    } else if (strcmp(mode, "exit11") == 0) {
        return 11;
    } else if (strcmp(mode, "alloc") == 0) {
        alloc();
    } else if (strcmp(mode, "spin") == 0 && argc > 2) {
        spin(atof(argv[2]));
        return 0;
    }
    fprintf(stderr, "usage: pfr-trig-victim segv|abort|handled|exit11|alloc|spin SECONDS\n");
    return 2;
}
