/* Deterministic generator of CPU-profile-shaped pfr_profiles (see pfr_testgen.h). */
#include "pfr_testgen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PERIOD_NS        10000000 /* 100 Hz */
#define MAX_SITES        3
#define MAX_CALLEES      5
#define NROOTS           8
#define NKERNEL          160 /* kernel functions */
#define MAX_KERNEL_DEPTH 10

enum { MAP_MAIN, MAP_LIBC, MAP_KERNEL, NMAPS };

struct tg_func {
    char *name, *file; /* file points into the generator's file list */
    int32_t start_line;
    uint8_t mapping;
    uint8_t nsites;
    uint8_t ncallees;
    int32_t site_line[MAX_SITES];
    int32_t inl_func[MAX_SITES]; /* a function inlined at this site, or -1 */
    int32_t inl_line[MAX_SITES];
    uint32_t callees[MAX_CALLEES];
    uint64_t addr;
};

struct tg_stack {
    uint32_t depth;
    uint32_t proc;
    double weight;
    uint32_t *frames; /* root first; frame = function * MAX_SITES... see frame_of() */
};

/* The generator's names and files, packed in blocks: every profile interns hundreds of them, and
 * packed they share cache lines (one allocation each spread them over the heap, with the
 * sanitizers' red zones between: their reads were a fifth of the profile's build). */
#define TG_TEXT_BLOCK 65536
struct tg_text {
    struct tg_text *next;
    size_t used, cap;
    char data[];
};

struct pfr_testgen {
    struct tg_text *text;
    uint64_t rng;
    pfr_testgen_opts o;
    char service[32];
    unsigned nuser; /* user functions [0, nuser), kernel functions [nuser, nuser + NKERNEL) */
    struct tg_func *funcs;
    char **files;
    size_t nfiles;
    struct tg_stack *stacks;
    uint32_t *frame_pool;
    uint32_t max_frames;
    int64_t pids[64];
    char comms[64][16];
    uint64_t intervals;
    /* per-profile caches: profile index of a function / location, valid when stamp matches */
    uint32_t stamp;
    uint32_t *func_stamp, *loc_stamp;
    uint32_t *func_idx, *loc_idx;
};

/* ---- randomness ---- */

static uint64_t rnd(pfr_testgen *g)
{
    uint64_t z = (g->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t rnd_below(pfr_testgen *g, uint32_t n)
{
    return (uint32_t)(rnd(g) % n);
}

static double rnd_unit(pfr_testgen *g)
{
    return (double)(rnd(g) >> 11) / (double)(1ull << 53);
}

/* ---- names ---- */

static const char *const words[] = {
    "alloc",   "buffer", "cache", "client", "codec", "conn", "config", "cursor", "decode", "dial",
    "encode",  "event",  "fetch", "flush",  "frame", "gc",   "handle", "hash",   "index",  "init",
    "journal", "key",    "lease", "load",   "lock",  "log",  "map",    "merge",  "metric", "node",
    "parse",   "peer",   "pool",  "queue",  "range", "read", "record", "reply",  "route",  "scan",
    "schema",  "send",   "serve", "shard",  "sort",  "span", "state",  "store",  "stream", "sync",
    "table",   "task",   "timer", "token",  "trace", "tree", "update", "value",  "view",   "wait",
    "walk",    "worker", "write", "zone"};
#define NWORDS (sizeof(words) / sizeof(words[0]))

static const char *const kernel_words[] = {
    "sys",   "read",    "write", "poll",  "epoll",  "futex",  "sched", "page",  "fault",
    "tcp",   "sendmsg", "recv",  "skb",   "copy",   "user",   "irq",   "timer", "vfs",
    "ext4",  "block",   "mq",    "queue", "wake",   "up",     "lock",  "rcu",   "softirq",
    "inode", "dentry",  "mmap",  "clone", "signal", "hrtimer"};
#define NKWORDS (sizeof(kernel_words) / sizeof(kernel_words[0]))

static const char *word(pfr_testgen *g)
{
    return words[rnd_below(g, NWORDS)];
}

static char *text_dup(pfr_testgen *g, const char *s)
{
    size_t n = strlen(s) + 1;
    struct tg_text *t = g->text;
    if (!t || t->cap - t->used < n) {
        size_t cap = n > TG_TEXT_BLOCK ? n : TG_TEXT_BLOCK;
        if (!(t = malloc(sizeof(*t) + cap)))
            return NULL;
        *t = (struct tg_text){.next = g->text, .cap = cap};
        g->text = t;
    }
    char *d = t->data + t->used;
    memcpy(d, s, n);
    t->used += n;
    return d;
}

static void capitalize(char *dst, size_t len, const char *w)
{
    snprintf(dst, len, "%s", w);
    if (dst[0] >= 'a' && dst[0] <= 'z')
        dst[0] = (char)(dst[0] - 'a' + 'A');
}

/* A package (Go), a directory (C) or a namespace (C++) per group of files. */
static int make_files(pfr_testgen *g, unsigned lang, size_t nfiles)
{
    g->files = calloc(nfiles + 2, sizeof(*g->files));
    if (!g->files)
        return -ENOMEM;
    char buf[256];
    for (size_t i = 0; i < nfiles; i++) {
        const char *a = word(g), *b = word(g), *c = word(g);
        if (lang == 0)
            snprintf(buf, sizeof(buf), "/go/src/github.com/%s%u/%s/%s/%s_%zu.go", a,
                     (unsigned)(i / 40), b, c, word(g), i);
        else if (lang == 1)
            snprintf(buf, sizeof(buf), "/build/%s-%u/src/%s/%s_%zu.c", a, (unsigned)(i / 40), b, c,
                     i);
        else
            snprintf(buf, sizeof(buf), "/build/%s/src/%s/%s_%zu.cpp", a, b, c, i);
        if (!(g->files[i] = text_dup(g, buf)))
            return -ENOMEM;
    }
    if (!(g->files[nfiles] = text_dup(g, "/usr/src/glibc/sysdeps/unix/sysv/linux/syscall.c")) ||
        !(g->files[nfiles + 1] = text_dup(g, "")))
        return -ENOMEM;
    g->nfiles = nfiles + 2;
    return 0;
}

static void user_name(pfr_testgen *g, unsigned lang, size_t i, const char *file, char *buf,
                      size_t len)
{
    /* Draw every random part in order first: argument evaluation order is unspecified, and the
     * output must not depend on the compiler. */
    char T[32], M[32];
    capitalize(T, sizeof(T), word(g));
    capitalize(M, sizeof(M), word(g));
    const char *w1 = word(g), *w2 = word(g), *w3 = word(g);
    unsigned form = rnd_below(g, 4), k = 1 + rnd_below(g, 3);
    if (lang == 0) {
        /* package path = the file's directory under /go/src/ */
        const char *pkg = file + strlen("/go/src/");
        const char *slash = strrchr(pkg, '/');
        int plen = (int)(slash - pkg);
        switch (form) {
        case 0:
            snprintf(buf, len, "%.*s.(*%s).%s%zu", plen, pkg, T, M, i);
            break;
        case 1:
            snprintf(buf, len, "%.*s.%s.%s%zu", plen, pkg, T, M, i);
            break;
        case 2:
            snprintf(buf, len, "%.*s.%s%s%zu.func%u", plen, pkg, w1, M, i, k);
            break;
        default:
            snprintf(buf, len, "%.*s.%s%zu", plen, pkg, w1, i);
        }
    } else if (lang == 1) {
        snprintf(buf, len, "%s_%s_%s%zu", w1, w2, w3, i);
    } else {
        snprintf(buf, len, "%s::%s%s::%s_%zu", w1, T, M, w2, i);
    }
}

static int make_functions(pfr_testgen *g)
{
    unsigned lang = (unsigned)(rnd(g) % 3); /* the service's main language */
    size_t nfiles = g->nuser / 5 + 1;
    if (make_files(g, lang, nfiles))
        return -ENOMEM;
    size_t total = (size_t)g->nuser + NKERNEL;
    g->funcs = calloc(total, sizeof(*g->funcs));
    if (!g->funcs)
        return -ENOMEM;
    static const char *const roots[][NROOTS] = {
        {"runtime.goexit", "runtime.main", "main.main", "net/http.(*conn).serve",
         "runtime.gcBgMarkWorker", "runtime.mcall", "runtime.bgsweep", "runtime.mstart"},
        {"_start", "__libc_start_main", "main", "start_thread", "worker_main", "event_loop",
         "clone3", "thread_entry"},
        {"_start", "__libc_start_main", "main", "start_thread", "std::thread::_State_impl::_M_run",
         "boost::asio::detail::scheduler::run", "folly::EventBase::loop", "clone3"}};
    char buf[512];
    for (size_t i = 0; i < total; i++) {
        struct tg_func *f = &g->funcs[i];
        bool kernel = i >= g->nuser;
        if (kernel) {
            size_t k = i - g->nuser;
            if (k == 0)
                snprintf(buf, sizeof(buf), "entry_SYSCALL_64_after_hwframe");
            else if (k == 1)
                snprintf(buf, sizeof(buf), "do_syscall_64");
            else {
                const char *k1 = kernel_words[rnd_below(g, NKWORDS)];
                const char *k2 = kernel_words[rnd_below(g, NKWORDS)];
                snprintf(buf, sizeof(buf), "%s_%s_%s", k1, k2, kernel_words[k % NKWORDS]);
            }
            f->file = g->files[g->nfiles - 1];
            f->mapping = MAP_KERNEL;
        } else {
            bool libc = i >= NROOTS && rnd_below(g, 100) < 4;
            f->file = libc ? g->files[g->nfiles - 2] : g->files[rnd_below(g, (uint32_t)nfiles)];
            if (i < NROOTS)
                snprintf(buf, sizeof(buf), "%s", roots[lang][i]);
            else if (libc) {
                const char *w1 = word(g), *w2 = word(g);
                snprintf(buf, sizeof(buf), "__%s_%s%zu", w1, w2, i);
            } else
                user_name(g, lang, i, f->file, buf, sizeof(buf));
            f->mapping = libc ? MAP_LIBC : MAP_MAIN;
        }
        if (!(f->name = text_dup(g, buf)))
            return -ENOMEM;
        f->start_line = kernel ? 0 : (int32_t)(10 + rnd_below(g, 2000));
        f->addr = (kernel ? 0xffffffff81000000ull : 0x400000ull) + (uint64_t)i * 0x400;
        f->nsites = (uint8_t)(1 + rnd_below(g, MAX_SITES));
        for (int s = 0; s < f->nsites; s++) {
            f->site_line[s] = kernel ? 0 : f->start_line + 1 + (int32_t)rnd_below(g, 80);
            f->inl_func[s] = -1;
            /* some call sites of compiled-language code have a callee inlined */
            if (!kernel && i >= NROOTS && rnd_below(g, 100) < 12) {
                f->inl_func[s] = (int32_t)(NROOTS + rnd_below(g, g->nuser - NROOTS));
                f->inl_line[s] = 5 + (int32_t)rnd_below(g, 400);
            }
        }
        /* Callees lie ahead in index order (modulo the universe), so walks go deep without
         * short cycles; the fan-out makes stacks share prefixes. */
        f->ncallees = (uint8_t)(2 + rnd_below(g, MAX_CALLEES - 1));
        for (int c = 0; c < f->ncallees; c++) {
            if (kernel) {
                f->callees[c] = g->nuser + 2 + rnd_below(g, NKERNEL - 2);
            } else {
                uint32_t span = g->nuser - NROOTS;
                uint32_t base = i < NROOTS ? 0 : (uint32_t)(i - NROOTS);
                f->callees[c] = NROOTS + (base + 1 + rnd_below(g, 120)) % span;
            }
        }
    }
    return 0;
}

/* ---- stacks ---- */

static uint32_t frame_of(uint32_t func, uint32_t site)
{
    return func * MAX_SITES + site;
}

static void make_stack(pfr_testgen *g, struct tg_stack *s)
{
    uint32_t span = g->o.max_depth - g->o.min_depth + 1;
    uint32_t depth = g->o.min_depth + rnd_below(g, span);
    uint32_t n = 0;
    uint32_t f = rnd_below(g, NROOTS);
    /* about a third of the stacks end in the kernel (syscalls, page faults) */
    uint32_t kdepth = rnd_below(g, 3) == 0 ? 2 + rnd_below(g, MAX_KERNEL_DEPTH - 1) : 0;
    if (kdepth + 1 >= depth)
        kdepth = 0;
    uint32_t udepth = depth - kdepth;
    while (n < udepth) {
        const struct tg_func *fn = &g->funcs[f];
        s->frames[n++] = frame_of(f, rnd_below(g, fn->nsites));
        f = fn->callees[rnd_below(g, fn->ncallees)];
    }
    f = g->nuser;
    while (n < depth) {
        const struct tg_func *fn = &g->funcs[f];
        s->frames[n++] = frame_of(f, 0);
        f = n - udepth == 1 ? g->nuser + 1 : fn->callees[rnd_below(g, fn->ncallees)];
    }
    s->depth = depth;
    s->proc = rnd_below(g, g->o.nprocs);
    /* heavy-tailed weights: a few hot stacks, many cold ones */
    double u = rnd_unit(g);
    s->weight = 0.25 + 6.0 * u * u * u * u;
}

pfr_testgen *pfr_testgen_new(uint64_t seed, unsigned service_index, const pfr_testgen_opts *opts)
{
    pfr_testgen *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    if (opts)
        g->o = *opts;
    if (!g->o.nstacks)
        g->o.nstacks = 400;
    if (!g->o.type)
        g->o.type = "ebpf:cpu:nanoseconds";
    if (!g->o.min_depth)
        g->o.min_depth = 10;
    if (!g->o.max_depth)
        g->o.max_depth = 60;
    if (g->o.max_depth < g->o.min_depth)
        g->o.max_depth = g->o.min_depth;
    if (g->o.min_depth < 2)
        g->o.min_depth = 2;
    if (g->o.max_depth < 2)
        g->o.max_depth = 2;
    if (g->o.max_depth > 256)
        g->o.max_depth = 256;
    if (g->o.min_depth > g->o.max_depth)
        g->o.min_depth = g->o.max_depth;
    if (!g->o.nfunctions)
        g->o.nfunctions = 2500;
    if (g->o.nfunctions < NROOTS + 16)
        g->o.nfunctions = NROOTS + 16;
    if (!g->o.nprocs)
        g->o.nprocs = 3;
    if (g->o.nprocs > 64)
        g->o.nprocs = 64;
    if (!g->o.drift_permille)
        g->o.drift_permille = 30;
    if (!g->o.mean_count)
        g->o.mean_count = 4;
    g->rng = seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)service_index << 32 | 0x5eedull);
    snprintf(g->service, sizeof(g->service), "svc-%u", service_index);
    g->nuser = g->o.nfunctions;
    if (make_functions(g))
        goto fail;
    for (unsigned i = 0; i < g->o.nprocs; i++) {
        g->pids[i] = 1000 + (int64_t)rnd_below(g, 4000000);
        snprintf(g->comms[i], sizeof(g->comms[i]), "%.8s-%u", g->service, i);
    }
    g->max_frames = g->o.max_depth;
    g->stacks = calloc(g->o.nstacks, sizeof(*g->stacks));
    g->frame_pool = calloc((size_t)g->o.nstacks * g->max_frames, sizeof(uint32_t));
    size_t nf = (size_t)g->nuser + NKERNEL;
    g->func_stamp = calloc(nf, sizeof(uint32_t));
    g->func_idx = calloc(nf, sizeof(uint32_t));
    g->loc_stamp = calloc(nf * MAX_SITES, sizeof(uint32_t));
    g->loc_idx = calloc(nf * MAX_SITES, sizeof(uint32_t));
    if (!g->stacks || !g->frame_pool || !g->func_stamp || !g->func_idx || !g->loc_stamp ||
        !g->loc_idx)
        goto fail;
    for (unsigned i = 0; i < g->o.nstacks; i++) {
        g->stacks[i].frames = g->frame_pool + (size_t)i * g->max_frames;
        make_stack(g, &g->stacks[i]);
    }
    return g;
fail:
    pfr_testgen_free(g);
    return NULL;
}

void pfr_testgen_free(pfr_testgen *g)
{
    if (!g)
        return;
    free(g->funcs);
    free(g->files);
    while (g->text) {
        struct tg_text *next = g->text->next;
        free(g->text);
        g->text = next;
    }
    free(g->stacks);
    free(g->frame_pool);
    free(g->func_stamp);
    free(g->func_idx);
    free(g->loc_stamp);
    free(g->loc_idx);
    free(g);
}

const char *pfr_testgen_service(const pfr_testgen *g)
{
    return g->service;
}

/* ---- building a profile ---- */

static int64_t func_index(pfr_testgen *g, pfr_profile *p, uint32_t f)
{
    if (g->func_stamp[f] == g->stamp)
        return g->func_idx[f];
    const struct tg_func *fn = &g->funcs[f];
    int64_t r = pfr_profile_add_function(p, fn->name, fn->name, fn->file, fn->start_line);
    if (r >= 0) {
        g->func_stamp[f] = g->stamp;
        g->func_idx[f] = (uint32_t)r;
    }
    return r;
}

static int64_t loc_index(pfr_testgen *g, pfr_profile *p, uint32_t frame, const int64_t *maps)
{
    if (g->loc_stamp[frame] == g->stamp)
        return g->loc_idx[frame];
    uint32_t f = frame / MAX_SITES, site = frame % MAX_SITES;
    const struct tg_func *fn = &g->funcs[f];
    pfr_line lines[2];
    size_t n = 0;
    if (fn->inl_func[site] >= 0) {
        int64_t inl = func_index(g, p, (uint32_t)fn->inl_func[site]);
        if (inl < 0)
            return inl;
        lines[n++] = (pfr_line){(uint32_t)inl, fn->inl_line[site]};
    }
    int64_t fi = func_index(g, p, f);
    if (fi < 0)
        return fi;
    lines[n++] = (pfr_line){(uint32_t)fi, fn->site_line[site]};
    int64_t r =
        pfr_profile_add_location(p, maps[fn->mapping], fn->addr + 0x10 + site * 0x40, lines, n);
    if (r >= 0) {
        g->loc_stamp[frame] = g->stamp;
        g->loc_idx[frame] = (uint32_t)r;
    }
    return r;
}

static void drift(pfr_testgen *g)
{
    if (g->o.no_drift)
        return;
    unsigned n = (g->o.nstacks * g->o.drift_permille + 999) / 1000;
    for (unsigned i = 0; i < n; i++)
        make_stack(g, &g->stacks[rnd_below(g, g->o.nstacks)]);
}

pfr_profile *pfr_testgen_next(pfr_testgen *g, int64_t interval_start_ns, int64_t interval_ns)
{
    if (g->intervals++ > 0)
        drift(g);
    if (++g->stamp == 0) { /* stamps wrapped: forget every cached index */
        size_t nf = (size_t)g->nuser + NKERNEL;
        memset(g->func_stamp, 0, nf * sizeof(uint32_t));
        memset(g->loc_stamp, 0, nf * MAX_SITES * sizeof(uint32_t));
        g->stamp = 1;
    }
    pfr_profile *p = pfr_profile_new();
    if (!p)
        return NULL;
    /* the unit: the type name's last part ("...:bytes") */
    const char *unit = strrchr(g->o.type, ':');
    pfr_profile_add_sample_type(p, g->o.type, unit ? unit + 1 : "nanoseconds");
    pfr_profile_set_period(p, "cpu", "nanoseconds", PERIOD_NS);
    pfr_profile_set_time(p, interval_start_ns, interval_ns);
    char bin[64];
    snprintf(bin, sizeof(bin), "/usr/bin/%s", g->service);
    int64_t maps[NMAPS];
    maps[MAP_MAIN] =
        pfr_profile_add_mapping(p, 0x400000, 0x400000 + (uint64_t)g->nuser * 0x400, 0, bin, "");
    maps[MAP_LIBC] =
        pfr_profile_add_mapping(p, 0x7f0000000000ull, 0x7f0000200000ull, 0,
                                "/usr/lib/x86_64-linux-gnu/libc.so.6", "c5b1d6d0e8b7f2a1");
    maps[MAP_KERNEL] = pfr_profile_add_mapping(p, 0xffffffff81000000ull, 0xffffffff83000000ull, 0,
                                               "[kernel.kallsyms]", "");
    double scale = (double)interval_ns / 10e9 * g->o.mean_count;
    uint32_t locs[256];
    for (unsigned i = 0; i < g->o.nstacks && !pfr_profile_error(p); i++) {
        const struct tg_stack *s = &g->stacks[i];
        /* leaf first */
        for (uint32_t j = 0; j < s->depth; j++) {
            int64_t l = loc_index(g, p, s->frames[s->depth - 1 - j], maps);
            if (l < 0)
                break;
            locs[j] = (uint32_t)l;
        }
        double c = s->weight * scale * (0.5 + rnd_unit(g));
        int64_t count = (int64_t)(c + 0.5);
        if (count < 1)
            count = 1;
        int64_t value = count * PERIOD_NS;
        pfr_label labels[2] = {{"pid", NULL, g->pids[s->proc], NULL},
                               {"comm", g->comms[s->proc], 0, NULL}};
        pfr_profile_add_sample(p, locs, s->depth, &value, labels, 2);
    }
    if (pfr_profile_error(p)) {
        pfr_profile_free(p);
        return NULL;
    }
    return p;
}

int pfr_testgen_write_pprof(const pfr_profile *p, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rc = pfr_profile_encode(p, true, &buf, &len);
    if (rc)
        return rc;
    FILE *f = fopen(path, "wb");
    if (!f) {
        rc = -errno;
        free(buf);
        return rc;
    }
    if (fwrite(buf, 1, len, f) != len)
        rc = -EIO;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    free(buf);
    return rc;
}

int64_t pfr_testgen_total(const pfr_profile *p)
{
    int64_t t = 0;
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        const int64_t *v = pfr_profile_sample_values(p, i);
        if (v)
            t += v[0];
    }
    return t;
}
