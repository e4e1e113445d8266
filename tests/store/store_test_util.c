#include "store_test_util.h"

#include <ftw.h>
#include <sqlite3.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *pfr_tu_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *path;
    if (asprintf(&path, "%s/pfr-%s-XXXXXX", base && base[0] ? base : "/tmp", tag) < 0)
        abort();
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        abort();
    }
    return path;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void pfr_tu_rmdir(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *pfr_tu_path(const char *dir, const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

uint64_t pfr_tu_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

pfr_profile *pfr_tu_small_profile(unsigned variant, size_t nsamples, const char *type_name)
{
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, type_name, "nanoseconds");
    pfr_profile_set_period(p, "cpu", "nanoseconds", 10000000);
    pfr_profile_set_time(p, 1700000000000000000ll + (int64_t)variant * 10000000000ll,
                         10000000000ll);
    int64_t map = pfr_profile_add_mapping(p, 0x400000, 0x800000, 0, "/usr/bin/app", "abc");
    uint32_t locs[8];
    for (size_t i = 0; i < nsamples; i++) {
        size_t depth = 2 + (i + variant) % 6;
        for (size_t d = 0; d < depth; d++) {
            char name[64], file[64];
            snprintf(name, sizeof(name), "main.func%zu", (i * 7 + d * 3 + variant / 4) % 23);
            snprintf(file, sizeof(file), "/src/file%zu.go", d % 5);
            int64_t fn = pfr_profile_add_function(p, name, name, file, 1);
            pfr_line line = {(uint32_t)fn, (int64_t)(10 + d)};
            locs[d] = (uint32_t)pfr_profile_add_location(p, d == depth - 1 ? -1 : map,
                                                         0x401000 + d * 16 + i, &line, 1);
        }
        char comm[16];
        snprintf(comm, sizeof(comm), "app%zu", i % 3);
        pfr_label labels[2] = {{"pid", NULL, (int64_t)(100 + i % 3), NULL},
                               {"comm", comm, 0, NULL}};
        int64_t v = (int64_t)(1 + (i + variant) % 5) * 10000000;
        pfr_profile_add_sample(p, locs, depth, &v, labels, 2);
    }
    return p;
}

/* ---- canonical form ---- */
struct line {
    char *key;
    int64_t *vals;
};

static int line_cmp(const void *a, const void *b)
{
    return strcmp(((const struct line *)a)->key, ((const struct line *)b)->key);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A growing string: the canonical form is built with it rather than with fprintf to a memory
 * stream (formatting every frame through stdio was a tenth of store_unit's time). */
struct sbuf {
    char *s;
    size_t n, cap;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        if (!(b->s = realloc(b->s, b->cap)))
            abort();
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_u64(struct sbuf *b, uint64_t v, unsigned base)
{
    char d[24];
    size_t i = sizeof(d);
    do {
        d[--i] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    sb_put(b, d + i, sizeof(d) - i);
}

static void sb_i64(struct sbuf *b, int64_t v)
{
    if (v < 0) {
        sb_put(b, "-", 1);
        sb_u64(b, (uint64_t)0 - (uint64_t)v, 10);
    } else {
        sb_u64(b, (uint64_t)v, 10);
    }
}

/* One label as "key=s:value" or "key=n:num:unit" (malloc'ed). */
static char *label_text(const pfr_label *l)
{
    struct sbuf b = {0};
    sb_str(&b, l->key);
    if (l->str) {
        sb_str(&b, "=s:");
        sb_str(&b, l->str);
    } else {
        sb_str(&b, "=n:");
        sb_i64(&b, l->num);
        sb_str(&b, ":");
        sb_str(&b, l->unit ? l->unit : "");
    }
    return b.s;
}

/* The key of sample i: its frames ("function|file|line|address-hex|module;" each) and its
 * labels, sorted ("{a,b,}"). */
static char *sample_key(const pfr_profile *p, size_t i, pfr_frame *frames)
{
    struct sbuf b = {0};
    sb_put(&b, "", 0);
    size_t nf = pfr_profile_sample_frames(p, i, frames, 512);
    for (size_t j = 0; j < nf && j < 512; j++) {
        sb_str(&b, frames[j].function);
        sb_put(&b, "|", 1);
        sb_str(&b, frames[j].file);
        sb_put(&b, "|", 1);
        sb_i64(&b, frames[j].line);
        sb_put(&b, "|", 1);
        sb_u64(&b, frames[j].address, 16);
        sb_put(&b, "|", 1);
        sb_str(&b, frames[j].module);
        sb_put(&b, ";", 1);
    }
    const pfr_label *labels;
    size_t nl = pfr_profile_sample_labels(p, i, &labels);
    char **ls = calloc(nl + 1, sizeof(*ls));
    if (!ls)
        abort();
    for (size_t j = 0; j < nl; j++)
        ls[j] = label_text(&labels[j]);
    qsort(ls, nl, sizeof(*ls), str_cmp);
    sb_str(&b, " {");
    for (size_t j = 0; j < nl; j++) {
        sb_str(&b, ls[j]);
        sb_put(&b, ",", 1);
        free(ls[j]);
    }
    free(ls);
    sb_put(&b, "}", 1);
    return b.s;
}

char *pfr_tu_canon(const pfr_profile *p)
{
    size_t nt = pfr_profile_num_sample_types(p), ns = pfr_profile_num_samples(p);
    struct line *lines = calloc(ns + 1, sizeof(*lines));
    pfr_frame frames[512];
    for (size_t i = 0; i < ns; i++) {
        lines[i].key = sample_key(p, i, frames);
        lines[i].vals = calloc(nt + 1, sizeof(int64_t));
        memcpy(lines[i].vals, pfr_profile_sample_values(p, i), nt * sizeof(int64_t));
    }
    qsort(lines, ns, sizeof(*lines), line_cmp);
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    for (size_t i = 0; i < nt; i++) {
        const char *unit = NULL;
        const char *type = pfr_profile_sample_type(p, i, &unit);
        fprintf(f, "type %s %s\n", type, unit ? unit : "");
    }
    const char *pt = NULL, *pu = NULL;
    int64_t period = pfr_profile_period(p, &pt, &pu);
    fprintf(f, "period %s %s %" PRId64 "\n", pt ? pt : "", pu ? pu : "", period);
    fprintf(f, "time %" PRId64 " %" PRId64 "\n", pfr_profile_time_nanos(p),
            pfr_profile_duration_nanos(p));
    struct sbuf body = {0};
    sb_put(&body, "", 0);
    for (size_t i = 0; i < ns;) {
        size_t j = i + 1;
        while (j < ns && strcmp(lines[j].key, lines[i].key) == 0) {
            for (size_t t = 0; t < nt; t++)
                lines[i].vals[t] += lines[j].vals[t];
            j++;
        }
        bool zero = true;
        for (size_t t = 0; t < nt; t++)
            zero = zero && lines[i].vals[t] == 0;
        if (!zero) {
            sb_str(&body, lines[i].key);
            sb_put(&body, " =", 2);
            for (size_t t = 0; t < nt; t++) {
                sb_put(&body, " ", 1);
                sb_i64(&body, lines[i].vals[t]);
            }
            sb_put(&body, "\n", 1);
        }
        i = j;
    }
    fwrite(body.s, 1, body.n, f);
    free(body.s);
    fclose(f);
    for (size_t i = 0; i < ns; i++) {
        free(lines[i].key);
        free(lines[i].vals);
    }
    free(lines);
    return out;
}

bool pfr_tu_profiles_equal(const pfr_profile *a, const pfr_profile *b, char *why, size_t whylen)
{
    char *ca = pfr_tu_canon(a), *cb = pfr_tu_canon(b);
    bool eq = strcmp(ca, cb) == 0;
    if (!eq && why && whylen) {
        size_t i = 0;
        while (ca[i] && ca[i] == cb[i])
            i++;
        size_t from = i > 60 ? i - 60 : 0;
        snprintf(why, whylen, "differ at byte %zu:\n  a: %.160s\n  b: %.160s", i, ca + from,
                 cb + from);
    }
    free(ca);
    free(cb);
    return eq;
}

/* ---- digest ---- */
static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

struct dsample {
    uint64_t key;
    int64_t v[4];
};

static int dsample_cmp(const void *a, const void *b)
{
    const struct dsample *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* An order-sensitive fold of 64-bit words (a multiply and a shift spread every bit). */
static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
}

/* The words of one location's frames, one per frame (leaf-most line first, as
 * pfr_profile_sample_frames gives them): function name, file, module, line and address. The
 * strings enter by the hash the profile keeps of their bytes (pfr_profile_location_hashes), so
 * each distinct string is hashed once, when interned, not once per frame of every sample; and
 * each location's words are made once per profile, not once per sample that has it. A sample's
 * key folds the words of its frames in order, whichever locations they came in. */
struct dloc {
    size_t off; /* into dwords.w */
    uint32_t n; /* frames */
    bool done;
};

struct dwords {
    uint64_t *w;
    size_t n, cap;
};

#define DLOC_MAX_LINES 256

static const struct dloc *loc_words(const pfr_profile *p, struct dloc *memo, struct dwords *dw,
                                    uint32_t loc)
{
    struct dloc *m = &memo[loc];
    if (m->done)
        return m;
    pfr_frame fr[DLOC_MAX_LINES];
    pfr_frame_hash fh[DLOC_MAX_LINES];
    uint64_t module;
    size_t n = pfr_profile_location_frames(p, loc, fr, DLOC_MAX_LINES);
    size_t nh = pfr_profile_location_hashes(p, loc, fh, DLOC_MAX_LINES, &module);
    if (n != nh || n > DLOC_MAX_LINES)
        abort(); /* (the two accessors agree by contract; a location has a few inlined lines) */
    if (dw->n + n > dw->cap) {
        dw->cap = (dw->n + n) * 2;
        if (!(dw->w = realloc(dw->w, dw->cap * sizeof(*dw->w))))
            abort();
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t h = mix(mix(mix(0x10c, fh[i].function), fh[i].file), module);
        dw->w[dw->n + i] = mix(mix(h, (uint64_t)fr[i].line), fr[i].address);
    }
    *m = (struct dloc){dw->n, (uint32_t)n, true};
    dw->n += n;
    return m;
}

uint64_t pfr_tu_digest(const pfr_profile *p)
{
    size_t nt = pfr_profile_num_sample_types(p), ns = pfr_profile_num_samples(p);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < nt; i++) {
        const char *unit = NULL;
        h = fnv_str(h, pfr_profile_sample_type(p, i, &unit));
        h = fnv_str(h, unit);
    }
    const char *pt = NULL, *pu = NULL;
    int64_t v = pfr_profile_period(p, &pt, &pu);
    h = fnv_str(fnv_str(fnv(h, &v, 8), pt), pu);
    v = pfr_profile_time_nanos(p);
    h = fnv(h, &v, 8);
    v = pfr_profile_duration_nanos(p);
    h = fnv(h, &v, 8);
    struct dsample *d = calloc(ns + 1, sizeof(*d));
    size_t nlocs = pfr_profile_num_locations(p);
    struct dloc *memo = calloc(nlocs + 1, sizeof(*memo));
    struct dwords dw = {0};
    if (!d || !memo)
        abort();
    for (size_t i = 0; i < ns; i++) {
        uint64_t k = 1469598103934665603ull;
        size_t nl_ = 0;
        const uint32_t *locs = pfr_profile_sample_locations(p, i, &nl_);
        for (size_t j = 0; j < nl_; j++) {
            if (locs[j] >= nlocs)
                continue; /* (no frames: pfr_profile_sample_frames skips it too) */
            const struct dloc *m = loc_words(p, memo, &dw, locs[j]);
            for (uint32_t f = 0; f < m->n; f++)
                k = mix(k, dw.w[m->off + f]);
        }
        /* labels are a set: combine their hashes order-independently */
        const pfr_label *labels;
        size_t nl = pfr_profile_sample_labels(p, i, &labels);
        uint64_t lsum = 0;
        for (size_t j = 0; j < nl; j++) {
            uint64_t lh = fnv_str(1469598103934665603ull, labels[j].key);
            lh = labels[j].str ? fnv_str(fnv(lh, "s", 1), labels[j].str)
                               : fnv_str(fnv(fnv(lh, "n", 1), &labels[j].num, 8), labels[j].unit);
            lsum += lh * 0x9e3779b97f4a7c15ull;
        }
        d[i].key = fnv(k, &lsum, 8);
        memcpy(d[i].v, pfr_profile_sample_values(p, i), (nt < 4 ? nt : 4) * sizeof(int64_t));
    }
    free(memo);
    free(dw.w);
    qsort(d, ns, sizeof(*d), dsample_cmp);
    for (size_t i = 0; i < ns;) {
        size_t j = i + 1;
        while (j < ns && d[j].key == d[i].key) {
            for (size_t t = 0; t < 4; t++)
                d[i].v[t] += d[j].v[t];
            j++;
        }
        bool zero = d[i].v[0] == 0 && d[i].v[1] == 0 && d[i].v[2] == 0 && d[i].v[3] == 0;
        if (!zero)
            h = fnv(fnv(h, &d[i].key, 8), d[i].v, sizeof(d[i].v));
        i = j;
    }
    free(d);
    return h;
}

int64_t pfr_tu_sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        fprintf(stderr, "%s: %s: %s\n", path, sql, db ? sqlite3_errmsg(db) : "cannot open");
        abort();
    }
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}
