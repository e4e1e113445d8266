/*
 * The sampler's own user-stack walk (bpf/user_stack.bpf.h) against the kernel's, in the real
 * kernel: walk_check.bpf.c runs both on every sample of the processes started here and counts
 * the samples whose frames differ. Processes: the C, C++, shared-library and Go call-tree
 * workloads, a syscall-heavy one (samples in the kernel, walked from the saved user registers),
 * a recursion deeper than the 127 frames kept, frames a page apart, and a frame pointer that
 * leads across a page boundary, into unmapped memory or into the kernel.
 *
 * Usage: walk_check WORKLOAD_DIR (workloads that are not there are skipped).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include <bpf/bpf.h>

#include "pfr_check.h"
#include "walk_check.h"
#include "walk_check.skel.h"

#define HZ       997
#define SECONDS  2.0
#define MAX_PROC 16

struct proc {
    const char *name;
    pid_t pid;
    uint64_t min_in_kernel; /* compared samples taken in the kernel wanted */
    uint64_t min_depth;     /* mean frames per compared sample wanted */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile int stop; /* never set: the children spin until killed */

/* d frames deep, to show more than the 127 frames kept */
__attribute__((noinline)) static unsigned long recurse(int d)
{
    volatile unsigned long x = (unsigned long)d;
    if (d == 0) {
        while (!stop)
            x++;
        return x;
    }
    return recurse(d - 1) + x;
}

/* d frames of a page of locals each: every frame record on a page of its own */
__attribute__((noinline)) static unsigned long recurse_paged(int d)
{
    volatile char pad[4096];
    pad[0] = (char)d;
    if (d == 0) {
        while (!stop)
            pad[0]++;
        return 0;
    }
    return recurse_paged(d - 1) + (unsigned long)pad[0];
}

/* Spin forever with the frame pointer at fp (the loop uses no other register). */
__attribute__((noinline, noreturn)) static void spin_with_fp(uint64_t fp)
{
    __asm__ volatile("mov %0, %%rbp\n1: jmp 1b\n" : : "r"(fp) : "memory");
    __builtin_unreachable();
}

enum odd_fp { FP_ACROSS_PAGES, FP_UNMAPPED, FP_KERNEL };

static void odd_fp_child(enum odd_fp kind)
{
    uint64_t fp = 0x1000; /* never mapped (mmap_min_addr) */
    if (kind == FP_KERNEL)
        fp = 0xffff888000000000ull;
    if (kind == FP_ACROSS_PAGES) {
        char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            _exit(1);
        /* a frame record whose return address starts on the next page */
        uint64_t rec[2] = {0, (uint64_t)(uintptr_t)&odd_fp_child + 1};
        memcpy(m + 4096 - 8, rec, sizeof(rec));
        fp = (uint64_t)(uintptr_t)(m + 4096 - 8);
    }
    spin_with_fp(fp);
}

static pid_t start_child(int which)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    switch (which) {
    case 0:
        recurse(300);
        break;
    case 1:
        recurse_paged(40);
        break;
    default:
        odd_fp_child((enum odd_fp)(which - 2));
    }
    _exit(0);
}

static pid_t start_workload(const char *dir, const char *name, char *const extra)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (access(path, X_OK) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {path, extra, NULL};
        execv(path, argv);
        _exit(127);
    }
    return pid;
}

static int attach(struct walk_check_bpf *skel, struct bpf_link **links, int max)
{
    int n = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < ncpu && n < max; cpu++) {
        struct perf_event_attr attr = {
            .type = PERF_TYPE_SOFTWARE,
            .size = sizeof(attr),
            .config = PERF_COUNT_SW_CPU_CLOCK,
            .freq = 1,
            .sample_freq = HZ,
        };
        int fd = (int)syscall(SYS_perf_event_open, &attr, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
            continue;
        links[n] = bpf_program__attach_perf_event(skel->progs.walk_check, fd);
        if (!links[n]) {
            close(fd);
            continue;
        }
        n++;
    }
    return n;
}

static void print_diff(struct walk_check_bpf *skel)
{
    uint32_t zero = 0;
    struct pfr_walk_diff d;
    if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.first_diff), &zero, &d) != 0 || !d.tgid)
        return;
    fprintf(stderr, "first difference: tgid %u, %u frames walked, %u by the kernel\n", d.tgid,
            d.n_walk, d.n_kernel);
    for (unsigned i = 0; i < PFR_MAX_STACK_DEPTH && (i < d.n_walk || i < d.n_kernel); i++)
        fprintf(stderr, "  %3u %#18llx %#18llx\n", i, (unsigned long long)d.walk[i],
                (unsigned long long)d.kernel[i]);
}

int main(int argc, char **argv)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: needs root\n");
        return 77;
    }
    const char *dir = argc > 1 ? argv[1] : ".";
    struct walk_check_bpf *skel = walk_check_bpf__open_and_load();
    if (!skel) {
        fprintf(stderr, "FAIL: load walk_check.bpf.o: %s\n", strerror(errno));
        return 1;
    }
    struct proc procs[MAX_PROC];
    int np = 0;
    static const char *const names[] = {"recursion past 127 frames", "frames a page apart",
                                        "record across pages", "fp unmapped", "fp in kernel"};
    for (int i = 0; i < 5; i++)
        procs[np++] = (struct proc){names[i], start_child(i), 0, i == 0 ? 120 : i == 1 ? 30 : 0};
    static const struct {
        const char *name;
        uint64_t min_in_kernel, min_depth;
    } loads[] = {{"pfr-calltree-pie", 0, 4},
                 {"pfr-calltree-shared", 0, 4},
                 {"pfr-calltree-cpp", 0, 4},
                 {"pfr-calltree-go", 0, 4},
                 {"pfr-syscalls", 20, 2}};
    for (size_t i = 0; i < sizeof(loads) / sizeof(loads[0]); i++) {
        pid_t pid = start_workload(dir, loads[i].name, "3");
        /* the build makes every workload (it requires g++ and Go for the tests) */
        CHECK(pid >= 0, "%s: not built", loads[i].name);
        if (pid >= 0)
            procs[np++] =
                (struct proc){loads[i].name, pid, loads[i].min_in_kernel, loads[i].min_depth};
    }
    int tfd = bpf_map__fd(skel->maps.tallies);
    for (int i = 0; i < np; i++) {
        struct pfr_walk_tally zero = {0};
        uint32_t key = (uint32_t)procs[i].pid;
        CHECK(bpf_map_update_elem(tfd, &key, &zero, BPF_ANY) == 0, "tally %s: %s", procs[i].name,
              strerror(errno));
    }
    struct bpf_link *links[1024];
    int nlinks = attach(skel, links, 1024);
    CHECK(nlinks > 0, "attached to no CPU");
    double end = now_s() + SECONDS;
    while (now_s() < end)
        usleep(50000);
    for (int i = 0; i < nlinks; i++)
        bpf_link__destroy(links[i]);
    for (int i = 0; i < np; i++) {
        kill(procs[i].pid, SIGKILL);
        waitpid(procs[i].pid, NULL, 0);
    }

    for (int i = 0; i < np; i++) {
        struct pfr_walk_tally t = {0};
        uint32_t key = (uint32_t)procs[i].pid;
        bpf_map_lookup_elem(tfd, &key, &t);
        double depth = t.compared ? (double)t.frames / (double)(t.compared - t.differ) : 0;
        printf("%-26s compared %5llu differ %llu in_kernel %4llu mean frames %5.1f "
               "not_walked %llu kernel_fail %llu\n",
               procs[i].name, (unsigned long long)t.compared, (unsigned long long)t.differ,
               (unsigned long long)t.in_kernel, depth, (unsigned long long)t.not_walked,
               (unsigned long long)t.kernel_fail);
        CHECK(t.compared >= 20, "%s: %llu samples compared", procs[i].name,
              (unsigned long long)t.compared);
        CHECK(t.differ == 0, "%s: %llu of %llu samples differ", procs[i].name,
              (unsigned long long)t.differ, (unsigned long long)t.compared);
        CHECK(t.not_walked == 0, "%s: %llu samples left to the kernel", procs[i].name,
              (unsigned long long)t.not_walked);
        CHECK(t.in_kernel >= procs[i].min_in_kernel, "%s: %llu samples in the kernel",
              procs[i].name, (unsigned long long)t.in_kernel);
        CHECK(depth >= (double)procs[i].min_depth, "%s: %.1f frames a sample", procs[i].name,
              depth);
    }
    if (check_failures)
        print_diff(skel);
    walk_check_bpf__destroy(skel);
    if (check_failures) {
        fprintf(stderr, "%d failure(s)\n", check_failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
