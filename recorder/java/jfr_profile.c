/*
 * jfr_profile: JFR events to pprof profiles with Coroot's Java types (pfr_jfr.h).
 *
 * What each event contributes is what Coroot's node agent takes from the same events
 * (coroot-node-agent jvm/jfr_parse.go): an execution sample is one period of CPU; an allocation
 * sample one object and its weight, a TLAB allocation one object and the TLAB's size, an
 * allocation outside a TLAB one object and its size; a monitor enter one contention and its
 * duration. jdk.ThreadPark is left out, as the agent leaves it out: with the JDK's own recorder
 * it also times idle pool threads waiting for work, which is not contention (docs/java.md).
 *
 * Frames: "<class>.<method>" with the class name as the JVM stores it (java/util/HashMap), the
 * file set to the class name, the JFR line number; leaf first. A frame whose method is missing
 * from the pool is dropped, and an event left with no frame is skipped, as the agent does.
 * Generated classes are renamed so that their frames merge across class loads and JVMs, as the
 * agent's JFR reader does (GeneratedMethodAccessor17 -> GeneratedMethodAccessor_,
 * Foo$$Lambda$14/0x... -> Foo$$Lambda_).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jfr_parse.h"
#include "pfr_jfr.h"
#include "pfr_vec.h"

#define DEFAULT_CPU_PERIOD_NS    10000000
#define DEFAULT_MAX_BYTES        (64u << 20)
#define DEFAULT_MAX_EVENTS       (4u << 20)
#define DEFAULT_MAX_POOL_ENTRIES (1u << 20)
#define DEFAULT_MAX_DEPTH        1024
#define MAX_DEPTH_CAP            (1u << 20)
#define MAX_FRAMES               (4u << 20) /* stack frames kept per chunk, ~16 bytes each */
#define DEFAULT_MAX_CARRY_BYTES  (16u << 20)

enum { PROF_CPU, PROF_ALLOC, PROF_LOCK, NPROF };

static const struct {
    const char *event, *value; /* value: the field that weighs it (NULL: one period) */
    int prof;
} EVENTS[] = {
    {"jdk.ExecutionSample", NULL, PROF_CPU},
    {"jdk.ObjectAllocationSample", "weight", PROF_ALLOC},
    {"jdk.ObjectAllocationInNewTLAB", "tlabSize", PROF_ALLOC},
    {"jdk.ObjectAllocationOutsideTLAB", "allocationSize", PROF_ALLOC},
    {"jdk.JavaMonitorEnter", "duration", PROF_LOCK},
};

enum { F_START, F_DURATION, F_STACK, F_VALUE, F_THREAD, NF };

/* EVENTS' jdk.ObjectAllocationSample: its weight is what the thread allocated since its previous
 * sample (pfr_jfr_threads) */
#define SAMPLED_ALLOC 1

/* One event class of the chunk: its profile (NPROF: not ours) and its fields' positions. */
typedef struct ev_shape {
    int prof;
    int pos[NF];
    int value; /* F_VALUE, or F_DURATION for an event weighed by its duration */
} ev_shape;

/* A stack converted for one profile: locs[off..off+n) of that profile; n < 0: not yet (-1)
 * or nothing left (-2). */
typedef struct stack_slot {
    uint32_t off;
    int32_t n;
    bool cut;
} stack_slot;

/* Stacks converted, per profile: the chunk's, each once; or one of an earlier chunk. */
typedef struct stack_cache {
    stack_slot *slots[NPROF];
    size_t nslots;
    uint32_t *locs[NPROF];
    size_t nlocs[NPROF], loccap[NPROF];
} stack_cache;

typedef struct conv {
    pfr_jfr_opts o;
    pfr_jfr_profiles *out;
    ev_shape *shape;
    size_t nshape;
    stack_cache cur;     /* this chunk's stacks */
    stack_cache carried; /* one slot: a stack of an earlier chunk, converted for each event */
    char *buf[3];        /* the function name and the merged class and method names */
    size_t bufcap[3];
    int64_t t_min, t_max;
    char *err;
    size_t errlen;
} conv;

static int conv_fail(conv *cv, int rc, const char *what)
{
    if (cv->errlen > 0)
        snprintf(cv->err, cv->errlen, "%s", what);
    return rc;
}

/* ---- names ---- */

static bool all_of(const char *s, const char *set)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr(set, *s))
            return false;
    return true;
}

#define DIGITS "0123456789"
#define HEX    DIGITS "abcdef"

/* The tail after "$$Lambda" of a lambda's hidden class: async-profiler's "$14.0x0000000800c0b1f8",
 * "$14/0x...", ".0x..." or "17" (the agent's pattern), or the JDK recorder's own
 * "$14+0x00007fd218009a00/1616974404", which the agent never sees (it records with
 * async-profiler) but which names the same class: both merge to "Foo$$Lambda_". */
static bool lambda_tail(const char *t)
{
    if (all_of(t, DIGITS))
        return true;
    if (*t == '$')
        t++;
    while (*t >= '0' && *t <= '9')
        t++;
    if (t[0] == '+' && t[1] == '0' && t[2] == 'x') {
        const char *slash = strchr(t, '/');
        if (!slash)
            return all_of(t + 3, HEX);
        size_t n = (size_t)(slash - (t + 3));
        char hex[32];
        if (n == 0 || n >= sizeof(hex))
            return false;
        memcpy(hex, t + 3, n);
        hex[n] = '\0';
        return all_of(hex, HEX) && all_of(slash + 1, DIGITS);
    }
    if (*t != '.' && *t != '/')
        return false;
    t++;
    if (t[0] == '0' && t[1] == 'x' && all_of(t + 2, HEX))
        return true;
    return all_of(t, HEX);
}

static int ensure(conv *cv, int which, size_t need)
{
    if (PFR_VEC_RESERVE(cv->buf[which], cv->bufcap[which], need) < 0)
        return conv_fail(cv, -ENOMEM, "out of memory for a frame name");
    return 0;
}

/* s, or s renamed as the agent renames generated classes (in cv->buf[which]). */
static int merge_generated(conv *cv, int which, const char *s, const char **out)
{
    static const char ACCESSOR[] = "jdk/internal/reflect/GeneratedMethodAccessor";
    static const char LAMBDA[] = "$$Lambda";
    size_t n = strlen(s), keep = 0;
    *out = s;
    if (strncmp(s, ACCESSOR, sizeof(ACCESSOR) - 1) == 0 && all_of(s + sizeof(ACCESSOR) - 1, DIGITS))
        keep = sizeof(ACCESSOR) - 1;
    /* the longest prefix ending in "$$Lambda" (at least one character before it) */
    for (size_t i = n; keep == 0 && i-- > 1;)
        if (strncmp(s + i, LAMBDA, sizeof(LAMBDA) - 1) == 0 &&
            lambda_tail(s + i + sizeof(LAMBDA) - 1))
            keep = i + sizeof(LAMBDA) - 1;
    if (keep == 0)
        return 0;
    int rc = ensure(cv, which, keep + 2);
    if (rc < 0)
        return rc;
    memcpy(cv->buf[which], s, keep);
    memcpy(cv->buf[which] + keep, "_", 2);
    *out = cv->buf[which];
    return 0;
}

/* The location of one frame in profile p, or -ENOENT when its method is missing. */
static int64_t frame_location(conv *cv, const jfr_chunk *c, pfr_profile *p, const jfr_frame *f)
{
    const char *cls, *meth;
    if (!f->has_method || pfr_jfr_method_get(c, f->method, &cls, &meth) < 0)
        return -ENOENT;
    int rc = merge_generated(cv, 1, cls, &cls);
    if (rc < 0 || (rc = merge_generated(cv, 2, meth, &meth)) < 0)
        return rc;
    size_t lc = strlen(cls), lm = strlen(meth);
    if ((rc = ensure(cv, 0, lc + lm + 2)) < 0)
        return rc;
    memcpy(cv->buf[0], cls, lc);
    cv->buf[0][lc] = '.';
    memcpy(cv->buf[0] + lc + 1, meth, lm + 1);
    int64_t loc = pfr_profile_add_frame(p, cv->buf[0], cls, f->line > 0 ? f->line : 0);
    return loc < 0 ? conv_fail(cv, (int)loc, "out of memory for a profile") : loc;
}

/* The stack's locations in profile prof, converted once per chunk (c the chunk whose pools hold
 * it, sc that chunk's cache). */
static int stack_locations(conv *cv, stack_cache *sc, const jfr_chunk *c, int prof,
                           const jfr_stack *st, stack_slot **slotp)
{
    stack_slot *s = &sc->slots[prof][st->index];
    *slotp = s;
    if (s->n != -1)
        return 0;
    pfr_profile *p = prof == PROF_CPU     ? cv->out->cpu
                     : prof == PROF_ALLOC ? cv->out->alloc
                                          : cv->out->lock;
    size_t start = sc->nlocs[prof], kept = 0;
    s->cut = st->truncated;
    for (size_t i = 0; i < st->n; i++) {
        int64_t loc = frame_location(cv, c, p, &st->frames[i]);
        if (loc == -ENOENT)
            continue;
        if (loc < 0)
            return (int)loc;
        if (kept == cv->o.max_depth) { /* keep the leaf side */
            s->cut = true;
            break;
        }
        if (PFR_VEC_RESERVE(sc->locs[prof], sc->loccap[prof], start + kept + 1) < 0)
            return conv_fail(cv, -ENOMEM, "out of memory for stacks");
        sc->locs[prof][start + kept++] = (uint32_t)loc;
    }
    sc->nlocs[prof] = start + kept;
    s->off = (uint32_t)start;
    s->n = kept ? (int32_t)kept : -2;
    return 0;
}

/* ---- profiles ---- */

static pfr_profile *profile_for(conv *cv, int prof)
{
    pfr_profile **pp = prof == PROF_CPU     ? &cv->out->cpu
                       : prof == PROF_ALLOC ? &cv->out->alloc
                                            : &cv->out->lock;
    if (*pp)
        return *pp;
    pfr_profile *p = pfr_profile_new();
    if (!p)
        return NULL;
    if (prof == PROF_CPU) {
        pfr_profile_add_sample_type(p, PFR_JAVA_TYPE_CPU, "nanoseconds");
        pfr_profile_set_period(p, "cpu", "nanoseconds", cv->o.cpu_period_ns);
    } else if (prof == PROF_ALLOC) {
        pfr_profile_add_sample_type(p, PFR_JAVA_TYPE_ALLOC_OBJECTS, "count");
        pfr_profile_add_sample_type(p, PFR_JAVA_TYPE_ALLOC_SPACE, "bytes");
        pfr_profile_set_period(p, "space", "bytes", 0);
    } else {
        pfr_profile_add_sample_type(p, PFR_JAVA_TYPE_LOCK_CONTENTIONS, "count");
        pfr_profile_add_sample_type(p, PFR_JAVA_TYPE_LOCK_DELAY, "nanoseconds");
        pfr_profile_set_period(p, "lock", "count", 0);
    }
    *pp = p;
    return p;
}

static void cache_free(stack_cache *sc)
{
    for (int p = 0; p < NPROF; p++) {
        free(sc->slots[p]);
        free(sc->locs[p]);
    }
    memset(sc, 0, sizeof(*sc));
}

/* Room for ns stacks, none converted yet. */
static int cache_reset(conv *cv, stack_cache *sc, size_t ns)
{
    for (int p = 0; p < NPROF; p++) {
        if (ns > sc->nslots) {
            free(sc->slots[p]);
            if (!(sc->slots[p] = malloc((ns ? ns : 1) * sizeof(*sc->slots[p]))))
                return conv_fail(cv, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < ns; i++)
            sc->slots[p][i] = (stack_slot){0, -1, false};
        sc->nlocs[p] = 0;
    }
    if (ns > sc->nslots)
        sc->nslots = ns;
    return 0;
}

/* The stack with key key: in chunk c's pools, or else in the earlier chunks' kept for lookups
 * (newest first). *from is the chunk that holds it, *sc its cache (reset for an earlier
 * chunk's: those stacks are few, converted again for each event). 0 or -ENOENT, -ENOMEM. */
static int find_stack(conv *cv, const jfr_chunk *c, uint64_t key, jfr_stack *st,
                      const jfr_chunk **from, stack_cache **sc)
{
    *from = c;
    *sc = &cv->cur;
    if (pfr_jfr_stack_get(c, key, st) == 0)
        return st->index < cv->cur.nslots ? 0 : -ENOENT;
    for (const jfr_chunk *p = pfr_jfr_chunk_prev(c); p; p = pfr_jfr_chunk_prev(p)) {
        if (pfr_jfr_stack_get(p, key, st) < 0)
            continue;
        *from = p;
        *sc = &cv->carried;
        st->index = 0;
        return cache_reset(cv, &cv->carried, 1);
    }
    return -ENOENT;
}

static int on_chunk_begin(void *ctx, const jfr_chunk *c)
{
    conv *cv = ctx;
    size_t nc = pfr_jfr_num_classes(c), ns = pfr_jfr_num_stacks(c);
    free(cv->shape);
    cv->shape = calloc(nc ? nc : 1, sizeof(*cv->shape));
    if (!cv->shape)
        return conv_fail(cv, -ENOMEM, "out of memory");
    cv->nshape = nc;
    for (size_t i = 0; i < nc; i++)
        cv->shape[i].prof = NPROF;
    for (size_t e = 0; e < sizeof(EVENTS) / sizeof(EVENTS[0]); e++) {
        int64_t k = pfr_jfr_class_find(c, EVENTS[e].event);
        if (k < 0)
            continue;
        ev_shape *s = &cv->shape[k];
        s->prof = EVENTS[e].prof;
        s->pos[F_START] = pfr_jfr_field_find(c, (uint32_t)k, "startTime");
        s->pos[F_DURATION] = pfr_jfr_field_find(c, (uint32_t)k, "duration");
        s->pos[F_STACK] = pfr_jfr_field_find(c, (uint32_t)k, "stackTrace");
        /* a field is read into one slot: an event weighed by its duration reads it once */
        bool by_duration = EVENTS[e].value && strcmp(EVENTS[e].value, "duration") == 0;
        s->value = by_duration ? F_DURATION : F_VALUE;
        s->pos[F_VALUE] = EVENTS[e].value && !by_duration
                              ? pfr_jfr_field_find(c, (uint32_t)k, EVENTS[e].value)
                              : -1;
        s->pos[F_THREAD] =
            e == SAMPLED_ALLOC ? pfr_jfr_field_find(c, (uint32_t)k, "eventThread") : -1;
    }
    int rc = cache_reset(cv, &cv->cur, ns);
    if (rc < 0)
        return rc;
    int64_t start = pfr_jfr_chunk_start_ns(c), end = start + pfr_jfr_chunk_duration_ns(c);
    if (cv->t_min == 0 || start < cv->t_min)
        cv->t_min = start;
    if (end > cv->t_max)
        cv->t_max = end;
    return 0;
}

/* By the event's end: the JVM writes an event when it ends (a monitor enter once the wait is
 * over), into the chunk of that time, so a window of end times takes each event from the dump
 * whose chunks hold it, a wait that began before the window's start included. */
static bool in_window(const conv *cv, const jfr_chunk *c, const int64_t *vals, uint32_t found)
{
    if (cv->o.from_ns == 0 && cv->o.to_ns == 0)
        return true;
    if (!(found & 1u << F_START))
        return false;
    int64_t t = pfr_jfr_ticks_to_unix_ns(c, vals[F_START]);
    if ((found & 1u << F_DURATION) && vals[F_DURATION] > 0) {
        int64_t d = pfr_jfr_ticks_to_ns(c, vals[F_DURATION]);
        if (__builtin_add_overflow(t, d, &t))
            t = INT64_MAX;
    }
    return t >= cv->o.from_ns && t < cv->o.to_ns;
}

/* Whether key is a thread's first allocation sample of the recording (then marked), by
 * binary search in the sorted keys. */
static int first_sample(pfr_jfr_threads *t, uint64_t key)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->keys[mid] == key)
            return 0;
        if (t->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (t->n >= PFR_JFR_MAX_THREADS)
        return 0;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        uint64_t *k = realloc(t->keys, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        t->keys = k;
        t->cap = cap;
    }
    memmove(t->keys + lo + 1, t->keys + lo, (t->n - lo) * sizeof(*t->keys));
    t->keys[lo] = key;
    t->n++;
    return 1;
}

void pfr_jfr_threads_free(pfr_jfr_threads *t)
{
    free(t->keys);
    memset(t, 0, sizeof(*t));
}

static int on_record(void *ctx, const jfr_chunk *c, const jfr_record *rec)
{
    conv *cv = ctx;
    if (rec->kind != JFR_REC_EVENT || rec->cls >= cv->nshape || cv->shape[rec->cls].prof == NPROF)
        return 0;
    const ev_shape *sh = &cv->shape[rec->cls];
    pfr_jfr_counts *n = &cv->out->counts;
    int64_t vals[NF] = {0};
    uint32_t found;
    if (pfr_jfr_event_read(c, rec, sh->pos, NF, vals, &found) < 0)
        return conv_fail(cv, -EINVAL, "an event's fields run past its record");
    jfr_stack st;
    bool valued = sh->prof == PROF_CPU || (found & 1u << sh->value);
    if (!in_window(cv, c, vals, found) || !(found & 1u << F_STACK) || !valued) {
        n->skipped_events++;
        return 0;
    }
    /* a stack key this chunk's pools lack may be an earlier chunk's (pfr_jfr_chunk_prev) */
    const jfr_chunk *sc_chunk;
    stack_cache *sc;
    int rc = find_stack(cv, c, (uint64_t)vals[F_STACK], &st, &sc_chunk, &sc);
    if (rc == -ENOENT) {
        n->skipped_events++;
        return 0;
    }
    if (rc < 0)
        return rc;
    if (cv->o.alloc_seen && (found & 1u << F_THREAD)) {
        int first = first_sample(cv->o.alloc_seen, (uint64_t)vals[F_THREAD]);
        if (first < 0)
            return conv_fail(cv, first, "out of memory for the threads seen");
        if (first) {
            n->first_alloc_samples++;
            return 0;
        }
    }
    if (!profile_for(cv, sh->prof))
        return conv_fail(cv, -ENOMEM, "out of memory for a profile");
    stack_slot *slot;
    rc = stack_locations(cv, sc, sc_chunk, sh->prof, &st, &slot);
    if (rc < 0)
        return rc;
    if (slot->n < 0) {
        n->skipped_events++;
        return 0;
    }
    n->carried_stacks += sc_chunk != c;
    int64_t values[2];
    pfr_profile *p;
    if (sh->prof == PROF_CPU) {
        values[0] = cv->o.cpu_period_ns;
        p = cv->out->cpu;
        n->cpu_samples++;
    } else if (sh->prof == PROF_ALLOC) {
        values[0] = 1;
        values[1] = vals[sh->value];
        p = cv->out->alloc;
        n->alloc_samples++;
    } else {
        values[0] = 1;
        values[1] = pfr_jfr_ticks_to_ns(c, vals[sh->value]);
        p = cv->out->lock;
        n->lock_samples++;
    }
    n->truncated_stacks += slot->cut;
    if (pfr_profile_add_sample(p, sc->locs[sh->prof] + slot->off, (size_t)slot->n, values, NULL,
                               0) < 0)
        return conv_fail(cv, -ENOMEM, "out of memory for a profile");
    return 0;
}

static void conv_free(conv *cv)
{
    free(cv->shape);
    cache_free(&cv->cur);
    cache_free(&cv->carried);
    for (int i = 0; i < 3; i++)
        free(cv->buf[i]);
}

static pfr_jfr_opts with_defaults(const pfr_jfr_opts *in)
{
    pfr_jfr_opts o = in ? *in : (pfr_jfr_opts){0};
    if (o.cpu_period_ns <= 0)
        o.cpu_period_ns = DEFAULT_CPU_PERIOD_NS;
    if (!o.max_bytes)
        o.max_bytes = DEFAULT_MAX_BYTES;
    if (!o.max_events)
        o.max_events = DEFAULT_MAX_EVENTS;
    if (!o.max_pool_entries)
        o.max_pool_entries = DEFAULT_MAX_POOL_ENTRIES;
    if (!o.max_depth)
        o.max_depth = DEFAULT_MAX_DEPTH;
    if (o.max_depth > MAX_DEPTH_CAP)
        o.max_depth = MAX_DEPTH_CAP;
    if (!o.max_carry_bytes)
        o.max_carry_bytes = DEFAULT_MAX_CARRY_BYTES;
    return o;
}

int pfr_jfr_to_profiles(const uint8_t *buf, size_t len, const pfr_jfr_opts *opts,
                        pfr_jfr_profiles *out, char *err, size_t errlen)
{
    conv cv = {.o = with_defaults(opts), .out = out, .err = err, .errlen = errlen};
    jfr_limits lim = {
        .max_bytes = cv.o.max_bytes,
        .max_events = cv.o.max_events,
        .max_pool_entries = cv.o.max_pool_entries,
        .max_frames = MAX_FRAMES,
        .max_carry_bytes = cv.o.chunks_alone ? 0 : cv.o.max_carry_bytes,
    };
    jfr_visitor v = {.ctx = &cv, .chunk_begin = on_chunk_begin, .record = on_record};
    jfr_parse_stats st;
    memset(out, 0, sizeof(*out));
    if (errlen > 0)
        err[0] = '\0';
    int rc = pfr_jfr_parse(buf, len, &lim, &v, &st, err, errlen);
    conv_free(&cv);
    pfr_profile *ps[NPROF] = {out->cpu, out->alloc, out->lock};
    bool windowed = cv.o.from_ns != 0 || cv.o.to_ns != 0;
    for (int p = 0; p < NPROF && rc == 0; p++) {
        if (ps[p] && pfr_profile_num_samples(ps[p]) == 0) {
            /* its events were all skipped: no profile, as for a recording without them */
            pfr_profile_free(ps[p]);
            ps[p] = NULL;
            *(p == PROF_CPU ? &out->cpu : p == PROF_ALLOC ? &out->alloc : &out->lock) = NULL;
        }
        if (!ps[p])
            continue;
        if (windowed)
            pfr_profile_set_time(ps[p], cv.o.from_ns, cv.o.to_ns - cv.o.from_ns);
        else
            pfr_profile_set_time(ps[p], cv.t_min, cv.t_max - cv.t_min);
        if (pfr_profile_error(ps[p]) < 0)
            rc = conv_fail(&cv, pfr_profile_error(ps[p]), "out of memory for a profile");
    }
    if (rc < 0) {
        pfr_jfr_profiles_free(out);
        return rc;
    }
    out->counts.chunks = st.chunks;
    out->counts.cut_chunks = st.truncated;
    out->counts.events = st.events;
    out->counts.uncarried_chunks = st.uncarried;
    return 0;
}

void pfr_jfr_profiles_free(pfr_jfr_profiles *p)
{
    pfr_profile_free(p->cpu);
    pfr_profile_free(p->alloc);
    pfr_profile_free(p->lock);
    memset(p, 0, sizeof(*p));
}
