/*
 * ringtool: test helper for the shipper's integration tests.
 *   make    --store P --services N --intervals M [--interval-s S] [--end-ago-s A] [--seed X]
 *           [--max-bytes B] [--stacks K] [--first-service I] [--cids ID,ID,...]
 *           [--type T] [--service NAME] [--stop-file F] [--pace-ms MS]
 *           appends M intervals of N services (interleaved, oldest first) made by pfr_testgen;
 *           service i's container.id is /k8s/default/pod-<i>/app, or the i-th of --cids
 *           ("-": no container.id label, as the recorder writes a process without a Coroot id);
 *           --type: the sample type (default ebpf:cpu:nanoseconds); --service: one service
 *           name for all of them (instances of one service); --stop-file: stops early,
 *           between two intervals, once F exists (a test done with a writer that appends);
 *           --pace-ms: waits MS between two transactions (a writer beside a test, as the
 *           recorder appends: one that appends flat out takes a core from what it tests)
 *   totals  --store P [--from NS --to NS] [--service S]
 *           per (service, type, stack): the sum of the values of the chunks overlapping
 *           [from, to), the stack as Coroot writes it ("<function> <file>:<line>" leaf first,
 *           joined by " | "); sorted lines "service\ttype\tstack\tvalue"
 *   folded  --store P [--from NS --to NS] --service S
 *           the same totals as folded stacks (function names, root first, ';'), summed
 *   chunks  --store P   one line per chunk: "id\tservice\tstart_ns\tend_ns\ttotal"
 *   stats   --store P   the ring's counters (chunks, evicted, lost_unshipped, min_id, max_id)
 *   fnv     reads "hash\thex-of-concatenated-stack" lines, checks hash = FNV-1a 64 of the bytes
 * The formatting here is written apart from the shipper's on purpose: the tests compare the two.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pfr_store.h"
#include "pfr_testgen.h"

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

static long long optll(int argc, char **argv, const char *name, long long def)
{
    const char *v = opt(argc, argv, name, NULL);
    return v ? strtoll(v, NULL, 10) : def;
}

static pfr_store *open_store(const char *path, bool ro, uint64_t max_bytes)
{
    pfr_store_opts o = {.read_only = ro, .max_bytes = max_bytes};
    pfr_store *s;
    char err[256];
    int rc = pfr_store_open(path, &o, &s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "ringtool: %s: %s\n", path, err);
        exit(1);
    }
    return s;
}

/* The i-th comma-separated piece of list into out (cap bytes); false past the last. */
static bool list_item(const char *list, long long i, char *out, size_t cap)
{
    for (; list && i > 0; i--)
        if ((list = strchr(list, ',')))
            list++;
    if (!list)
        return false;
    snprintf(out, cap, "%.*s", (int)strcspn(list, ","), list);
    return true;
}

static int cmd_make(int argc, char **argv)
{
    const char *path = opt(argc, argv, "--store", NULL);
    long long nsvc = optll(argc, argv, "--services", 3), nint = optll(argc, argv, "--intervals", 6);
    long long ivs = optll(argc, argv, "--interval-s", 10),
              ago = optll(argc, argv, "--end-ago-s", 0);
    long long seed = optll(argc, argv, "--seed", 1),
              first = optll(argc, argv, "--first-service", 0);
    long long stacks = optll(argc, argv, "--stacks", 0);
    uint64_t maxb = (uint64_t)optll(argc, argv, "--max-bytes", 0);
    const char *cids = opt(argc, argv, "--cids", NULL);
    const char *stop = opt(argc, argv, "--stop-file", NULL);
    long long pace_ms = optll(argc, argv, "--pace-ms", 0);
    if (!path)
        return 2;
    pfr_store *s = open_store(path, false, maxb);
    int64_t iv = ivs * 1000000000ll;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (getenv("RINGTOOL_NOW_S")) /* a fixed clock: where the data falls in the hour */
        now.tv_sec = atoll(getenv("RINGTOOL_NOW_S"));
    int64_t end = ((int64_t)now.tv_sec - ago) * 1000000000ll;
    end -= end % iv;
    int64_t start = end - nint * iv;
    const char *type = opt(argc, argv, "--type", NULL), *svc = opt(argc, argv, "--service", NULL);
    pfr_testgen_opts go = {.nstacks = (unsigned)stacks, .type = type};
    pfr_testgen **g = calloc((size_t)nsvc, sizeof(*g));
    for (long long i = 0; i < nsvc; i++)
        g[i] = pfr_testgen_new((uint64_t)seed, (unsigned)(first + i), stacks || type ? &go : NULL);
    long long n = 0;
    pfr_chunk_in *in = calloc((size_t)nsvc, sizeof(*in));
    pfr_profile **ps = calloc((size_t)nsvc, sizeof(*ps));
    char(*pod)[64] = calloc((size_t)nsvc, 64), (*cid)[96] = calloc((size_t)nsvc, 96);
    pfr_kv(*labels)[3] = calloc((size_t)nsvc, sizeof(*labels));
    for (long long t = 0; t < nint && !(stop && access(stop, F_OK) == 0); t++) {
        /* One interval of every service in one transaction, as the recorder writes them. */
        for (long long i = 0; i < nsvc; i++) {
            int64_t st = start + t * iv;
            ps[i] = pfr_testgen_next(g[i], st, iv);
            snprintf(pod[i], 64, "pod-%lld", first + i);
            snprintf(cid[i], 96, "/k8s/default/pod-%lld/app", first + i);
            list_item(cids, i, cid[i], 96);
            size_t nl = 0;
            labels[i][nl++] = (pfr_kv){"host.name", "host-a"};
            if (strcmp(cid[i], "-"))
                labels[i][nl++] = (pfr_kv){"container.id", cid[i]};
            labels[i][nl++] = (pfr_kv){"pod", pod[i]};
            in[i] = (pfr_chunk_in){.service = svc ? svc : pfr_testgen_service(g[i]),
                                   .labels = labels[i],
                                   .nlabels = nl,
                                   .start_ns = st,
                                   .end_ns = st + iv,
                                   .profile = ps[i]};
        }
        int rc = pfr_store_append_batch(s, in, (size_t)nsvc, NULL);
        for (long long i = 0; i < nsvc; i++)
            pfr_profile_free(ps[i]);
        if (rc) {
            fprintf(stderr, "ringtool: append: %s\n", strerror(-rc));
            return 1;
        }
        n += nsvc;
        if (pace_ms > 0)
            nanosleep(&(struct timespec){pace_ms / 1000, pace_ms % 1000 * 1000000}, NULL);
    }
    free(in);
    free(ps);
    free(pod);
    free(cid);
    free(labels);
    for (long long i = 0; i < nsvc; i++)
        pfr_testgen_free(g[i]);
    free(g);
    pfr_store_close(s);
    printf("%lld\n", n);
    return 0;
}

/* ---- totals ---- */

struct ent {
    char *key; /* service \t type \t stack */
    int64_t value;
};

struct tab {
    struct ent *v;
    size_t n, cap;
    bool folded;
};

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const struct ent *)a)->key, ((const struct ent *)b)->key);
}

static void add(struct tab *t, char *key, int64_t v)
{
    /* linear probing would be faster; test rings are small, and sorting merges duplicates */
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 4096;
        t->v = realloc(t->v, t->cap * sizeof(*t->v));
        if (!t->v)
            exit(1);
    }
    t->v[t->n++] = (struct ent){key, v};
}

static int totals_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    struct tab *t = ctx;
    size_t ntypes = pfr_profile_num_sample_types(p);
    pfr_frame fr[512];
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        size_t nf = pfr_profile_sample_frames(p, i, fr, 512);
        if (nf > 512)
            nf = 512;
        size_t cap = 256;
        for (size_t f = 0; f < nf; f++)
            cap += strlen(fr[f].function) + strlen(fr[f].file) + 32;
        char *stack = malloc(cap);
        size_t o = 0;
        stack[0] = 0;
        if (t->folded) {
            /* root first, function names */
            for (size_t f = nf; f-- > 0;) {
                if (!fr[f].function[0] && !fr[f].file[0])
                    continue;
                o += (size_t)snprintf(stack + o, cap - o, "%s%s", o ? ";" : "", fr[f].function);
            }
        } else {
            for (size_t f = 0; f < nf; f++) {
                if (!fr[f].function[0] && !fr[f].file[0])
                    continue;
                o += (size_t)snprintf(stack + o, cap - o, "%s%s %s:%lld", o ? " | " : "",
                                      fr[f].function, fr[f].file, (long long)fr[f].line);
            }
        }
        const int64_t *v = pfr_profile_sample_values(p, i);
        for (size_t ty = 0; ty < ntypes; ty++) {
            const char *type = pfr_profile_sample_type(p, ty, NULL);
            if (!type || !type[0])
                continue;
            char *key;
            if (t->folded) {
                if (asprintf(&key, "%s", stack) < 0)
                    exit(1);
            } else if (asprintf(&key, "%s\t%s\t%s", m->service, type, stack) < 0) {
                exit(1);
            }
            add(t, key, v[ty]);
        }
        free(stack);
    }
    return 0;
}

static int cmd_totals(int argc, char **argv, bool folded)
{
    const char *path = opt(argc, argv, "--store", NULL);
    if (!path)
        return 2;
    pfr_store *s = open_store(path, true, 0);
    pfr_store_filter f = {.from_ns = optll(argc, argv, "--from", 0),
                          .to_ns = optll(argc, argv, "--to", 0),
                          .service = opt(argc, argv, "--service", NULL)};
    struct tab t = {.folded = folded};
    int rc = pfr_store_scan(s, &f, 0, totals_cb, &t, NULL);
    if (rc < 0) {
        fprintf(stderr, "ringtool: scan: %s\n", strerror(-rc));
        return 1;
    }
    qsort(t.v, t.n, sizeof(*t.v), cmp_ent);
    for (size_t i = 0; i < t.n;) {
        int64_t sum = 0;
        size_t j = i;
        while (j < t.n && !strcmp(t.v[j].key, t.v[i].key))
            sum += t.v[j++].value;
        if (folded)
            printf("%s %lld\n", t.v[i].key, (long long)sum);
        else
            printf("%s\t%lld\n", t.v[i].key, (long long)sum);
        for (size_t k = i; k < j; k++)
            free(t.v[k].key);
        i = j;
    }
    free(t.v);
    pfr_store_close(s);
    return 0;
}

static int chunks_cb(const pfr_chunk_meta *m, const pfr_profile *p, void *ctx)
{
    (void)p, (void)ctx;
    printf("%lld\t%s\t%lld\t%lld\t%lld\n", (long long)m->id, m->service, (long long)m->start_ns,
           (long long)m->end_ns, (long long)(m->ntypes ? m->totals[0] : 0));
    return 0;
}

static int cmd_chunks(int argc, char **argv)
{
    const char *path = opt(argc, argv, "--store", NULL);
    if (!path)
        return 2;
    pfr_store *s = open_store(path, true, 0);
    pfr_store_filter f = {0};
    int rc = pfr_store_scan(s, &f, PFR_SCAN_META_ONLY, chunks_cb, NULL, NULL);
    pfr_store_close(s);
    return rc < 0 ? 1 : 0;
}

static int cmd_stats(int argc, char **argv)
{
    const char *path = opt(argc, argv, "--store", NULL);
    if (!path)
        return 2;
    pfr_store *s = open_store(path, true, 0);
    pfr_store_stats st;
    int rc = pfr_store_stats_get(s, &st);
    pfr_store_close(s);
    if (rc)
        return 1;
    printf("chunks %" PRIu64 "\nevicted %" PRIu64 "\nlost_unshipped %" PRIu64
           "\nmin_id %lld\nmax_id %lld\nappended %" PRIu64 "\n",
           st.chunks, st.evicted, st.lost_unshipped, (long long)st.min_id, (long long)st.max_id,
           st.appended);
    return 0;
}

static int cmd_fnv(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long ok = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab = 0;
        unsigned long long want = strtoull(line, NULL, 10);
        uint64_t h = 0xcbf29ce484222325ull;
        for (char *p = tab + 1; p[0] && p[1] && p[0] != '\n'; p += 2) {
            unsigned b;
            if (sscanf(p, "%2x", &b) != 1)
                break;
            h ^= b;
            h *= 0x100000001b3ull;
        }
        if (h != want) {
            fprintf(stderr, "fnv mismatch: stored %llu, computed %llu\n", want,
                    (unsigned long long)h);
            return 1;
        }
        ok++;
    }
    free(line);
    printf("%ld\n", ok);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ringtool make|totals|folded|chunks|stats|fnv ...\n");
        return 2;
    }
    if (!strcmp(argv[1], "make"))
        return cmd_make(argc, argv);
    if (!strcmp(argv[1], "totals"))
        return cmd_totals(argc, argv, false);
    if (!strcmp(argv[1], "folded"))
        return cmd_totals(argc, argv, true);
    if (!strcmp(argv[1], "chunks"))
        return cmd_chunks(argc, argv);
    if (!strcmp(argv[1], "stats"))
        return cmd_stats(argc, argv);
    if (!strcmp(argv[1], "fnv"))
        return cmd_fnv();
    fprintf(stderr, "ringtool: unknown command %s\n", argv[1]);
    return 2;
}
