/*
 * The CPU sampler in the real kernel: the verifier accepts it, it attaches to every online CPU,
 * samples a spinning child with user stacks, tells about the child's first sample and its exit,
 * and the double buffer neither loses nor double-counts: after every drain, the sum of all
 * drained counts lies between the kernel's sample counter read just before and just after it.
 * Then, with stack maps of 32 stacks, a stack that finds its map full is counted and its sample
 * kept, the maps are emptied and stacks stored again, and forgetting a running process
 * announces it again (the sampler's per-CPU memo of the last process noted is dropped). Where
 * exits carry mappings, the paths sent before them lead to their files, except the files named.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "pfr_check.h"
#include "cpu_profiler.h"

struct seen {
    pid_t child;
    int new_events, exit_events, exec_events;
    /* paths sent before the exit: how many, how many name their file (dev, ino), whether one
     * was the executable's, and the first that did not match */
    int path_events, paths_matched;
    bool exe_path;
    char bad_path[PATH_MAX];
    char comm[16];
    uint64_t exe_ino;
    uint32_t exe_dev;
    /* the exit's mappings, if it carried them */
    bool exit_maps;
    uint32_t exit_nmaps;
    bool exit_maps_sorted, exit_maps_exe;
};

/* Checks an exit's mapping list: by address, and holding the executable (inode from the first
 * sample's notification). */
static void note_exit_maps(struct seen *s, const struct pfr_exit_maps *em)
{
    s->exit_maps = true;
    s->exit_nmaps = em->nmaps;
    s->exit_maps_sorted = true;
    for (uint32_t i = 0; i < em->nmaps; i++) {
        const struct pfr_map_rec *r = &em->maps[i];
        if (r->end <= r->start || (i > 0 && r->start < em->maps[i - 1].end))
            s->exit_maps_sorted = false;
        if (r->kind == PFR_MAPREC_FILE && r->ino == s->exe_ino && r->dev == s->exe_dev)
            s->exit_maps_exe = true;
    }
}

/* Checks a path sent before an exit: joined (root first), it must lead to the file it names. */
static void note_path(struct seen *s, const struct pfr_path_event *pe)
{
    char path[PATH_MAX] = "";
    size_t len = 0;
    s->path_events++;
    for (uint32_t i = pe->nparts; i-- > 0 && len + 2 + strlen(pe->parts[i]) < sizeof(path);)
        len += (size_t)snprintf(path + len, sizeof(path) - len, "/%s", pe->parts[i]);
    struct stat st;
    bool cut = pe->ev.flags & PFR_EVF_PATH_CUT;
    if (!cut && stat(path, &st) == 0 && st.st_ino == pe->ino &&
        (major(st.st_dev) << 20 | minor(st.st_dev)) == pe->dev) {
        s->paths_matched++;
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
            self[n] = '\0';
            s->exe_path |= strcmp(self, path) == 0;
        }
    } else if (!s->bad_path[0]) {
        snprintf(s->bad_path, sizeof(s->bad_path), "%s%s", path, cut ? " (cut)" : "");
    }
}

static void on_event(const struct pfr_event *ev, void *ctx)
{
    struct seen *s = ctx;
    if ((pid_t)ev->tgid != s->child)
        return;
    if (getenv("PFR_TEST_VERBOSE"))
        fprintf(stderr, "event %u tgid %u start %llu comm %s\n", ev->type, ev->tgid,
                (unsigned long long)ev->start_time, ev->comm);
    if (ev->type == PFR_EV_NEW) {
        s->new_events++;
        snprintf(s->comm, sizeof(s->comm), "%s", ev->comm);
        s->exe_ino = ev->exe_ino;
        s->exe_dev = ev->exe_dev;
    } else if (ev->type == PFR_EV_EXIT) {
        s->exit_events++;
        if (ev->flags & PFR_EVF_MAPS)
            note_exit_maps(s, (const struct pfr_exit_maps *)ev);
    } else if (ev->type == PFR_EV_EXEC) {
        s->exec_events++;
    } else if (ev->type == PFR_EV_PATH) {
        note_path(s, (const struct pfr_path_event *)ev);
    }
}

/* Does the running kernel's BTF have function name (a kfunc, say)? */
static bool kernel_has(const char *name)
{
    struct btf *btf = btf__load_vmlinux_btf();
    if (!btf)
        return false;
    bool has = btf__find_by_name_kind(btf, name, BTF_KIND_FUNC) >= 0;
    btf__free(btf);
    return has;
}

/* Does the running kernel's struct type have member field? */
static bool kernel_has_field(const char *type, const char *field)
{
    struct btf *btf = btf__load_vmlinux_btf();
    if (!btf)
        return false;
    bool has = false;
    int id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
    const struct btf_type *t = id >= 0 ? btf__type_by_id(btf, id) : NULL;
    const struct btf_member *m = t ? btf_members(t) : NULL;
    for (int i = 0; t && i < btf_vlen(t) && !has; i++)
        has = strcmp(btf__name_by_offset(btf, m[i].name_off), field) == 0;
    btf__free(btf);
    return has;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long spin(double seconds)
{
    volatile unsigned long x = 0;
    double end = now_s() + seconds;
    while (now_s() < end)
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
    return x;
}

/* d frames deep (the volatile read after the call keeps the compiler from making it a loop) */
__attribute__((noinline)) static unsigned long descend(int d, double seconds)
{
    volatile unsigned long x = (unsigned long)d;
    if (d <= 0)
        return spin(seconds);
    return descend(d - 1, seconds) + x;
}

/* Distinct stack ids (kernel and user) the samples of drain d refer to. */
static uint64_t stack_refs(const pfr_cpu_drain *d)
{
    uint64_t n = 0;
    for (size_t i = 0; i < d->nsamples; i++) {
        const uint64_t ids[2] = {d->samples[i].kstack, d->samples[i].ustack};
        for (int j = 0; j < 2; j++) {
            if (!(ids[j] & PFR_STACK_HASHED))
                continue;
            bool dup = j == 1 && ids[0] == ids[1];
            for (size_t k = 0; k < i && !dup; k++)
                dup = d->samples[k].kstack == ids[j] || d->samples[k].ustack == ids[j];
            n += !dup;
        }
    }
    return n;
}

/* Adds up child's samples of drain d: all of them, those with a resolvable user stack, and
 * (if lost is not NULL) those whose user stack was not stored. */
static void tally_child(pfr_cpu_profiler *cp, const pfr_cpu_drain *d, pid_t child, uint64_t *count,
                        uint64_t *resolved, uint64_t *lost)
{
    for (size_t i = 0; i < d->nsamples; i++) {
        const pfr_cpu_sample *s = &d->samples[i];
        if ((pid_t)s->tgid != child)
            continue;
        *count += s->count;
        size_t n = 0;
        if (s->ustack > PFR_STACK_ERROR && pfr_cpu_profiler_stack(cp, s->ustack, &n) && n > 0)
            *resolved += s->count;
        if (lost && s->ustack == PFR_STACK_ERROR)
            *lost += s->count;
    }
}

/* The sampler at 997 Hz (with stack maps of stack_entries stacks, 0 = default),
 * reporting to seen; NULL (and a failure) if it cannot open. */
static pfr_cpu_profiler *open_at_997(unsigned stack_entries, struct seen *seen)
{
    pfr_cpu_profiler *cp = NULL;
    char err[512];
    pfr_cpu_profiler_opts opts = {.hz = 997, .stack_map_entries = stack_entries};
    int rc = pfr_cpu_profiler_open(&opts, on_event, seen, &cp, err, sizeof(err));
    CHECK(rc == 0, "open: %s", err);
    return rc == 0 ? cp : NULL;
}

/* Stack maps far too small for the child's distinct user stacks (100 depths): a stack that
 * finds its map full is counted, its sample kept with an error frame; the drains empty the
 * maps past half full, after which stacks are stored and resolve again. */
static void full_map_phase(void)
{
    struct seen seen = {0};
    pfr_cpu_profiler *cp = open_at_997(32, &seen);
    if (!cp)
        return;
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; now_s() >= 0; i++)
            descend(i % 100, 0.002);
        _exit(0);
    }
    seen.child = child;
    uint64_t child_count = 0, resolved = 0, lost = 0, late_resolved = 0;
    int renewed = 0;
    for (int round = 0; round < 8; round++) {
        double end = now_s() + 0.1;
        while (now_s() < end)
            pfr_cpu_profiler_poll_events(cp, 10);
        if (round == 4) {
            renewed = seen.new_events;
            pfr_cpu_profiler_forget(cp, (uint32_t)child);
        }
        pfr_cpu_drain d;
        int rc = pfr_cpu_profiler_drain(cp, &d);
        CHECK(rc == 0, "drain: %s", strerror(-rc));
        uint64_t before = resolved;
        if (rc == 0)
            tally_child(cp, &d, child, &child_count, &resolved, &lost);
        if (round >= 6)
            late_resolved += resolved - before;
    }
    for (int i = 0; i < 10 && seen.new_events <= renewed; i++)
        pfr_cpu_profiler_poll_events(cp, 50);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    pfr_cpu_counters c;
    pfr_cpu_profiler_counters(cp, &c);
    printf("full map phase: child=%llu resolved=%llu lost=%llu (late resolved %llu) "
           "stack_full=%llu new=%llu resets=%llu new_events=%d (forgotten after %d)\n",
           (unsigned long long)child_count, (unsigned long long)resolved, (unsigned long long)lost,
           (unsigned long long)late_resolved, (unsigned long long)c.stack_map_full,
           (unsigned long long)c.stacks_new, (unsigned long long)c.stack_map_resets,
           seen.new_events, renewed);
    CHECK(child_count > 50, "child sampled %llu times", (unsigned long long)child_count);
    CHECK(c.stack_map_full > 0 && lost > 0, "the stack maps never filled");
    CHECK(resolved + lost == child_count, "%llu samples neither resolved nor lost of %llu",
          (unsigned long long)(child_count - resolved - lost), (unsigned long long)child_count);
    CHECK(c.stack_map_resets > 0 && late_resolved > 0, "no stack stored after the maps filled");
    CHECK(renewed == 1 && seen.new_events == 2, "%d notifications, %d before forget",
          seen.new_events, renewed);
    pfr_cpu_profiler_close(cp);
}

/* Notifications handled and samples drained (and dropped) for a moment. */
static void pump(pfr_cpu_profiler *cp)
{
    pfr_cpu_profiler_poll_events(cp, 20);
    pfr_cpu_drain d;
    pfr_cpu_profiler_drain(cp, &d);
}

/* Samples inside execve keep their kernel stack but not the user one, which the registers still
 * give as the old image's while the new one is being set up: counted, on a shell starting
 * programs in a loop. */
static void exec_phase(void)
{
    struct seen seen = {0};
    pfr_cpu_profiler *cp = open_at_997(0, &seen);
    if (!cp)
        return;
    pid_t child = fork();
    if (child == 0) {
        execl("/bin/sh", "sh", "-c", "while :; do /bin/true; done", (char *)NULL);
        _exit(127);
    }
    double end = now_s() + 1.0;
    while (now_s() < end)
        pump(cp);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    pfr_cpu_counters c;
    pfr_cpu_profiler_counters(cp, &c);
    printf("exec phase: samples=%llu in execve without user stack=%llu\n",
           (unsigned long long)c.samples, (unsigned long long)c.exec_no_ustack);
    CHECK(c.exec_no_ustack > 0 || !kernel_has_field("task_struct", "in_execve"),
          "no sample inside execve in 1 s of a shell starting /bin/true");
    pfr_cpu_profiler_close(cp);
}

/* Paths go only for files not named: with this program's executable named, a child's exit sends
 * the paths of its libraries but not the executable's. Named files are bounded, and undone all
 * at once. */
static void named_phase(void)
{
    struct seen seen = {0};
    pfr_cpu_profiler *cp = open_at_997(0, &seen);
    if (!cp)
        return;
    struct stat self;
    CHECK(stat("/proc/self/exe", &self) == 0, "stat /proc/self/exe: %s", strerror(errno));
    CHECK(pfr_cpu_profiler_name_file(cp, major(self.st_dev) << 20 | minor(self.st_dev),
                                     self.st_ino) == 0,
          "naming the executable");
    pid_t child = fork();
    if (child == 0) {
        spin(0.3);
        _exit(0);
    }
    seen.child = child;
    while (waitpid(child, NULL, WNOHANG) == 0)
        pump(cp);
    for (int i = 0; i < 10 && seen.exit_events == 0; i++)
        pfr_cpu_profiler_poll_events(cp, 50);
    printf("named phase: exit maps %d, paths %d (%d matched), executable's %s\n", seen.exit_maps,
           seen.path_events, seen.paths_matched, seen.exe_path ? "sent" : "not sent");
    if (seen.exit_maps) {
        CHECK(!seen.exe_path, "the named executable's path was sent");
        CHECK(seen.path_events >= 1 && seen.paths_matched == seen.path_events,
              "%d paths, %d matched (first bad: %s)", seen.path_events, seen.paths_matched,
              seen.bad_path);
    }
    int rc = 0;
    for (uint64_t ino = 2; ino <= PFR_NAMED_FILES_MAX && rc == 0; ino++) /* the exe is one */
        rc = pfr_cpu_profiler_name_file(cp, 7, ino);
    CHECK(rc == 0, "naming %d files: %s", PFR_NAMED_FILES_MAX, strerror(-rc));
    CHECK(pfr_cpu_profiler_name_file(cp, 7, 2) == 0, "naming one again");
    rc = pfr_cpu_profiler_name_file(cp, 7, PFR_NAMED_FILES_MAX + 1);
    CHECK(rc == -E2BIG, "one past the bound: %s", strerror(-rc));
    pfr_cpu_profiler_unname_files(cp);
    rc = pfr_cpu_profiler_name_file(cp, 7, PFR_NAMED_FILES_MAX + 1);
    CHECK(rc == 0, "after undoing them all: %s", strerror(-rc));
    pfr_cpu_profiler_close(cp);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: needs root\n");
        return 77;
    }
    struct seen seen = {0};
    pfr_cpu_profiler *cp = NULL;
    char err[512];
    pfr_cpu_profiler_opts opts = {.hz = 997};
    int rc = pfr_cpu_profiler_open(&opts, on_event, &seen, &cp, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "FAIL: open: %s\n", err);
        return 1;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(pfr_cpu_profiler_ncpus(cp) == online, "attached to %d CPUs, %ld online",
          pfr_cpu_profiler_ncpus(cp), online);

    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_NAME, "pfr-spin-child");
        spin(0.8);
        _exit(0);
    }
    seen.child = child;

    uint64_t drained = 0, child_count = 0, child_user_stacks = 0, refs = 0;
    int drains = 0, bound_violations = 0;
    double end = now_s() + 1.2;
    bool reaped = false;
    struct rusage ru;
    while (now_s() < end || !reaped) {
        pfr_cpu_profiler_poll_events(cp, 20);
        if (!reaped && wait4(child, NULL, WNOHANG, &ru) == child)
            reaped = true;
        pfr_cpu_counters before, after;
        pfr_cpu_profiler_counters(cp, &before);
        pfr_cpu_drain d;
        rc = pfr_cpu_profiler_drain(cp, &d);
        CHECK(rc == 0, "drain: %s", strerror(-rc));
        pfr_cpu_profiler_counters(cp, &after);
        drains++;
        drained += d.total;
        uint64_t lo = before.samples - before.count_map_full;
        uint64_t hi = after.samples - after.count_map_full;
        if (drained < lo || drained > hi) {
            bound_violations++;
            fprintf(stderr, "drain %d: drained %llu not in [%llu, %llu]\n", drains,
                    (unsigned long long)drained, (unsigned long long)lo, (unsigned long long)hi);
        }
        tally_child(cp, &d, child, &child_count, &child_user_stacks, NULL);
        if (rc == 0)
            refs += stack_refs(&d);
    }
    for (int i = 0; i < 10 && seen.exit_events == 0; i++)
        pfr_cpu_profiler_poll_events(cp, 50);

    pfr_cpu_counters c;
    pfr_cpu_profiler_counters(cp, &c);
    printf("drains=%d drained=%llu samples=%llu idle=%llu child=%llu child_user_stacks=%llu "
           "stack_full=%llu count_full=%llu kerr=%llu uerr=%llu events_lost=%llu misses=%llu\n",
           drains, (unsigned long long)drained, (unsigned long long)c.samples,
           (unsigned long long)c.idle, (unsigned long long)child_count,
           (unsigned long long)child_user_stacks, (unsigned long long)c.stack_map_full,
           (unsigned long long)c.count_map_full, (unsigned long long)c.kstack_errors,
           (unsigned long long)c.ustack_errors, (unsigned long long)c.events_lost,
           (unsigned long long)c.prog_misses);

    CHECK(drains >= 10, "only %d drains", drains);
    CHECK(bound_violations == 0, "%d drains outside the counter bounds", bound_violations);
    /* the child's CPU time at 997 Hz (the machine is shared: it may have had less than 0.8 s) */
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    double expect = cpu * 997;
    printf("child cpu %.3f s, expected ~%.0f samples\n", cpu, expect);
    CHECK(cpu > 0.1, "child got only %.3f s of CPU", cpu);
    CHECK(child_count >= expect * 0.85 && child_count <= expect * 1.15 + 5,
          "child sampled %llu times for %.3f s of CPU", (unsigned long long)child_count, cpu);
    CHECK(child_user_stacks * 10 >= child_count * 9, "user stacks on %llu of %llu samples",
          (unsigned long long)child_user_stacks, (unsigned long long)child_count);
    CHECK(seen.new_events == 1, "%d first-sample notifications for the child", seen.new_events);
    /* the first sample may come before the child renamed itself */
    CHECK(strcmp(seen.comm, "pfr-spin-child") == 0 || strcmp(seen.comm, "bpf_sampler_tes") == 0,
          "comm '%s'", seen.comm);
    CHECK(seen.exit_events == 1, "%d exit notifications for the child", seen.exit_events);
    /* the child runs this program: its notification names this executable's inode and device
     * (the kernel's dev_t: major << 20 | minor) */
    struct stat self;
    CHECK(stat("/proc/self/exe", &self) == 0, "stat /proc/self/exe: %s", strerror(errno));
    CHECK(seen.exe_ino == (uint64_t)self.st_ino, "exe inode %llu, not %llu",
          (unsigned long long)seen.exe_ino, (unsigned long long)self.st_ino);
    CHECK(seen.exe_dev == (major(self.st_dev) << 20 | minor(self.st_dev)),
          "exe device %#x, not %u:%u", seen.exe_dev, major(self.st_dev), minor(self.st_dev));
    /* kernels whose BPF can walk a task's mappings (the task_vma iterator) send them at exit */
    printf("exit mappings: %s, %u of them\n", seen.exit_maps ? "sent" : "not sent",
           seen.exit_nmaps);
    CHECK(seen.exit_maps || !kernel_has("bpf_iter_task_vma_new"),
          "the kernel has the task_vma iterator, but the exit carried no mappings");
    if (seen.exit_maps) {
        CHECK(seen.exit_nmaps >= 2, "%u executable mappings at exit", seen.exit_nmaps);
        CHECK(seen.exit_maps_sorted, "exit mappings not by address");
        CHECK(seen.exit_maps_exe, "exit mappings without the executable");
        /* nothing named yet: every file's path goes before the exit, and leads to the file */
        printf("exit paths: %d, %d lead to their file\n", seen.path_events, seen.paths_matched);
        CHECK(seen.exe_path, "no path of the executable before the exit");
        CHECK(seen.path_events >= 2 && seen.paths_matched == seen.path_events,
              "%d paths, %d matched (first bad: %s)", seen.path_events, seen.paths_matched,
              seen.bad_path);
    }
    CHECK(c.stack_map_full == 0 && c.count_map_full == 0, "maps overflowed");
    /* the child's one stack, sampled on every drain, is read from the kernel about once per
     * buffer, not once per drain */
    printf("stack reads %llu for %llu references in %d drains, map resets %llu\n",
           (unsigned long long)c.stack_reads, (unsigned long long)refs, drains,
           (unsigned long long)c.stack_map_resets);
    CHECK(c.stack_reads <= refs && c.stack_reads + drains / 2 <= refs,
          "%llu stack reads for %llu references", (unsigned long long)c.stack_reads,
          (unsigned long long)refs);
    CHECK(c.stack_map_resets == 0, "stack maps emptied %llu times",
          (unsigned long long)c.stack_map_resets);

    pfr_cpu_profiler_close(cp);
    full_map_phase();
    exec_phase();
    named_phase();
    if (check_failures)
        return 1;
    printf("PASS\n");
    return 0;
}
