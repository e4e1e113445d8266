/*
 * The sampler's walk with unwind tables in the real kernel, on a call chain built without frame
 * pointers (workloads/nofp_chain.c: main -> chain_a -> chain_b -> chain_leaf):
 *  - auto: once the tables are in, the leaf's stacks hold chain_b, chain_a and main in order;
 *    the first samples, taken before, fell back to frame pointers and were counted as pending;
 *  - kernel -> user: with the leaf in a syscall, samples taken in the kernel keep the whole user
 *    chain (walked from the task's saved registers);
 *  - fp: no table is asked for or used, the stacks are still recorded (and lose the callers);
 *  - a cap too small for any table: every file gets 0 rows, stacks are walked by frame
 *    pointers and recorded, nothing crashes;
 *  - a cap that holds the program's table or libc's but not both, both in use: the second file
 *    gets 0 rows for a while (no room, counted), stacks still recorded.
 *  - an exit of the workload with its files named lists the mappings its samples met, and
 *    every pc of its samples in its code lies in one of them;
 * Eviction itself is held to its rules by unwinder_test, where the test plays the sampler.
 * Usage: unwind_sampler_test WORKLOAD (the nofp_chain binary).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_profiler.h"
#include "pfr_check.h"
#include "unwind_table.h"
#include "unwinder.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

struct child {
    pid_t pid;
    uint64_t fn[4]; /* chain_a, chain_b, chain_leaf, main */
};

enum { FN_A, FN_B, FN_LEAF, FN_MAIN };

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Start the workload for secs seconds (in the kernel: its leaf in a syscall) and read the
 * addresses it prints. */
static void start(const char *prog, double secs, bool kernel, struct child *c)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe: %s", strerror(errno));
    c->pid = fork();
    REQUIRE(c->pid >= 0, "fork: %s", strerror(errno));
    if (c->pid == 0) {
        char arg[32];
        snprintf(arg, sizeof(arg), "%.1f", secs);
        dup2(fds[1], 1);
        execl(prog, prog, arg, kernel ? "syscall" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    REQUIRE(f, "fdopen");
    unsigned long long a = 0, b = 0, l = 0, m = 0;
    REQUIRE(fscanf(f, "chain_a=%llx chain_b=%llx chain_leaf=%llx main=%llx", &a, &b, &l, &m) == 4,
            "%s printed no addresses", prog);
    fclose(f);
    c->fn[FN_A] = a;
    c->fn[FN_B] = b;
    c->fn[FN_LEAF] = l;
    c->fn[FN_MAIN] = m;
}

static void reap(struct child *c)
{
    int st;
    waitpid(c->pid, &st, 0);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0) || (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM),
          "workload ended with status %d", st);
}

/* Which of the child's functions holds a return address: the nearest one starting below it
 * (each is under 512 bytes; compilers lay them out in any order). */
static int fn_of(const struct child *c, uint64_t ra)
{
    int best = -1;
    for (int i = 0; i < 4; i++)
        if (ra > c->fn[i] && ra - c->fn[i] < 512 && (best < 0 || c->fn[i] > c->fn[best]))
            best = i;
    return best;
}

/* Does this stack run leaf, chain_b, chain_a, main (other frames between allowed)? */
static bool whole_chain(const struct child *c, const uint64_t *ips, size_t n)
{
    static const int want[] = {FN_LEAF, FN_B, FN_A, FN_MAIN};
    size_t k = 0;
    for (size_t i = 0; i < n && k < 4; i++) {
        uint64_t pc = i == 0 ? ips[i] + 1 : ips[i]; /* the leaf's pc is exact */
        if (fn_of(c, pc) == want[k])
            k++;
    }
    return k == 4;
}

struct tally {
    bool kernel; /* count the samples taken in the kernel, else those in user mode */
    uint64_t samples, whole;
};

/* Samples of the child in a drain, and how many of them have the whole chain. */
static void tally_drain(pfr_cpu_profiler *cp, const struct child *c, struct tally *t)
{
    pfr_cpu_drain d;
    REQUIRE(pfr_cpu_profiler_drain(cp, &d) == 0, "drain");
    for (size_t i = 0; i < d.nsamples; i++) {
        const pfr_cpu_sample *s = &d.samples[i];
        if ((pid_t)s->tgid != c->pid || (s->kstack != 0) != t->kernel || s->ustack == 0 ||
            s->ustack == PFR_STACK_ERROR)
            continue;
        size_t n = 0;
        const uint64_t *ips = pfr_cpu_profiler_stack(cp, s->ustack, &n);
        t->samples += s->count;
        if (ips && getenv("PFR_TEST_VERBOSE")) {
            for (size_t j = 0; j < n; j++)
                fprintf(stderr, " %llx", (unsigned long long)ips[j]);
            fprintf(stderr, "\n");
        }
        if (ips && whole_chain(c, ips, n))
            t->whole += s->count;
    }
}

static void on_event(const struct pfr_event *ev, void *ctx)
{
    (void)ev;
    (void)ctx;
}

/* Run the workload under a profiler of these options: warm-up (tables asked for and built),
 * then a measured second and a half or more; t->kernel says which samples to count. */
static pfr_cpu_profiler *run(const char *prog, int mode, uint32_t rows, struct child *c,
                             struct tally *t, pfr_cpu_counters *cnt, pfr_unwinder_stats *us,
                             bool *tables)
{
    pfr_cpu_profiler_opts o = {.hz = 499, .unwind = mode, .unwind_rows = rows};
    bool settle = mode == PFR_UNWIND_AUTO && rows == 0; /* tables fit: whole chains expected */
    char err[512] = "";
    pfr_cpu_profiler *cp = NULL;
    REQUIRE(pfr_cpu_profiler_open(&o, on_event, NULL, &cp, err, sizeof(err)) == 0,
            "open the sampler: %s", err);
    bool kernel = t->kernel;
    /* long enough for a slow warm-up (tables of every busy program on a loaded host come
     * first): it is stopped once measured */
    start(prog, 30.0, kernel, c);
    for (int i = 0; i < 10; i++) { /* the first samples ask; wait for the tables */
        pfr_cpu_profiler_poll_events(cp, 50);
        sleep_ms(50);
    }
    pfr_cpu_profiler_poll_events(cp, 0);
    /* (with tables expected, no wait for the whole queue: it may hold another program's large
     * table, seconds under load and tens under ASan; the walks say when the workload's are in) */
    if (!settle)
        pfr_cpu_profiler_unwind_sync(cp);
    struct tally warm = {.kernel = kernel};
    tally_drain(cp, c, &warm); /* the warm-up's samples: some before the tables */
    /* With tables expected, wait (up to 20 s) until they are in: on a busy host the builder may
     * be half-way through a large file of another program (libLLVM: seconds at its half core
     * under load), and the workload's next file is asked for only once a walk reaches it. The
     * measurement below is of walks with tables, not of how soon they come. (Small files are
     * built between a large build's steps since issue 30: the time it took is printed.) */
    struct timespec s0, s1;
    clock_gettime(CLOCK_MONOTONIC, &s0);
    for (int i = 0; settle && i < 40; i++) {
        sleep_ms(500);
        pfr_cpu_profiler_poll_events(cp, 0);
        warm = (struct tally){.kernel = kernel};
        tally_drain(cp, c, &warm);
        pfr_cpu_counters now;
        pfr_cpu_profiler_counters(cp, &now);
        /* and libc's table in too: a stack walked to _start (asked once a walk reaches libc) */
        if (warm.samples >= 20 && warm.whole * 100 >= warm.samples * 95 && now.uw_end > 0)
            break;
    }
    clock_gettime(CLOCK_MONOTONIC, &s1);
    if (settle)
        printf("tables in (walks whole) %.1f s after the warm-up\n",
               (double)(s1.tv_sec - s0.tv_sec) + (double)(s1.tv_nsec - s0.tv_nsec) / 1e9);
    *t = (struct tally){.kernel = kernel};
    /* a second and a half, longer (up to 10 s) until 300 samples: a loaded host gives the
     * workload a part of a core */
    for (int i = 0; i < 20 && (i < 3 || t->samples < 300); i++) {
        sleep_ms(500);
        pfr_cpu_profiler_poll_events(cp, 0);
        tally_drain(cp, c, t);
    }
    if (!settle)
        pfr_cpu_profiler_unwind_sync(cp);
    pfr_cpu_profiler_counters(cp, cnt);
    *tables = pfr_cpu_profiler_unwind_stats(cp, us);
    kill(c->pid, SIGTERM);
    reap(c);
    return cp;
}

/* What the sampled-exit phase keeps: the child's exit, and the pcs of its user stacks. */
struct exit_seen {
    pid_t pid;
    bool exited;
    struct pfr_exit_maps em;
    uint64_t pcs[4096];
    size_t npcs;
    bool pcs_cut;
    uint64_t code[64][2]; /* its executable mappings, as /proc showed them while it ran */
    size_t ncode;
};

static void on_exit_event(const struct pfr_event *ev, void *ctx)
{
    struct exit_seen *x = ctx;
    if (ev->type != PFR_EV_EXIT || (pid_t)ev->tgid != x->pid)
        return;
    x->exited = true;
    if (ev->flags & PFR_EVF_MAPS)
        memcpy(&x->em, ev, sizeof(x->em)); /* (the profiler hands the whole struct over) */
    else
        x->em.ev = *ev;
}

/* The child's user-stack pcs of a drain into x (callers' as pc - 1, the address of the call). */
static void keep_pcs(pfr_cpu_profiler *cp, struct exit_seen *x)
{
    pfr_cpu_drain d;
    REQUIRE(pfr_cpu_profiler_drain(cp, &d) == 0, "drain");
    for (size_t i = 0; i < d.nsamples; i++) {
        const pfr_cpu_sample *s = &d.samples[i];
        if ((pid_t)s->tgid != x->pid || s->ustack == 0 || s->ustack == PFR_STACK_ERROR)
            continue;
        size_t n = 0;
        const uint64_t *ips = pfr_cpu_profiler_stack(cp, s->ustack, &n);
        for (size_t j = 0; ips && j < n; j++) {
            uint64_t pc = j == 0 ? ips[j] : ips[j] - 1;
            bool have = false;
            for (size_t k = 0; k < x->npcs && !have; k++)
                have = x->pcs[k] == pc;
            if (have)
                continue;
            if (x->npcs == sizeof(x->pcs) / sizeof(x->pcs[0]))
                x->pcs_cut = true;
            else
                x->pcs[x->npcs++] = pc;
        }
    }
}

/* Every file the child maps, named to the sampler (as a snapshot of it would): its exit may
 * then list the mappings its samples met instead of walking them all. Its executable mappings
 * into x. */
static int name_mapped_files(pfr_cpu_profiler *cp, struct exit_seen *x)
{
    char path[64], line[512], perms[5];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)x->pid);
    FILE *f = fopen(path, "r");
    REQUIRE(f, "open %s: %s", path, strerror(errno));
    int named = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned maj, min;
        unsigned long long start, end, ino;
        if (sscanf(line, "%llx-%llx %4s %*x %x:%x %llu", &start, &end, perms, &maj, &min, &ino) !=
            6)
            continue;
        if (perms[2] == 'x' && x->ncode < sizeof(x->code) / sizeof(x->code[0])) {
            x->code[x->ncode][0] = start;
            x->code[x->ncode++][1] = end;
        }
        if (ino != 0 && pfr_cpu_profiler_name_file(cp, maj << 20 | min, ino) == 0)
            named++;
    }
    fclose(f);
    return named;
}

/* Is pc in one of the child's executable mappings (else a frame-pointer walk's garbage, which
 * no list of mappings holds)? */
static bool in_code(const struct exit_seen *x, uint64_t pc)
{
    for (size_t i = 0; i < x->ncode; i++)
        if (pc >= x->code[i][0] && pc < x->code[i][1])
            return true;
    return false;
}

/* The exit of a process whose files are all named and whose samples were all walked with the
 * cache of mappings: it lists the mappings its samples met (PFR_EVF_MAPS_SAMPLED), and every pc
 * of its samples that lies in its code lies in one of them. A first run of the workload brings
 * its files' tables in: walked by frame pointer before, the second's early samples would end in
 * garbage pcs whose mappings no lookup found, and its exit would walk them all (correct, but not
 * what is tested here). */
static void sampled_exit_phase(const char *prog)
{
    static struct exit_seen x;
    memset(&x, 0, sizeof(x));
    pfr_cpu_profiler_opts o = {.hz = 499, .unwind = PFR_UNWIND_AUTO};
    char err[512] = "";
    pfr_cpu_profiler *cp = NULL;
    REQUIRE(pfr_cpu_profiler_open(&o, on_exit_event, &x, &cp, err, sizeof(err)) == 0,
            "open the sampler: %s", err);
    struct child c;
    start(prog, 30.0, false, &c);
    for (int i = 0; i < 40; i++) { /* (up to 20 s on a loaded host) */
        sleep_ms(500);
        pfr_cpu_profiler_poll_events(cp, 0);
        struct tally warm = {0};
        tally_drain(cp, &c, &warm);
        pfr_cpu_counters now;
        pfr_cpu_profiler_counters(cp, &now);
        if (warm.samples >= 20 && warm.whole * 100 >= warm.samples * 95 && now.uw_end > 0)
            break;
    }
    kill(c.pid, SIGTERM);
    reap(&c);
    start(prog, 30.0, false, &c);
    x.pid = c.pid;
    int named = name_mapped_files(cp, &x);
    /* the samples of the child before its exec (this program's code, under ASan long enough to
     * be sampled) are another image's, whose cache the exec emptied: left out */
    pfr_cpu_drain before;
    REQUIRE(pfr_cpu_profiler_drain(cp, &before) == 0, "drain");
    for (int i = 0; i < 10; i++) { /* samples, tables asked for and built */
        sleep_ms(200);
        pfr_cpu_profiler_poll_events(cp, 0);
        keep_pcs(cp, &x);
    }
    kill(c.pid, SIGTERM);
    reap(&c);
    for (int i = 0; i < 40 && !x.exited; i++)
        pfr_cpu_profiler_poll_events(cp, 50);
    keep_pcs(cp, &x); /* the samples of its last moments */
    const struct pfr_exit_maps *em = &x.em;
    printf("sampled exit: %d files named, %zu pcs; exit %s, flags %#x, %u mappings\n", named,
           x.npcs, x.exited ? "seen" : "not seen", em->ev.flags, em->nmaps);
    CHECK(x.exited, "no exit notification for the workload");
    CHECK(x.npcs >= 4 && !x.pcs_cut, "%zu distinct pcs of the workload", x.npcs);
    CHECK((em->ev.flags & PFR_EVF_MAPS) && (em->ev.flags & PFR_EVF_MAPS_SAMPLED),
          "the exit did not list the mappings its samples met (flags %#x)", em->ev.flags);
    struct stat st;
    REQUIRE(stat(prog, &st) == 0, "stat %s", prog);
    bool exe = false;
    for (uint32_t i = 0; i < em->nmaps && i < PFR_EXIT_MAPS_MAX; i++)
        exe |= em->maps[i].kind == PFR_MAPREC_FILE && em->maps[i].ino == st.st_ino;
    CHECK(exe, "the workload's executable is not among the exit's mappings");
    size_t outside = 0;
    for (size_t k = 0; k < x.npcs; k++) {
        bool in = !in_code(&x, x.pcs[k]);
        for (uint32_t i = 0; i < em->nmaps && i < PFR_EXIT_MAPS_MAX && !in; i++)
            in = x.pcs[k] >= em->maps[i].start && x.pcs[k] < em->maps[i].end;
        if (!in && outside++ < 5)
            fprintf(stderr, "pc %#llx in none of the exit's mappings\n",
                    (unsigned long long)x.pcs[k]);
    }
    for (uint32_t i = 0; outside && i < em->nmaps && i < PFR_EXIT_MAPS_MAX; i++)
        fprintf(stderr, "  listed: %#llx-%#llx ino %llu\n", (unsigned long long)em->maps[i].start,
                (unsigned long long)em->maps[i].end, (unsigned long long)em->maps[i].ino);
    CHECK(outside == 0, "%zu of %zu pcs in the workload's code in none of the exit's mappings",
          outside, x.npcs);
    pfr_cpu_profiler_close(cp);
}

static size_t table_rows(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0, "open %s: %s", path, strerror(errno));
    pfr_unwind_table t = {0};
    char err[256];
    REQUIRE(pfr_unwind_table_build(fd, 0, &t, err, sizeof(err)) == 0, "table of %s: %s", path, err);
    close(fd);
    size_t n = t.nrows;
    pfr_unwind_table_free(&t);
    return n;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* what it printed survives ctest's timeout */
    if (argc != 2) {
        fprintf(stderr, "usage: %s NOFP_CHAIN_BINARY\n", argv[0]);
        return 2;
    }
    const char *prog = argv[1];
    struct child c;
    struct tally t = {0};
    pfr_cpu_counters cnt;
    pfr_unwinder_stats us;
    bool tables;

    /* auto: tables in, whole chains */
    pfr_cpu_profiler *cp = run(prog, PFR_UNWIND_AUTO, 0, &c, &t, &cnt, &us, &tables);
    REQUIRE(tables, "unwind tables are off in auto mode on this kernel (needs bpf_find_vma)");
    printf("auto: %llu samples, %llu with the whole chain; stacks dwarf=%llu fp=%llu "
           "frames=%llu complete=%llu pending=%llu no_row=%llu cut{read=%llu map=%llu depth=%llu} "
           "busy=%llu vma_miss=%llu; files tables=%llu none=%llu rows=%llu\n",
           (unsigned long long)t.samples, (unsigned long long)t.whole,
           (unsigned long long)cnt.uw_dwarf, (unsigned long long)cnt.uw_fp,
           (unsigned long long)cnt.uw_frames, (unsigned long long)cnt.uw_end,
           (unsigned long long)cnt.uw_pending, (unsigned long long)cnt.uw_no_row,
           (unsigned long long)cnt.uw_cut_read, (unsigned long long)cnt.uw_cut_map,
           (unsigned long long)cnt.uw_cut_depth, (unsigned long long)cnt.uw_busy,
           (unsigned long long)cnt.uw_vma_miss, (unsigned long long)us.tables,
           (unsigned long long)us.no_table, (unsigned long long)us.rows);
    CHECK(t.samples >= 100, "too few samples of the workload: %llu", (unsigned long long)t.samples);
    CHECK(t.whole * 100 >= t.samples * 95, "whole chains in %llu of %llu samples (want 95 %%)",
          (unsigned long long)t.whole, (unsigned long long)t.samples);
    CHECK(cnt.uw_dwarf > 0 && cnt.uw_frames >= 3 * t.whole, "frames found by tables: %llu",
          (unsigned long long)cnt.uw_frames);
    CHECK(cnt.uw_pending >= 1, "no stack was counted as walked before its table was in");
    CHECK(cnt.uw_end > 0, "no stack reached its outermost frame (_start)");
    CHECK(us.tables >= 2, "tables built: %llu (the program's and libc's at least)",
          (unsigned long long)us.tables);
    pfr_cpu_profiler_close(cp);

    /* kernel -> user: samples in the syscall keep the whole user chain under them */
    t = (struct tally){.kernel = true};
    cp = run(prog, PFR_UNWIND_AUTO, 0, &c, &t, &cnt, &us, &tables);
    printf("kernel: %llu samples in the kernel, %llu with the whole user chain; stacks "
           "dwarf=%llu fp=%llu pending=%llu no_row=%llu cut{read=%llu map=%llu depth=%llu} "
           "busy=%llu vma_miss=%llu; files tables=%llu none=%llu requests=%llu queue_full=%llu "
           "no_room=%llu evictions=%llu rows=%llu/%llu build_max=%.2fs\n",
           (unsigned long long)t.samples, (unsigned long long)t.whole,
           (unsigned long long)cnt.uw_dwarf, (unsigned long long)cnt.uw_fp,
           (unsigned long long)cnt.uw_pending, (unsigned long long)cnt.uw_no_row,
           (unsigned long long)cnt.uw_cut_read, (unsigned long long)cnt.uw_cut_map,
           (unsigned long long)cnt.uw_cut_depth, (unsigned long long)cnt.uw_busy,
           (unsigned long long)cnt.uw_vma_miss, (unsigned long long)us.tables,
           (unsigned long long)us.no_table, (unsigned long long)us.requests,
           (unsigned long long)us.queue_full, (unsigned long long)us.no_room,
           (unsigned long long)us.evictions, (unsigned long long)us.rows,
           (unsigned long long)us.max_rows, (double)us.build_max_ns / 1e9);
    CHECK(t.samples >= 100, "kernel: too few samples in the kernel: %llu",
          (unsigned long long)t.samples);
    CHECK(t.whole * 100 >= t.samples * 95, "kernel: whole chains in %llu of %llu samples",
          (unsigned long long)t.whole, (unsigned long long)t.samples);
    pfr_cpu_profiler_close(cp);
    t = (struct tally){0};

    /* fp: no tables asked for or used; stacks still recorded */
    cp = run(prog, PFR_UNWIND_FP, 0, &c, &t, &cnt, &us, &tables);
    printf("fp: %llu samples, %llu with the whole chain\n", (unsigned long long)t.samples,
           (unsigned long long)t.whole);
    CHECK(!tables, "fp mode reports unwind tables");
    CHECK(cnt.uw_dwarf + cnt.uw_fp + cnt.uw_pending == 0, "fp mode counted table walks");
    CHECK(t.samples >= 100, "fp: too few samples: %llu", (unsigned long long)t.samples);
    CHECK(t.whole * 2 < t.samples,
          "fp: %llu of %llu whole chains: the workload keeps frame "
          "pointers after all, and this test proves nothing",
          (unsigned long long)t.whole, (unsigned long long)t.samples);
    pfr_cpu_profiler_close(cp);

    /* full: no table fits; every file walked by frame pointers */
    cp = run(prog, PFR_UNWIND_AUTO, 4, &c, &t, &cnt, &us, &tables);
    printf("full: %llu samples; files tables=%llu none=%llu; stacks fp=%llu dwarf=%llu\n",
           (unsigned long long)t.samples, (unsigned long long)us.tables,
           (unsigned long long)us.no_table, (unsigned long long)cnt.uw_fp,
           (unsigned long long)cnt.uw_dwarf);
    CHECK(t.samples >= 100, "full: too few samples: %llu", (unsigned long long)t.samples);
    /* the walk by frame pointers ends in the program's frameless leaf: libc is not reached */
    CHECK(us.tables == 0 && us.no_table >= 1, "full: tables %llu, none %llu",
          (unsigned long long)us.tables, (unsigned long long)us.no_table);
    CHECK(cnt.uw_fp > 0 && cnt.uw_dwarf == 0, "full: stacks fp %llu dwarf %llu",
          (unsigned long long)cnt.uw_fp, (unsigned long long)cnt.uw_dwarf);
    pfr_cpu_profiler_close(cp);

    /* no room: the cap holds the larger of the program's and libc's tables, not both; both are
     * in use, so the second gets 0 rows for a while (counted), and stacks are still recorded */
    size_t rp = table_rows(prog), rl = table_rows(LIBC);
    uint32_t cap = (uint32_t)(rp > rl ? rp : rl) + 1;
    cp = run(prog, PFR_UNWIND_AUTO, cap, &c, &t, &cnt, &us, &tables);
    printf("no room (%u rows; program %zu, libc %zu): %llu samples; tables=%llu no_room=%llu "
           "evictions=%llu\n",
           cap, rp, rl, (unsigned long long)t.samples, (unsigned long long)us.tables,
           (unsigned long long)us.no_room, (unsigned long long)us.evictions);
    CHECK(t.samples >= 100, "no room: too few samples: %llu", (unsigned long long)t.samples);
    CHECK(us.no_room >= 1, "no file was refused for want of room");
    CHECK(us.rows <= cap, "rows in use %llu above the cap %u", (unsigned long long)us.rows, cap);
    pfr_cpu_profiler_close(cp);

    sampled_exit_phase(prog);

    if (check_failures) {
        fprintf(stderr, "%d check(s) failed\n", check_failures);
        return 1;
    }
    printf("unwind sampler: all checks passed\n");
    return 0;
}
