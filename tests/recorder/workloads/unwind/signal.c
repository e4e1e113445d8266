/* The leaf called from a signal handler that interrupts the leaf itself.
 *
 *   main -> run -> main_path -> hot_leaf                                    75%
 *   main -> run -> main_path -> hot_leaf -> <signal frame> -> on_tick -> hot_leaf   25%
 *
 * A CPU-time timer (ITIMER_PROF, every 2 ms) interrupts the program, nearly always inside the
 * frameless leaf; the handler then runs the leaf until the handler's share of all the work is
 * 1/4. An unwinder must go from the handler through the kernel's signal frame (libc's
 * __restore_rt) back into the interrupted leaf, then on to main.
 * Usage: uw-signal SECONDS; prints "truth main_path=N on_tick=N" (leaf iterations) at exit. */
#include "uw_common.h"

#include <signal.h>
#include <string.h>
#include <sys/time.h>

static volatile unsigned long work_main, work_tick;
static unsigned long tick_unit = 40000;

UW_NOINLINE void on_tick(int sig)
{
    (void)sig;
    while (3 * work_tick < work_main) {
        uw_sink += hot_leaf(tick_unit);
        work_tick += tick_unit;
    }
}

UW_NOINLINE void main_path(unsigned long unit)
{
    uw_sink += hot_leaf(unit);
    work_main += unit;
}

UW_NOINLINE void run(double seconds)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_tick;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 2000}, {0, 2000}};
    setitimer(ITIMER_PROF, &it, NULL);

    uw_deadline end = uw_deadline_in(seconds);
    unsigned long long seed = uw_seed();
    while (uw_before(&end))
        main_path(uw_unit(&seed, 40000));

    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
}

int main(int argc, char **argv)
{
    run(uw_seconds(argc, argv));
    printf("truth main_path=%lu on_tick=%lu\n", work_main, work_tick);
    return 0;
}
