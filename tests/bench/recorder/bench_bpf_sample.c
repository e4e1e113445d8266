/*
 * Per-sample cost of a CPU sampler BPF object, for side-by-side runs of sampler versions (see
 * bench_bpf_sample.py): loads OBJECT with plain libbpf (no skeleton, so any version of
 * cpu_profile.bpf.o loads), attaches its perf_event program to a cpu-clock event at HZ on every
 * online CPU, consumes its ring buffer, and every INTERVAL seconds flips the global active_buf and
 * empties the count maps of the other buffer (maps whose name ends in that buffer's digit, its
 * stack map kept), like the recorder's drain. After WARMUP seconds it reads the program's
 * run_time_ns and run_cnt (kernel.bpf_stats_enabled must be 1), again after SECONDS more, and
 * prints one JSON line.
 *
 * Usage: bench_bpf_sample OBJECT [SECONDS [WARMUP [HZ [INTERVAL]]]]
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 1024

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int on_event(void *ctx, void *data, size_t size)
{
    (void)data;
    (void)size;
    *(unsigned long long *)ctx += 1;
    return 0;
}

/* Offset of global var in .bss, or -1. */
static long bss_offset(struct bpf_object *obj, const char *var)
{
    struct btf *btf = bpf_object__btf(obj);
    if (!btf)
        return -1;
    int id = btf__find_by_name_kind(btf, ".bss", BTF_KIND_DATASEC);
    if (id < 0)
        return -1;
    const struct btf_type *t = btf__type_by_id(btf, (unsigned)id);
    const struct btf_var_secinfo *vs = btf_var_secinfos(t);
    for (unsigned i = 0; i < btf_vlen(t); i++, vs++) {
        const struct btf_type *v = btf__type_by_id(btf, vs->type);
        if (strcmp(btf__name_by_offset(btf, v->name_off), var) == 0)
            return (long)vs->offset;
    }
    return -1;
}

/* Delete every entry of map (any type with keys). */
static void empty_map(const struct bpf_map *m)
{
    int fd = bpf_map__fd(m);
    size_t ksz = bpf_map__key_size(m);
    char *k = calloc(1, ksz), *next = calloc(1, ksz);
    if (!k || !next)
        goto out;
    while (bpf_map_get_next_key(fd, NULL, next) == 0) {
        memcpy(k, next, ksz);
        if (bpf_map_delete_elem(fd, k))
            break;
    }
out:
    free(k);
    free(next);
}

static void drain(struct bpf_object *obj, volatile unsigned *active)
{
    /* counted up, as the recorder does (the sampler tags its memo of stored stacks with it) */
    unsigned flips = __atomic_load_n(active, __ATOMIC_SEQ_CST), old = flips & 1;
    __atomic_store_n(active, flips + 1, __ATOMIC_SEQ_CST);
    usleep(20000); /* a sample in flight ends well within this */
    struct bpf_map *m;
    bpf_object__for_each_map(m, obj)
    {
        const char *n = bpf_map__name(m);
        size_t len = strlen(n);
        enum bpf_map_type t = bpf_map__type(m);
        /* Stack maps stay, as the recorder keeps them across drains (it empties one only past
         * half full, which this workload's stacks do not reach in a round); collision maps
         * (xstacks, samplers before 2026-11-25) were read and emptied at every drain. */
        if (len && n[len - 1] == (char)('0' + old) && strncmp(n, "stacks", 6) != 0 &&
            (t == BPF_MAP_TYPE_HASH || t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_LRU_HASH))
            empty_map(m);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OBJECT [SECONDS [WARMUP [HZ [INTERVAL]]]]\n", argv[0]);
        return 2;
    }
    double seconds = argc > 2 ? atof(argv[2]) : 30;
    double warmup = argc > 3 ? atof(argv[3]) : 10;
    unsigned hz = argc > 4 ? (unsigned)atoi(argv[4]) : 100;
    double interval = argc > 5 ? atof(argv[5]) : 10;

    struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
    if (!obj) {
        fprintf(stderr, "open %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    /* Samplers with unwind tables have a second perf_event program (pfr_sample_uw); it needs
     * its tables loaded by the recorder to walk with them: the frame-pointer one is measured. */
    struct bpf_program *fp = bpf_object__find_program_by_name(obj, "pfr_sample");
    struct bpf_program *uw = bpf_object__find_program_by_name(obj, "pfr_sample_uw");
    if (fp && uw)
        bpf_program__set_autoload(uw, false);
    if (bpf_object__load(obj)) {
        fprintf(stderr, "load %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    struct bpf_program *prog = NULL, *p;
    bpf_object__for_each_program(p, obj)
    {
        if (bpf_program__type(p) == BPF_PROG_TYPE_PERF_EVENT && bpf_program__autoload(p))
            prog = p;
    }
    struct bpf_map *bss = NULL, *rbmap = NULL, *m;
    bpf_object__for_each_map(m, obj)
    {
        const char *n = bpf_map__name(m);
        if (strlen(n) >= 4 && strcmp(n + strlen(n) - 4, ".bss") == 0)
            bss = m;
        if (bpf_map__type(m) == BPF_MAP_TYPE_RINGBUF)
            rbmap = m;
    }
    long off = bss_offset(obj, "active_buf");
    size_t bss_size = 0;
    char *bss_mem = bss ? (char *)(uintptr_t)bpf_map__initial_value(bss, &bss_size) : NULL;
    if (!prog || !bss_mem || off < 0 || (size_t)off + 4 > bss_size) {
        fprintf(stderr, "%s: no perf_event program or no active_buf in .bss\n", argv[1]);
        return 1;
    }
    volatile unsigned *active = (volatile unsigned *)(void *)(bss_mem + off);

    static struct bpf_link *links[MAX_LINKS];
    int nlinks = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < ncpu && nlinks < MAX_LINKS; cpu++) {
        struct perf_event_attr attr = {
            .type = PERF_TYPE_SOFTWARE,
            .size = sizeof(attr),
            .config = PERF_COUNT_SW_CPU_CLOCK,
            .freq = 1,
            .sample_freq = hz,
        };
        int fd = (int)syscall(SYS_perf_event_open, &attr, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
            continue;
        struct bpf_link *l = bpf_program__attach_perf_event(prog, fd);
        if (!l) {
            close(fd);
            continue;
        }
        links[nlinks++] = l;
    }
    unsigned long long events = 0;
    struct ring_buffer *rb =
        rbmap ? ring_buffer__new(bpf_map__fd(rbmap), on_event, &events, NULL) : NULL;

    struct bpf_prog_info i0, i1;
    uint32_t len = sizeof(i0);
    double start = now_s(), next_drain = start + interval, t0 = 0;
    int measuring = 0;
    memset(&i0, 0, sizeof(i0));
    for (;;) {
        if (rb)
            ring_buffer__poll(rb, 100);
        else
            usleep(100000);
        double t = now_s();
        if (t >= next_drain) {
            drain(obj, active);
            next_drain += interval;
        }
        if (!measuring && t >= start + warmup) {
            len = sizeof(i0);
            memset(&i0, 0, sizeof(i0));
            bpf_obj_get_info_by_fd(bpf_program__fd(prog), &i0, &len);
            t0 = t;
            measuring = 1;
        }
        if (measuring && t >= t0 + seconds)
            break;
    }
    double t1 = now_s();
    len = sizeof(i1);
    memset(&i1, 0, sizeof(i1));
    bpf_obj_get_info_by_fd(bpf_program__fd(prog), &i1, &len);
    unsigned long long runs = i1.run_cnt - i0.run_cnt, ns = i1.run_time_ns - i0.run_time_ns;
    printf("{\"object\": \"%s\", \"cpus\": %d, \"hz\": %u, \"seconds\": %.3f, \"runs\": %llu, "
           "\"run_ns\": %llu, \"ns_per_run\": %.1f, \"bpf_s_per_min\": %.4f, \"misses\": %llu, "
           "\"events\": %llu}\n",
           argv[1], nlinks, hz, t1 - t0, runs, ns, runs ? (double)ns / (double)runs : 0.0,
           (double)ns / 1e9 / (t1 - t0) * 60,
           (unsigned long long)(i1.recursion_misses - i0.recursion_misses), events);
    ring_buffer__free(rb);
    for (int i = 0; i < nlinks; i++)
        bpf_link__destroy(links[i]);
    bpf_object__close(obj);
    return runs ? 0 : 1;
}
