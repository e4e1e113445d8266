/*
 * jfr_dump: prints what pfr reads from a JFR recording, for the oracle test (jfr_oracle.py)
 * and by hand.
 *
 *   jfr_dump counts FILE         records per type, as `jfr summary` counts them
 *   jfr_dump samples FILE [alone] the converted samples: profile, values, frames leaf first
 *                                ("function:line" joined by ';'), then the counts; "alone":
 *                                each chunk read alone (pfr_jfr_opts.chunks_alone), as the
 *                                JDK's reader reads it: no stack from the chunk before
 *   jfr_dump events FILE         every event of the five converted types as the parser reads
 *                                it, in file order: chunk, type, start (unix ns), duration
 *                                (ns), value field (weight, size; 0: none), stack key, its
 *                                frames (class.method:line, "?" for a missing method; after
 *                                "<N chunks back>" when an earlier chunk's pools held them) or
 *                                "<no stack>"; for a diff against `jfr print --json` when the
 *                                oracle fails
 *   jfr_dump pprof FILE DIR      DIR/{cpu,alloc,lock}.pb.gz (what `go tool pprof` reads)
 *   jfr_dump bench FILE SECONDS  converts it again and again; prints MB/s
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jfr_parse.h"
#include "pfr_jfr.h"
#include "pfr_vec.h"

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0, r;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 20;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *len = n;
    return buf;
}

typedef struct type_count {
    char *name;
    unsigned long long n;
} type_count;

typedef struct counter {
    type_count *t;
    size_t n, cap;
} counter;

static int count_record(void *ctx, const jfr_chunk *c, const jfr_record *rec)
{
    counter *k = ctx;
    char other[64];
    const char *name = other;
    if (rec->kind == JFR_REC_METADATA)
        name = "jdk.Metadata";
    else if (rec->kind == JFR_REC_CHECKPOINT)
        name = "jdk.CheckPoint";
    else if (rec->kind == JFR_REC_EVENT)
        name = pfr_jfr_class_name(c, rec->cls);
    else
        snprintf(other, sizeof(other), "type:%llu", (unsigned long long)rec->type_id);
    for (size_t i = 0; i < k->n; i++) {
        if (strcmp(k->t[i].name, name) == 0) {
            k->t[i].n++;
            return 0;
        }
    }
    if (PFR_VEC_RESERVE(k->t, k->cap, k->n + 1) < 0)
        return -ENOMEM;
    k->t[k->n].name = strdup(name);
    if (!k->t[k->n].name)
        return -ENOMEM;
    k->t[k->n++].n = 1;
    return 0;
}

static int cmd_counts(const uint8_t *buf, size_t len)
{
    counter k = {0};
    jfr_limits lim = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, 0};
    jfr_visitor v = {.ctx = &k, .record = count_record};
    jfr_parse_stats st;
    char err[256];
    int rc = pfr_jfr_parse(buf, len, &lim, &v, &st, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "jfr_dump: %s\n", err);
    for (size_t i = 0; i < k.n; i++) {
        if (rc == 0)
            printf("%s %llu\n", k.t[i].name, k.t[i].n);
        free(k.t[i].name);
    }
    free(k.t);
    if (rc == 0)
        printf("# chunks %llu truncated %d\n", (unsigned long long)st.chunks, st.truncated);
    return rc < 0;
}

static void print_profile(const char *name, const pfr_profile *p)
{
    if (!p)
        return;
    size_t ntypes = pfr_profile_num_sample_types(p);
    pfr_frame fr[4096];
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        const int64_t *v = pfr_profile_sample_values(p, i);
        printf("%s\t", name);
        for (size_t t = 0; t < ntypes; t++)
            printf("%s%lld", t ? "," : "", (long long)v[t]);
        putchar('\t');
        size_t n = pfr_profile_sample_frames(p, i, fr, 4096);
        for (size_t f = 0; f < n && f < 4096; f++)
            printf("%s%s:%lld", f ? ";" : "", fr[f].function, (long long)fr[f].line);
        putchar('\n');
    }
}

/* ---- events ---- */

static const char *const EVENT_TYPES[][2] = {
    {"jdk.ExecutionSample", NULL},
    {"jdk.ObjectAllocationSample", "weight"},
    {"jdk.ObjectAllocationInNewTLAB", "tlabSize"},
    {"jdk.ObjectAllocationOutsideTLAB", "allocationSize"},
    {"jdk.JavaMonitorEnter", NULL}, /* its value is its duration */
};
#define NEVENT_TYPES (sizeof(EVENT_TYPES) / sizeof(EVENT_TYPES[0]))

typedef struct lister {
    unsigned long long chunk;
    int64_t cls[NEVENT_TYPES];
    int pos[NEVENT_TYPES][4]; /* startTime, duration, stackTrace, the value field */
} lister;

static int list_chunk(void *ctx, const jfr_chunk *c)
{
    lister *l = ctx;
    static const char *const fields[3] = {"startTime", "duration", "stackTrace"};
    l->chunk++;
    for (size_t e = 0; e < NEVENT_TYPES; e++) {
        l->cls[e] = pfr_jfr_class_find(c, EVENT_TYPES[e][0]);
        for (int f = 0; f < 4; f++) {
            const char *name = f < 3 ? fields[f] : EVENT_TYPES[e][1];
            l->pos[e][f] =
                l->cls[e] >= 0 && name ? pfr_jfr_field_find(c, (uint32_t)l->cls[e], name) : -1;
        }
    }
    return 0;
}

static void print_frames(const jfr_chunk *c, uint64_t key)
{
    jfr_stack st;
    int back = 0;
    while (c && pfr_jfr_stack_get(c, key, &st) < 0) {
        c = pfr_jfr_chunk_prev(c);
        back++;
    }
    if (!c) {
        printf("<no stack>");
        return;
    }
    if (back)
        printf("<%d chunk%s back> ", back, back == 1 ? "" : "s");
    for (size_t i = 0; i < st.n; i++) {
        const char *cls, *meth;
        if (!st.frames[i].has_method || pfr_jfr_method_get(c, st.frames[i].method, &cls, &meth) < 0)
            printf("%s?", i ? ";" : "");
        else
            printf("%s%s.%s:%d", i ? ";" : "", cls, meth, (int)st.frames[i].line);
    }
}

static int list_record(void *ctx, const jfr_chunk *c, const jfr_record *rec)
{
    lister *l = ctx;
    size_t e = 0;
    while (rec->kind == JFR_REC_EVENT && e < NEVENT_TYPES && l->cls[e] != (int64_t)rec->cls)
        e++;
    if (rec->kind != JFR_REC_EVENT || e == NEVENT_TYPES)
        return 0;
    int64_t v[4] = {0};
    uint32_t found;
    if (pfr_jfr_event_read(c, rec, l->pos[e], 4, v, &found) < 0)
        return -EINVAL;
    printf("%llu\t%s\t%lld\t%lld\t%lld\t%llu\t", l->chunk, EVENT_TYPES[e][0],
           (long long)pfr_jfr_ticks_to_unix_ns(c, v[0]), (long long)pfr_jfr_ticks_to_ns(c, v[1]),
           (long long)v[3], (unsigned long long)v[2]);
    if (found & 4)
        print_frames(c, (uint64_t)v[2]);
    else
        printf("<no stack field>");
    putchar('\n');
    return 0;
}

static int cmd_events(const uint8_t *buf, size_t len)
{
    lister l = {0};
    jfr_limits lim = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
    jfr_visitor v = {.ctx = &l, .chunk_begin = list_chunk, .record = list_record};
    jfr_parse_stats st;
    char err[256];
    int rc = pfr_jfr_parse(buf, len, &lim, &v, &st, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "jfr_dump: %s\n", err);
    return rc < 0;
}

static int convert(const uint8_t *buf, size_t len, bool alone, pfr_jfr_profiles *out)
{
    char err[256];
    pfr_jfr_opts o = {.chunks_alone = alone};
    int rc = pfr_jfr_to_profiles(buf, len, &o, out, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "jfr_dump: %s (%s)\n", err, strerror(-rc));
    return rc;
}

static int cmd_samples(const uint8_t *buf, size_t len, bool alone)
{
    pfr_jfr_profiles out;
    if (convert(buf, len, alone, &out) < 0)
        return 1;
    print_profile("cpu", out.cpu);
    print_profile("alloc", out.alloc);
    print_profile("lock", out.lock);
    const pfr_jfr_counts *k = &out.counts;
    printf("# chunks %llu cut %llu events %llu cpu %llu alloc %llu lock %llu skipped %llu "
           "truncated %llu carried %llu uncarried %llu\n",
           (unsigned long long)k->chunks, (unsigned long long)k->cut_chunks,
           (unsigned long long)k->events, (unsigned long long)k->cpu_samples,
           (unsigned long long)k->alloc_samples, (unsigned long long)k->lock_samples,
           (unsigned long long)k->skipped_events, (unsigned long long)k->truncated_stacks,
           (unsigned long long)k->carried_stacks, (unsigned long long)k->uncarried_chunks);
    pfr_jfr_profiles_free(&out);
    return 0;
}

static int write_pprof(const char *dir, const char *name, const pfr_profile *p)
{
    if (!p)
        return 0;
    uint8_t *enc;
    size_t n;
    char path[4096];
    if (pfr_profile_encode(p, true, &enc, &n) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/%s.pb.gz", dir, name);
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(enc, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(enc);
    if (rc == 0)
        printf("%s\n", path);
    return rc;
}

static int cmd_pprof(const uint8_t *buf, size_t len, const char *dir)
{
    pfr_jfr_profiles out;
    if (convert(buf, len, false, &out) < 0)
        return 1;
    int rc = write_pprof(dir, "cpu", out.cpu) | write_pprof(dir, "alloc", out.alloc) |
             write_pprof(dir, "lock", out.lock);
    pfr_jfr_profiles_free(&out);
    return rc != 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wall time, and this process's CPU time: on a shared host the second is the figure. */
static int cmd_bench(const uint8_t *buf, size_t len, double seconds)
{
    clock_t c0 = clock();
    double t0 = now(), t;
    unsigned runs = 0;
    do {
        pfr_jfr_profiles out;
        if (convert(buf, len, false, &out) < 0)
            return 1;
        pfr_jfr_profiles_free(&out);
        runs++;
        t = now() - t0;
    } while (t < seconds);
    double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("%u conversions of %zu bytes in %.2f s (%.2f s of CPU): %.1f MB/s, %.1f MB per CPU "
           "second, %.2f ms of CPU each\n",
           runs, len, t, cpu, (double)len * runs / t / 1e6, (double)len * runs / cpu / 1e6,
           cpu / runs * 1e3);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: jfr_dump counts|samples [alone]|events|pprof DIR|bench SECONDS FILE\n");
        return 2;
    }
    size_t len = 0;
    uint8_t *buf = slurp(argv[2], &len);
    if (!buf) {
        fprintf(stderr, "jfr_dump: cannot read %s\n", argv[2]);
        return 1;
    }
    int rc = 2;
    if (strcmp(argv[1], "counts") == 0)
        rc = cmd_counts(buf, len);
    else if (strcmp(argv[1], "samples") == 0)
        rc = cmd_samples(buf, len, argc > 3 && strcmp(argv[3], "alone") == 0);
    else if (strcmp(argv[1], "events") == 0)
        rc = cmd_events(buf, len);
    else if (strcmp(argv[1], "pprof") == 0 && argc > 3)
        rc = cmd_pprof(buf, len, argv[3]);
    else if (strcmp(argv[1], "bench") == 0 && argc > 3)
        rc = cmd_bench(buf, len, atof(argv[3]));
    else
        fprintf(stderr, "jfr_dump: unknown command %s\n", argv[1]);
    free(buf);
    return rc;
}
