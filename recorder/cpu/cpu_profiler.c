/* Loader, attacher and drainer of the BPF CPU sampler (bpf/cpu_profile.bpf.c). */
#include "cpu_profiler.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu_profile.skel.h"
#include "pfr_hash.h"
#include "pfr_map.h"
#include "unwind_table.h"
#include "unwinder.h"
#include "unwind_asks.h"

#define MAX_CPUS       4096
#define BATCH          256
#define QUIESCE_MAX_MS 1000
/* a walk of a stack map: entries a system call (a stack is 1 KiB), and the
 * stacks to read that make one worth it */
#define WALK_BATCH 64
#define WALK_MIN   64
/* what a map without a batch operation answers (the kernel's own ENOTSUPP, not
 * ENOTSUP) */
#define KERNEL_ENOTSUPP 524

/* Stacks by id: id -> (offset << 8 | nframes) into ips. */
struct stack_store {
    pfr_map index;
    uint64_t *ips;
    size_t nips, cap;
};

static void stack_store_clear(struct stack_store *ss)
{
    pfr_map_clear(&ss->index);
    ss->nips = 0;
}

static void stack_store_free(struct stack_store *ss)
{
    pfr_map_free(&ss->index);
    free(ss->ips);
}

struct pfr_cpu_profiler {
    struct cpu_profile_bpf *skel;
    struct bpf_link **links;
    int nlinks;
    int ncpus;
    int npossible;
    struct ring_buffer *rb;
    pfr_cpu_event_cb cb;
    void *cb_ctx;
    struct bpf_program *sampler; /* the sampler program loaded: pfr_sample or pfr_sample_uw */
    pfr_unwinder *unwinder;      /* NULL: user stacks by frame pointers only */
    pfr_unwind_asks *asks;       /* the sampler's requests into unwinder (with it only) */
    union {                      /* the notification being delivered, copied out of the ring */
        struct pfr_event ev;
        struct pfr_exit_maps exit;
        struct pfr_path_event path;
    } evbuf;

    /* drain state, reused */
    struct pfr_count_key *kbuf;
    uint64_t *cbuf;
    struct pfr_stack *stack; /* one stack map value */
    pfr_cpu_sample *samples;
    size_t nsamples, samples_cap;
    /* The stacks read from each buffer's stack map: an id there names the same frames while
     * the map holds it, so each stack is read once, not once an interval. */
    struct stack_store kept[2];
    bool kept_stale[2]; /* that buffer's map was emptied: forget its stacks before reusing it */
    unsigned keep_max;  /* stacks kept per buffer before its map is emptied */
    uint32_t drained;   /* buffer of the last drain */
    uint64_t stack_reads, stack_map_resets;
    struct pfr_cpu_state *cpu_state; /* npossible values */
    struct pfr_pending *pending;     /* npossible values */
    pfr_map key_index;               /* hash of a count key -> index in samples */
    pfr_map want;                    /* stack ids a drain must read (read_new_stacks) */
    uint64_t *walk_keys;             /* WALK_BATCH keys and stacks of a walk of a stack map */
    struct pfr_stack *walk_stacks;
    uint64_t *lookup_ids; /* the stack ids left to look up one by one */
    size_t lookup_cap;
    uint64_t drains;
    /* read-only views of the ring buffer's positions, to tell how far the consumer got */
    const volatile uint64_t *rb_consumer, *rb_producer;
    size_t page;
};

int pfr_parse_cpu_list(const char *text, unsigned char *set, int max)
{
    int count = 0;
    const char *p = text;
    memset(set, 0, (size_t)max);
    while (*p && *p != '\n') {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p || a < 0)
            return -EINVAL;
        long b = a;
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a)
                return -EINVAL;
            p = end;
        }
        if (b >= max)
            return -EINVAL;
        for (long c = a; c <= b; c++) {
            if (!set[c])
                count++;
            set[c] = 1;
        }
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            return -EINVAL;
    }
    return count;
}

/* An exit's mapping list, checked against the record's size: kept, or the exit is delivered as a
 * plain one. */
static void copy_exit_maps(struct pfr_exit_maps *e, const void *data, size_t size)
{
    const size_t head = offsetof(struct pfr_exit_maps, maps);
    uint32_t n = 0;
    if (size >= head)
        memcpy(&n, (const char *)data + offsetof(struct pfr_exit_maps, nmaps), sizeof(n));
    if (e->ev.type != PFR_EV_EXIT || size < head || n > PFR_EXIT_MAPS_MAX ||
        size < head + n * sizeof(struct pfr_map_rec)) {
        e->ev.flags &= ~(PFR_EVF_MAPS | PFR_EVF_MAPS_CUT);
        return;
    }
    e->nmaps = n;
    memcpy(e->maps, (const char *)data + head, n * sizeof(struct pfr_map_rec));
}

/* Copies a notification out of the ring (records are not aligned for direct use past the
 * header), checks what follows the header against the record's size, and delivers it. A path
 * notification too short, or with a component left unterminated, is dropped. */
static int handle_event(void *ctx, void *data, size_t size)
{
    pfr_cpu_profiler *cp = ctx;
    struct pfr_event *ev = &cp->evbuf.ev;
    if (size < sizeof(struct pfr_event))
        return 0;
    memcpy(ev, data, sizeof(*ev));
    ev->comm[PFR_TASK_COMM_LEN - 1] = '\0';
    if (ev->type == PFR_EV_UNWIND) /* the unwinder's, from a ring of their own (unwind_asks.h) */
        return 0;
    if (ev->type == PFR_EV_PATH) {
        struct pfr_path_event *pe = &cp->evbuf.path;
        if (size < sizeof(*pe))
            return 0;
        memcpy(pe, data, sizeof(*pe));
        pe->ev.comm[PFR_TASK_COMM_LEN - 1] = '\0';
        if (pe->nparts > PFR_PATH_PARTS)
            return 0;
        for (uint32_t i = 0; i < pe->nparts; i++)
            if (!memchr(pe->parts[i], '\0', PFR_PATH_PART_LEN))
                return 0;
    } else {
        cp->evbuf.exit.nmaps = 0;
        if (ev->flags & PFR_EVF_MAPS)
            copy_exit_maps(&cp->evbuf.exit, data, size);
    }
    if (cp->cb)
        cp->cb(ev, cp->cb_ctx);
    return 0;
}

static int attach_cpus(pfr_cpu_profiler *cp, unsigned hz, const pfr_bpf_env *env, char *err,
                       size_t errlen)
{
    unsigned char *online = calloc(MAX_CPUS, 1);
    char buf[4096] = "";
    int rc = 0;
    if (!online)
        return -ENOMEM;
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    if (f) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    int n = pfr_parse_cpu_list(buf, online, MAX_CPUS);
    if (n <= 0) {
        snprintf(err, errlen, "cannot read the online CPU list /sys/devices/system/cpu/online");
        free(online);
        return -EIO;
    }
    cp->links = calloc((size_t)n + 2, sizeof(*cp->links));
    if (!cp->links) {
        free(online);
        return -ENOMEM;
    }
    for (int cpu = 0; cpu < MAX_CPUS; cpu++) {
        if (!online[cpu])
            continue;
        struct perf_event_attr attr = {
            .type = PERF_TYPE_SOFTWARE,
            .size = sizeof(attr),
            .config = PERF_COUNT_SW_CPU_CLOCK,
            .freq = 1,
            .sample_freq = hz,
        };
        int fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (errno == ENODEV) /* went offline meanwhile */
                continue;
            rc = -errno;
            pfr_bpf_explain(env, "perf_event_open", -rc, err, errlen);
            break;
        }
        struct bpf_link *l = bpf_program__attach_perf_event(cp->sampler, fd);
        if (!l) {
            int e = errno;
            close(fd);
            pfr_bpf_explain(env, "attach", e, err, errlen);
            rc = -e;
            break;
        }
        cp->links[cp->nlinks++] = l; /* the link owns fd from here on */
        cp->ncpus++;
    }
    free(online);
    return rc;
}

static int attach_tracepoints(pfr_cpu_profiler *cp, const pfr_bpf_env *env, char *err,
                              size_t errlen)
{
    struct bpf_program *progs[] = {cp->skel->progs.pfr_exec, cp->skel->progs.pfr_exit};
    for (size_t i = 0; i < 2; i++) {
        struct bpf_link *l = bpf_program__attach(progs[i]);
        if (!l) {
            pfr_bpf_explain(env, "attach tracepoint", errno, err, errlen);
            return -errno;
        }
        cp->links[cp->nlinks++] = l;
    }
    return 0;
}

/* Unwind tables before load: on (rodata) where the mode wants them and this kernel's BPF can
 * find a pc's mapping; their array sized to the cap (1 row when off: an array cannot be
 * empty). *rows is the cap when on, else 0. */
static int unwind_setup(pfr_cpu_profiler *cp, const pfr_cpu_profiler_opts *opts, uint32_t *rows,
                        char *err, size_t errlen)
{
    *rows = 0;
#if defined(__x86_64__)
    bool can = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_find_vma, NULL) > 0;
#else
    bool can = false; /* the sampler's table walk is x86-64's only, for now */
#endif
    if (opts->unwind == PFR_UNWIND_DWARF && !can) {
        snprintf(err, errlen,
                 "--unwind dwarf: this kernel cannot walk stacks with unwind tables (needs "
                 "x86-64 and bpf_find_vma, Linux 5.17 or later); use --unwind auto or fp");
        return -EOPNOTSUPP;
    }
    if (opts->unwind != PFR_UNWIND_FP && can)
        *rows = opts->unwind_rows ? opts->unwind_rows : PFR_UNWIND_ROWS_DEFAULT;
    /* one sampler program is loaded: the other's code need not pass this kernel's verifier */
    bpf_program__set_autoload(cp->skel->progs.pfr_sample, *rows == 0);
    bpf_program__set_autoload(cp->skel->progs.pfr_sample_uw, *rows != 0);
    cp->sampler = *rows ? cp->skel->progs.pfr_sample_uw : cp->skel->progs.pfr_sample;
    struct bpf_map *m = cp->skel->maps.unwind_rows;
    bpf_map__set_max_entries(m, *rows ? *rows : 1);
    /* the unwinder writes rows by copy into a mapping of the array, not one update per row
     * (Linux 5.5; the table walk needs 5.17) */
    if (*rows)
        bpf_map__set_map_flags(m, bpf_map__map_flags(m) | BPF_F_MMAPABLE);
    return 0;
}

int pfr_cpu_profiler_open(const pfr_cpu_profiler_opts *opts, pfr_cpu_event_cb cb, void *cb_ctx,
                          pfr_cpu_profiler **out, char *err, size_t errlen)
{
    pfr_bpf_env env;
    pfr_bpf_env_read(&env);
    int rc = pfr_bpf_precheck(&env, err, errlen);
    if (rc)
        return rc;

    pfr_cpu_profiler *cp = calloc(1, sizeof(*cp));
    if (!cp)
        return -ENOMEM;
    cp->cb = cb;
    cp->cb_ctx = cb_ctx;
    cp->npossible = libbpf_num_possible_cpus();
    cp->kbuf = calloc(BATCH, sizeof(*cp->kbuf));
    cp->cbuf = calloc(BATCH, sizeof(*cp->cbuf));
    cp->stack = calloc(1, sizeof(*cp->stack));
    cp->walk_keys = calloc(WALK_BATCH, sizeof(*cp->walk_keys));
    cp->walk_stacks = calloc(WALK_BATCH, sizeof(*cp->walk_stacks));
    cp->cpu_state =
        calloc(cp->npossible > 0 ? (size_t)cp->npossible : 1, sizeof(struct pfr_cpu_state));
    cp->pending = calloc(cp->npossible > 0 ? (size_t)cp->npossible : 1, sizeof(struct pfr_pending));
    if (cp->npossible <= 0 || !cp->kbuf || !cp->cbuf || !cp->stack || !cp->cpu_state ||
        !cp->pending || !cp->walk_keys || !cp->walk_stacks) {
        rc = -ENOMEM;
        goto fail;
    }

    cp->skel = cpu_profile_bpf__open();
    if (!cp->skel) {
        rc = -errno;
        pfr_bpf_explain(&env, "open", errno, err, errlen);
        goto fail;
    }
    unsigned se = opts->stack_map_entries ? opts->stack_map_entries : 8192;
    unsigned ce = opts->count_map_entries ? opts->count_map_entries : 16384;
    bpf_map__set_max_entries(cp->skel->maps.stacks0, se);
    bpf_map__set_max_entries(cp->skel->maps.stacks1, se);
    /* half the map for the stacks kept from before, half for an interval's new ones */
    cp->keep_max = se / 2;
    bpf_map__set_max_entries(cp->skel->maps.counts0, ce);
    bpf_map__set_max_entries(cp->skel->maps.counts1, ce);
    uint32_t rows = 0;
    rc = unwind_setup(cp, opts, &rows, err, errlen);
    if (rc)
        goto fail;
    rc = cpu_profile_bpf__load(cp->skel);
    if (rc) {
        int e = errno ? errno : -rc;
        pfr_bpf_explain(&env, "load", e, err, errlen);
        rc = -e;
        goto fail;
    }
    if (rows) {
        pfr_unwinder_opts uo = {
            .max_rows = rows,
            .build_flags = opts->unwind == PFR_UNWIND_DWARF ? PFR_UNWIND_BUILD_GO : 0,
            .fsguard = opts->fsguard,
            .membudget = opts->membudget,
            .on_refused = opts->unwind_refused,
            .on_built = opts->unwind_built,
            .cache_dir = opts->unwind_cache_dir,
            .cache_bytes = opts->unwind_cache_bytes,
            .cache_keep = opts->unwind_cache_keep,
            .on_cache_error = opts->unwind_cache_error,
            .ctx = opts->unwind_refused_ctx,
            .files_gen = &cp->skel->bss->uw_files_gen,
        };
        rc = pfr_unwinder_new(&uo, bpf_map__fd(cp->skel->maps.unwind_rows),
                              bpf_map__fd(cp->skel->maps.unwind_files),
                              bpf_map__fd(cp->skel->maps.unwind_asked), &cp->unwinder, err, errlen);
        if (rc)
            goto fail;
        rc = pfr_unwind_asks_start(bpf_map__fd(cp->skel->maps.unwind_asks), cp->unwinder, &cp->asks,
                                   err, errlen);
        if (rc)
            goto fail;
    }
    rc = attach_cpus(cp, opts->hz, &env, err, errlen);
    if (rc)
        goto fail;
    rc = attach_tracepoints(cp, &env, err, errlen);
    if (rc)
        goto fail;
    cp->rb = ring_buffer__new(bpf_map__fd(cp->skel->maps.events), handle_event, cp, NULL);
    if (!cp->rb) {
        rc = -errno;
        pfr_bpf_explain(&env, "ring buffer", errno, err, errlen);
        goto fail;
    }
    /* the BPF ring buffer's first page holds the consumer position, the second the producer's */
    cp->page = (size_t)sysconf(_SC_PAGESIZE);
    int rbfd = bpf_map__fd(cp->skel->maps.events);
    void *c = mmap(NULL, cp->page, PROT_READ, MAP_SHARED, rbfd, 0);
    void *pr = mmap(NULL, cp->page, PROT_READ, MAP_SHARED, rbfd, (off_t)cp->page);
    cp->rb_consumer = c == MAP_FAILED ? NULL : c;
    cp->rb_producer = pr == MAP_FAILED ? NULL : pr;
    *out = cp;
    return 0;
fail:
    pfr_cpu_profiler_close(cp);
    return rc;
}

void pfr_cpu_profiler_close(pfr_cpu_profiler *cp)
{
    if (!cp)
        return;
    if (cp->rb_consumer)
        munmap((void *)cp->rb_consumer, cp->page);
    if (cp->rb_producer)
        munmap((void *)cp->rb_producer, cp->page);
    ring_buffer__free(cp->rb);
    for (int i = 0; i < cp->nlinks; i++)
        bpf_link__destroy(cp->links[i]);
    pfr_unwind_asks_stop(cp->asks);  /* before the unwinder it feeds */
    pfr_unwinder_free(cp->unwinder); /* before the maps it writes go */
    free(cp->links);
    cpu_profile_bpf__destroy(cp->skel);
    free(cp->kbuf);
    free(cp->cbuf);
    free(cp->stack);
    free(cp->cpu_state);
    free(cp->pending);
    pfr_map_free(&cp->key_index);
    pfr_map_free(&cp->want);
    free(cp->walk_keys);
    free(cp->walk_stacks);
    free(cp->lookup_ids);
    free(cp->samples);
    stack_store_free(&cp->kept[0]);
    stack_store_free(&cp->kept[1]);
    free(cp);
}

int pfr_cpu_profiler_ncpus(const pfr_cpu_profiler *cp)
{
    return cp->ncpus;
}

uint64_t pfr_cpu_profiler_events_produced(const pfr_cpu_profiler *cp)
{
    return cp->rb_producer ? __atomic_load_n(cp->rb_producer, __ATOMIC_ACQUIRE) : 0;
}

uint64_t pfr_cpu_profiler_events_consumed(const pfr_cpu_profiler *cp)
{
    return cp->rb_consumer ? __atomic_load_n(cp->rb_consumer, __ATOMIC_ACQUIRE) : UINT64_MAX;
}

int pfr_cpu_profiler_event_fd(const pfr_cpu_profiler *cp)
{
    return ring_buffer__epoll_fd(cp->rb);
}

int pfr_cpu_profiler_consume_events(pfr_cpu_profiler *cp)
{
    return ring_buffer__consume(cp->rb);
}

int pfr_cpu_profiler_poll_events(pfr_cpu_profiler *cp, int timeout_ms)
{
    int n = ring_buffer__poll(cp->rb, timeout_ms);
    if (n == 0 || n == -EINTR)
        n = ring_buffer__consume(cp->rb); /* exits are queued without a wake-up */
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* Wait until every CPU has been seen outside the sampler once since the flip. */
static int quiesce(pfr_cpu_profiler *cp)
{
    int fd = bpf_map__fd(cp->skel->maps.cpu_state);
    uint32_t zero = 0;
    unsigned char *done = calloc((size_t)cp->npossible, 1);
    if (!done)
        return -ENOMEM;
    int pending = cp->npossible;
    for (int waited = 0; pending > 0 && waited <= QUIESCE_MAX_MS; waited++) {
        if (bpf_map_lookup_elem(fd, &zero, cp->cpu_state)) {
            free(done);
            return -errno;
        }
        for (int c = 0; c < cp->npossible; c++) {
            if (!done[c] && __atomic_load_n(&cp->cpu_state[c].inflight, __ATOMIC_RELAXED) == 0) {
                done[c] = 1;
                pending--;
            }
        }
        if (pending > 0)
            sleep_ms(1);
    }
    free(done);
    return pending > 0 ? -ETIMEDOUT : 0;
}

static int add_sample(pfr_cpu_profiler *cp, const struct pfr_count_key *k, uint64_t count)
{
    if (cp->nsamples == cp->samples_cap) {
        size_t cap = cp->samples_cap ? cp->samples_cap * 2 : 1024;
        pfr_cpu_sample *s = realloc(cp->samples, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        cp->samples = s;
        cp->samples_cap = cap;
    }
    cp->samples[cp->nsamples++] =
        (pfr_cpu_sample){.tgid = k->tgid, .kstack = k->kstack, .ustack = k->ustack, .count = count};
    return 0;
}

static int add_stack(struct stack_store *ss, uint64_t id, const uint64_t *frames, uint32_t n)
{
    if (n > PFR_MAX_STACK_DEPTH)
        n = PFR_MAX_STACK_DEPTH;
    if (ss->nips + n > ss->cap) {
        size_t cap = ss->cap ? ss->cap : 4096;
        while (cap < ss->nips + n)
            cap *= 2;
        uint64_t *ips = realloc(ss->ips, cap * sizeof(*ips));
        if (!ips)
            return -ENOMEM;
        ss->ips = ips;
        ss->cap = cap;
    }
    memcpy(ss->ips + ss->nips, frames, n * sizeof(uint64_t));
    int rc = pfr_map_put(&ss->index, id, ((uint64_t)ss->nips << 8) | n);
    ss->nips += n;
    return rc;
}

/* Whether errno e from a batch operation on a map means this kernel or map has none (a kernel
 * before 5.6: EINVAL; a map type without it: the kernel's ENOTSUPP): the caller then goes key by
 * key. */
static bool no_batch(int e)
{
    return e == EINVAL || e == ENOTSUP || e == KERNEL_ENOTSUPP;
}

/* Read and delete every entry of a hash map, BATCH at a time; falls back to key iteration on
 * kernels without batch operations. each() gets entry i of the buffers. */
static int drain_map(int fd, void *keys, void *vals, size_t ksz, size_t vsz,
                     int (*each)(pfr_cpu_profiler *, const void *, const void *),
                     pfr_cpu_profiler *cp)
{
    uint64_t in = 0, outb = 0;
    bool first = true;
    for (;;) {
        uint32_t count = BATCH;
        int rc = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in, &outb, keys, vals, &count,
                                                 NULL);
        int e = rc ? errno : 0;
        for (uint32_t i = 0; i < count; i++) {
            int r = each(cp, (const char *)keys + i * ksz, (const char *)vals + i * vsz);
            if (r)
                return r;
        }
        if (rc && e == ENOENT)
            return 0;
        if (rc && no_batch(e) && first)
            break; /* no batch support: iterate */
        if (rc)
            return -e;
        in = outb;
        first = false;
    }
    while (bpf_map_get_next_key(fd, NULL, keys) == 0) {
        if (bpf_map_lookup_elem(fd, keys, vals) == 0) {
            int r = each(cp, keys, vals);
            if (r)
                return r;
        }
        bpf_map_delete_elem(fd, keys);
    }
    return 0;
}

static int each_count(pfr_cpu_profiler *cp, const void *k, const void *v)
{
    uint64_t c;
    memcpy(&c, v, sizeof(c));
    return add_sample(cp, k, c);
}

static uint64_t key_hash(const struct pfr_count_key *k)
{
    return pfr_hash_combine(pfr_hash_combine(pfr_mix64((uint64_t)k->tgid + 1), k->kstack),
                            k->ustack);
}

static bool same_key(const pfr_cpu_sample *s, const struct pfr_count_key *k)
{
    return s->tgid == k->tgid && s->kstack == k->kstack && s->ustack == k->ustack;
}

/* Add the pending slots of every CPU (read after the flip: no CPU writes them any more) to the
 * samples read from the count map, then empty them. */
static int drain_pending(pfr_cpu_profiler *cp, int fd)
{
    uint32_t zero = 0;
    size_t total = (size_t)cp->npossible * sizeof(struct pfr_pending);
    if (bpf_map_lookup_elem(fd, &zero, cp->pending))
        return -errno;
    bool any = false;
    for (int c = 0; c < cp->npossible && !any; c++)
        for (unsigned i = 0; i < PFR_PENDING_SLOTS && !any; i++)
            any = cp->pending[c].slot[i].count != 0;
    if (!any)
        return 0;
    pfr_map_clear(&cp->key_index);
    for (size_t i = 0; i < cp->nsamples; i++) {
        const pfr_cpu_sample *s = &cp->samples[i];
        struct pfr_count_key k = {.tgid = s->tgid, .kstack = s->kstack, .ustack = s->ustack};
        int rc = pfr_map_put(&cp->key_index, key_hash(&k), i);
        if (rc)
            return rc;
    }
    for (int c = 0; c < cp->npossible; c++) {
        for (unsigned i = 0; i < PFR_PENDING_SLOTS; i++) {
            const struct pfr_pending_slot *sl = &cp->pending[c].slot[i];
            if (!sl->count)
                continue;
            uint64_t h = key_hash(&sl->key);
            uint64_t *idx = pfr_map_get(&cp->key_index, h);
            if (idx && same_key(&cp->samples[*idx], &sl->key)) {
                cp->samples[*idx].count += sl->count;
                continue;
            }
            size_t j = 0;
            while (idx && j < cp->nsamples && !same_key(&cp->samples[j], &sl->key))
                j++; /* a hash collision: rare */
            if (idx && j < cp->nsamples) {
                cp->samples[j].count += sl->count;
                continue;
            }
            int rc = add_sample(cp, &sl->key, sl->count);
            if (rc == 0 && !idx)
                rc = pfr_map_put(&cp->key_index, h, cp->nsamples - 1);
            if (rc)
                return rc;
        }
    }
    memset(cp->pending, 0, total);
    return bpf_map_update_elem(fd, &zero, cp->pending, BPF_ANY) ? -errno : 0;
}

static bool in_stack_map(uint64_t id)
{
    return (id & PFR_STACK_HASHED) != 0;
}

/* The stacks of the drained samples not kept yet, into cp->want. */
static int want_new_stacks(pfr_cpu_profiler *cp, const struct stack_store *ks)
{
    pfr_map_clear(&cp->want);
    for (size_t i = 0; i < cp->nsamples; i++) {
        const uint64_t ids[2] = {cp->samples[i].kstack, cp->samples[i].ustack};
        for (int j = 0; j < 2; j++) {
            if (!in_stack_map(ids[j]) || pfr_map_get(&ks->index, ids[j]))
                continue;
            int rc = pfr_map_put(&cp->want, ids[j], 1);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Keep a stack read from the map, if wanted (each once). */
static int keep_stack(pfr_cpu_profiler *cp, struct stack_store *ks, uint64_t id,
                      const struct pfr_stack *st)
{
    if (!pfr_map_del(&cp->want, id))
        return 0;
    cp->stack_reads++;
    return st->nframes ? add_stack(ks, id, (const uint64_t *)st->ips, st->nframes) : 0;
}

/* The wanted stacks read by walking the whole map, WALK_BATCH entries a system
 * call: when they are a good part of it (after a reset, all of it), that is far
 * fewer calls than one lookup each (~1,600 an interval in the steady-state
 * bench, 9.6 % of pfr-cpu's time). -EOPNOTSUPP where the kernel has no batch,
 * -ENOSPC when a bucket outgrows the batch: the caller then looks up what is
 * left one by one. */
static int walk_stacks(pfr_cpu_profiler *cp, int fd, struct stack_store *ks)
{
    uint64_t in = 0, outb = 0;
    bool first = true;
    while (cp->want.n > 0) {
        uint32_t count = WALK_BATCH;
        int rc = bpf_map_lookup_batch(fd, first ? NULL : &in, &outb, cp->walk_keys, cp->walk_stacks,
                                      &count, NULL);
        int e = rc ? errno : 0;
        for (uint32_t i = 0; i < count; i++) {
            int r = keep_stack(cp, ks, cp->walk_keys[i], &cp->walk_stacks[i]);
            if (r)
                return r;
        }
        if (rc && e == ENOENT)
            return 0;
        if (rc)
            return no_batch(e) ? -EOPNOTSUPP : -e;
        in = outb;
        first = false;
    }
    return 0;
}

/* The wanted stacks left, one lookup each. */
static int lookup_stacks(pfr_cpu_profiler *cp, int fd, struct stack_store *ks)
{
    uint64_t id, v;
    size_t pos = 0, n = 0;
    /* collected first: keep_stack deletes from want */
    while (pfr_map_next(&cp->want, &pos, &id, &v)) {
        if (n == cp->lookup_cap) {
            size_t cap = n ? 2 * n : 256;
            uint64_t *ids = realloc(cp->lookup_ids, cap * sizeof(*ids));
            if (!ids)
                return -ENOMEM;
            cp->lookup_ids = ids;
            cp->lookup_cap = cap;
        }
        cp->lookup_ids[n++] = id;
    }
    for (size_t i = 0; i < n; i++) {
        if (bpf_map_lookup_elem(fd, &cp->lookup_ids[i], cp->stack) != 0) {
            if (errno == ENOENT)
                continue; /* shown as an unknown stack */
            return -errno;
        }
        int rc = keep_stack(cp, ks, cp->lookup_ids[i], cp->stack);
        if (rc)
            return rc;
    }
    return 0;
}

/* Read from stack map fd the stacks of the drained samples not kept yet: by
 * walking the map when they are at least a quarter of it, else one lookup each.
 */
static int read_new_stacks(pfr_cpu_profiler *cp, int fd, struct stack_store *ks)
{
    int rc = want_new_stacks(cp, ks);
    if (rc)
        return rc;
    size_t nwant = cp->want.n;
    if (nwant >= WALK_MIN && nwant * 4 >= ks->index.n + nwant) {
        rc = walk_stacks(cp, fd, ks);
        if (rc && rc != -EOPNOTSUPP && rc != -ENOSPC)
            return rc;
    }
    return cp->want.n ? lookup_stacks(cp, fd, ks) : 0;
}

/* Delete the stacks read from a stack map (ks), BATCH in one
 * BPF_MAP_DELETE_BATCH (Linux 5.6): emptying the map key by key took a listing
 * and a delete system call a key, ~17,600 calls a reset of an 8,192-entry
 * map, 8.7 % of pfr-cpu's time in the steady-state bench. Returns -EOPNOTSUPP
 * where the kernel has no batch (the key walk then does it all). */
static int delete_read_stacks(int fd, const struct stack_store *ks)
{
    uint64_t keys[BATCH], k, v;
    size_t pos = 0;
    bool more = true;
    while (more) {
        uint32_t n = 0;
        while (n < BATCH && (more = pfr_map_next(&ks->index, &pos, &k, &v)))
            keys[n++] = k;
        for (uint32_t done = 0; done < n;) {
            uint32_t count = n - done;
            if (bpf_map_delete_batch(fd, keys + done, &count, NULL) == 0)
                break;
            /* ENOENT: a stack gone already (count: those deleted before it): skip it */
            if (errno != ENOENT)
                return no_batch(errno) ? -EOPNOTSUPP : -errno;
            done += count + 1;
        }
    }
    return 0;
}

/* Empty a stack map: the stacks read from it deleted in batches, then the rest
 * (stored, never read: their counts were lost) BATCH keys listed, then deleted,
 * until none is left (a hash map's key walk restarts from its first bucket
 * after a deleted key, so deleting while walking would rescan the emptied
 * buckets for every key). */
static int empty_stack_map(int fd, const struct stack_store *ks)
{
    int rc = delete_read_stacks(fd, ks);
    if (rc && rc != -EOPNOTSUPP)
        return rc;
    uint64_t keys[BATCH];
    for (;;) {
        size_t n = 0;
        int rc = 0;
        while (n < BATCH && (rc = bpf_map_get_next_key(fd, n ? &keys[n - 1] : NULL, &keys[n])) == 0)
            n++;
        if (rc && errno != ENOENT)
            return -errno;
        for (size_t i = 0; i < n; i++)
            if (bpf_map_delete_elem(fd, &keys[i]) && errno != ENOENT)
                return -errno;
        if (n < BATCH)
            return 0;
    }
}

int pfr_cpu_profiler_drain(pfr_cpu_profiler *cp, pfr_cpu_drain *out)
{
    struct cpu_profile_bpf *s = cp->skel;
    /* counted up, not toggled: the sampler's memo of stored stacks is tagged with the whole
     * value, so one made before a map was emptied is never trusted (struct pfr_walk) */
    uint32_t flips = __atomic_load_n(&s->bss->active_buf, __ATOMIC_SEQ_CST);
    uint32_t old = flips & 1;
    __atomic_store_n(&s->bss->active_buf, flips + 1, __ATOMIC_SEQ_CST);
    int rc = quiesce(cp);
    if (rc == -ETIMEDOUT)
        sleep_ms(10); /* a CPU stayed busy for a second: give it a last chance, then go on */
    else if (rc)
        return rc;

    cp->nsamples = 0;
    cp->drained = old;
    struct stack_store *ks = &cp->kept[old];
    if (cp->kept_stale[old]) {
        stack_store_clear(ks);
        cp->kept_stale[old] = false;
    }
    int cfd = bpf_map__fd(old ? s->maps.counts1 : s->maps.counts0);
    int sfd = bpf_map__fd(old ? s->maps.stacks1 : s->maps.stacks0);
    int pfd = bpf_map__fd(old ? s->maps.pending1 : s->maps.pending0);
    /* counts first: a stack is deleted only after every count that refers to it was read */
    rc = drain_map(cfd, cp->kbuf, cp->cbuf, sizeof(*cp->kbuf), sizeof(*cp->cbuf), each_count, cp);
    if (rc == 0)
        rc = drain_pending(cp, pfd);
    if (rc == 0)
        rc = read_new_stacks(cp, sfd, ks);
    /* Past half the map, start again, so an interval's new stacks find room. The stacks stay
     * readable until the next drain of this buffer. */
    if (rc == 0 && ks->index.n > cp->keep_max) {
        rc = empty_stack_map(sfd, ks);
        cp->kept_stale[old] = true;
        cp->stack_map_resets++;
    }
    if (rc)
        return rc;
    out->samples = cp->samples;
    out->nsamples = cp->nsamples;
    out->total = 0;
    for (size_t i = 0; i < cp->nsamples; i++)
        out->total += cp->samples[i].count;
    cp->drains++;
    return 0;
}

const uint64_t *pfr_cpu_profiler_stack(const pfr_cpu_profiler *cp, uint64_t id, size_t *n)
{
    const struct stack_store *ss = &cp->kept[cp->drained];
    uint64_t *v = in_stack_map(id) ? pfr_map_get(&ss->index, id) : NULL;
    if (!v) {
        *n = 0;
        return NULL;
    }
    *n = (size_t)(*v & 0xff);
    return ss->ips + (*v >> 8);
}

int pfr_cpu_profiler_name_file(pfr_cpu_profiler *cp, uint32_t dev, uint64_t ino)
{
    struct pfr_file_key k = {.ino = ino, .dev = dev};
    uint8_t one = 1;
    int rc = bpf_map_update_elem(bpf_map__fd(cp->skel->maps.named_files), &k, &one, BPF_ANY);
    return rc ? -errno : 0;
}

void pfr_cpu_profiler_unname_files(pfr_cpu_profiler *cp)
{
    int fd = bpf_map__fd(cp->skel->maps.named_files);
    struct pfr_file_key k;
    /* deleting the first key each time: the map holds at most PFR_NAMED_FILES_MAX */
    for (int i = 0; i <= PFR_NAMED_FILES_MAX && bpf_map_get_next_key(fd, NULL, &k) == 0; i++)
        bpf_map_delete_elem(fd, &k);
}

int pfr_cpu_profiler_py_set(pfr_cpu_profiler *cp, uint32_t tgid, const struct pfr_py_proc *p)
{
    int rc = bpf_map_update_elem(bpf_map__fd(cp->skel->maps.py_procs), &tgid, p, BPF_ANY);
    if (rc)
        return -errno;
    __atomic_store_n(&cp->skel->bss->py_enabled, 1, __ATOMIC_SEQ_CST);
    return 0;
}

void pfr_cpu_profiler_py_del(pfr_cpu_profiler *cp, uint32_t tgid)
{
    int fd = bpf_map__fd(cp->skel->maps.py_procs);
    bpf_map_delete_elem(fd, &tgid);
    uint32_t k;
    if (bpf_map_get_next_key(fd, NULL, &k) != 0)
        __atomic_store_n(&cp->skel->bss->py_enabled, 0, __ATOMIC_SEQ_CST);
}

int pfr_cpu_profiler_exiting(pfr_cpu_profiler *cp, uint32_t tgid, struct pfr_exiting *out)
{
    return bpf_map_lookup_elem(bpf_map__fd(cp->skel->maps.exiting), &tgid, out) ? -ENOENT : 0;
}

void pfr_cpu_profiler_forget(pfr_cpu_profiler *cp, uint32_t tgid)
{
    bpf_map_delete_elem(bpf_map__fd(cp->skel->maps.known), &tgid);
    /* after the delete: drops the sampler's per-CPU memo of the last process noted */
    __atomic_fetch_add(&cp->skel->bss->known_gen, 1, __ATOMIC_SEQ_CST);
}

void pfr_cpu_profiler_counters(pfr_cpu_profiler *cp, pfr_cpu_counters *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t sum[PFR_CNT_MAX] = {0};
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(cp->skel->maps.cpu_state), &zero, cp->cpu_state) == 0)
        for (int c = 0; c < cp->npossible; c++)
            for (int i = 0; i < PFR_CNT_MAX; i++)
                sum[i] += cp->cpu_state[c].counters[i];
    out->samples = sum[PFR_CNT_SAMPLES];
    out->idle = sum[PFR_CNT_IDLE];
    out->kstack_errors = sum[PFR_CNT_KSTACK_ERR];
    out->ustack_errors = sum[PFR_CNT_USTACK_ERR];
    out->stack_map_full = sum[PFR_CNT_STACK_FULL];
    out->count_map_full = sum[PFR_CNT_COUNT_FULL];
    out->events_lost = sum[PFR_CNT_EVENTS_LOST];
    out->stacks_new = sum[PFR_CNT_STACK_NEW];
    out->exec_no_ustack = sum[PFR_CNT_EXEC_NO_USTACK];
    out->uw_dwarf = sum[PFR_CNT_UW_DWARF];
    out->uw_fp = sum[PFR_CNT_UW_FP];
    out->uw_frames = sum[PFR_CNT_UW_FRAMES];
    out->uw_end = sum[PFR_CNT_UW_END];
    out->uw_pending = sum[PFR_CNT_UW_PENDING];
    out->uw_no_row = sum[PFR_CNT_UW_NO_ROW];
    out->uw_busy = sum[PFR_CNT_UW_BUSY];
    out->uw_vma_miss = sum[PFR_CNT_UW_VMA_MISS];
    out->uw_cut_read = sum[PFR_CNT_UW_CUT_READ];
    out->uw_cut_map = sum[PFR_CNT_UW_CUT_MAP];
    out->uw_cut_depth = sum[PFR_CNT_UW_CUT_DEPTH];
    out->uw_ask_lost = sum[PFR_CNT_UW_ASK_LOST];
    out->py_samples = sum[PFR_CNT_PY_SAMPLES];
    out->py_stacks = sum[PFR_CNT_PY_STACKS];
    out->py_frames = sum[PFR_CNT_PY_FRAMES];
    out->py_no_thread = sum[PFR_CNT_PY_NO_THREAD];
    out->py_cut_read = sum[PFR_CNT_PY_CUT_READ];
    out->py_cut_depth = sum[PFR_CNT_PY_CUT_DEPTH];
    out->py_native_ns = sum[PFR_CNT_PY_NATIVE_NS];
    out->py_walk_ns = sum[PFR_CNT_PY_WALK_NS];
    out->drains = cp->drains;
    out->stack_reads = cp->stack_reads;
    out->stack_map_resets = cp->stack_map_resets;
    struct bpf_program *progs[] = {cp->sampler, cp->skel->progs.pfr_exec, cp->skel->progs.pfr_exit};
    for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
        struct bpf_prog_info info;
        uint32_t len = sizeof(info);
        memset(&info, 0, sizeof(info));
        if (bpf_obj_get_info_by_fd(bpf_program__fd(progs[i]), &info, &len) == 0) {
            out->prog_misses += info.recursion_misses;
            out->prog_run_ns += info.run_time_ns;
            out->prog_runs += info.run_cnt;
        }
    }
}

bool pfr_cpu_profiler_unwind_stats(pfr_cpu_profiler *cp, struct pfr_unwinder_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!cp->unwinder)
        return false;
    pfr_unwinder_stats_get(cp->unwinder, out);
    return true;
}

void pfr_cpu_profiler_unwind_sync(pfr_cpu_profiler *cp)
{
    pfr_unwind_asks_flush(cp->asks, 1000); /* the requests asked so far in the queue first */
    if (cp->unwinder)
        pfr_unwinder_sync(cp->unwinder);
}
