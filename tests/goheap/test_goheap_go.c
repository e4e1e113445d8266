/*
 * Integration tests of pfr_goheap against real Go programs built with Debian's Go toolchains.
 *
 *   test_goheap_go CASE GO_VERSION SRC_DIR WORK_DIR
 *
 * CASE: pprof (agreement with the program's own /debug/pprof/heap read by `go tool pprof -raw`),
 * modes (no pprof import: nothing when enabled, profiles when forced), stripped, pie, exit (the
 * process dies during the walk), exec (it exec's during the walk, and exec's itself), heavy
 * (thousands of buckets growing while read, deadlines and bounds). Exits 77 (skip) when the
 * toolchain is not installed.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pfr_check.h"
#include "gohelp.h"
#include "pfr_goheap.h"
#include "pfr_goheap_sym.h"

static const char *go_version, *src_dir, *work_dir;
static char go_bin[256];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the programs ---- */

static void build(const char *pkg, const char *flags, const char *name, char *out, size_t cap)
{
    char src[1024], wd[1024];
    REQUIRE(snprintf(src, sizeof(src), "%s/%s", src_dir, pkg) < (int)sizeof(src), "path");
    REQUIRE(snprintf(wd, sizeof(wd), "%s/go%s", work_dir, go_version) < (int)sizeof(wd), "path");
    mkdir(work_dir, 0755);
    mkdir(wd, 0755);
    REQUIRE(snprintf(out, cap, "%s/%s", wd, name) < (int)cap, "path");
    REQUIRE(pfr_gohelp_build(go_bin, src, flags, out, wd) == 0, "building %s", name);
}

static gohelp_proc proc;
static int port;

static void start_alloc(const char *bin)
{
    char *argv[] = {(char *)bin, NULL};
    char line[256];
    REQUIRE(pfr_gohelp_start(&proc, argv) == 0, "start %s", bin);
    port = 0;
    for (;;) {
        REQUIRE(pfr_gohelp_line(&proc, line, sizeof(line), 10000) == 0, "no output from %s", bin);
        if (sscanf(line, "port %d", &port) == 1)
            continue;
        if (strcmp(line, "ready") == 0)
            break;
    }
}

static void run_phase(void)
{
    char line[256];
    REQUIRE(pfr_gohelp_send(&proc, "phase") == 0, "send");
    REQUIRE(pfr_gohelp_expect(&proc, "done", line, sizeof(line), 60000) == 0, "phase did not end");
}

static void on_exit_kill(void)
{
    pfr_gohelp_kill(&proc);
}

/* ---- collecting ---- */

typedef struct capture {
    pfr_profile *profile;
    pfr_goheap_proc info;
    int nprofiles;
    int events[16];
    int nevents_kind[16];
    char last_msg[256];
} capture;

static void cap_profile(void *ctx, const pfr_goheap_proc *in, pfr_profile *p)
{
    capture *c = ctx;
    pfr_profile_free(c->profile);
    c->profile = p;
    c->info = *in;
    c->info.exe = c->info.go_version = NULL;
    c->nprofiles++;
}

static void cap_event(void *ctx, const pfr_goheap_event *ev)
{
    capture *c = ctx;
    if (ev->kind < 16)
        c->nevents_kind[ev->kind]++;
    snprintf(c->last_msg, sizeof(c->last_msg), "%s", ev->msg);
    fprintf(stderr, "  event %d pid %d: %s\n", ev->kind, (int)ev->pid, ev->msg);
}

static void cap_reset(capture *c)
{
    pfr_profile_free(c->profile);
    memset(c, 0, sizeof(*c));
}

static pfr_symbolizer *sym;

static pfr_goheap *collector(enum pfr_goheap_mode mode, pfr_goheap_opts *extra)
{
    pfr_goheap_opts o = extra ? *extra : (pfr_goheap_opts){0};
    o.mode = mode;
    if (!o.max_walk_ns) /* a sanitized build on a loaded 2-core machine is slow */
        o.max_walk_ns = 5ll * 1000000000;
    o.resolver = pfr_goheap_sym_resolver(sym);
    pfr_goheap *c;
    REQUIRE(pfr_goheap_new(&o, &c) == 0, "collector");
    return c;
}

static void collect(pfr_goheap *c, pid_t pid, capture *cap)
{
    pfr_goheap_sink sink = {cap, cap_profile, cap_event};
    REQUIRE(pfr_goheap_collect(c, now_ns(), &pid, 1, &sink) == 0, "collect");
}

/* ---- per-function sums ---- */

enum { F_SMALL, F_MEDIUM, F_LARGE, F_INLINE, NF };
static const char *fnames[NF] = {"main.allocSmall", "main.allocMedium", "main.allocLarge",
                                 "main.allocInline"};
/* bytes each phase allocates from each function (see go/alloc/main.go) */
static const double phase_bytes[NF] = {2000000.0 * 64, 200000.0 * 1024, 2000.0 * 65536,
                                       1000000.0 * 256};

/* Distinct stacks ("fn file:line;fn file:line;..." leaf first) of samples whose leaf is one of
 * fnames, as a reader of the same process should see them. */
typedef struct stackset {
    char *s[64];
    int n;
} stackset;

static void stackset_add(stackset *ss, const char *s)
{
    for (int i = 0; i < ss->n; i++)
        if (strcmp(ss->s[i], s) == 0)
            return;
    if (ss->n < 64)
        ss->s[ss->n++] = strdup(s);
}

static void stackset_free(stackset *ss)
{
    for (int i = 0; i < ss->n; i++)
        free(ss->s[i]);
    ss->n = 0;
}

typedef struct sums {
    double v[NF][4]; /* alloc_objects, alloc_space, inuse_objects, inuse_space */
} sums;

static int fidx(const char *fn)
{
    for (int i = 0; i < NF; i++)
        if (strcmp(fn, fnames[i]) == 0)
            return i;
    return -1;
}

static sums profile_sums_stacks(const pfr_profile *p, stackset *stacks)
{
    sums s = {0};
    REQUIRE(pfr_profile_num_sample_types(p) == 4, "four sample types");
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        pfr_frame fr[64];
        size_t nf = pfr_profile_sample_frames(p, i, fr, 64);
        if (nf == 0)
            continue;
        int k = fidx(fr[0].function);
        if (k >= 0 && stacks) {
            char buf[8192] = "";
            for (size_t j = 0; j < nf && j < 64; j++) {
                char one[1024];
                snprintf(one, sizeof(one), "%s%s %s:%" PRId64, j ? ";" : "", fr[j].function,
                         fr[j].file, fr[j].line);
                strncat(buf, one, sizeof(buf) - strlen(buf) - 1);
            }
            stackset_add(stacks, buf);
        }
        const int64_t *v = pfr_profile_sample_values(p, i);
        for (int t = 0; k >= 0 && t < 4; t++)
            s.v[k][t] += (double)v[t];
    }
    return s;
}

static sums profile_sums(const pfr_profile *p)
{
    return profile_sums_stacks(p, NULL);
}

/* Newer pprof prints file:line:column; pfr (and older pprof) file:line. Drop the column. */
static void strip_column(char *pos)
{
    char *last = strrchr(pos, ':');
    if (!last || last == pos)
        return;
    char *prev = last - 1;
    while (prev > pos && *prev >= '0' && *prev <= '9')
        prev--;
    if (*prev == ':' && prev < last - 1 && last[1] &&
        strspn(last + 1, "0123456789") == strlen(last + 1))
        *last = '\0';
}

/* `go tool pprof -raw` of the program's /debug/pprof/heap, summed by leaf function. */
static sums pprof_sums_stacks(stackset *stacks)
{
    char cmd[2048];
    snprintf(
        cmd, sizeof(cmd),
        "HOME='%s' PPROF_TMPDIR='%s' '%s' tool pprof -raw http://127.0.0.1:%d/debug/pprof/heap "
        "2>/dev/null",
        work_dir, work_dir, go_bin, port);
    FILE *f = popen(cmd, "r");
    REQUIRE(f, "popen pprof");
    enum { NONE, SAMPLES, LOCS } sect = NONE;
    /* samples: values and location ids; locations: their lines, innermost first */
    enum { MAXS = 4096, MAXL = 65536, MAXD = 64 };
    static double vals[MAXS][4];
    static long locs[MAXS][MAXD];
    static int nlocs[MAXS];
    static char *loc_text[MAXL];
    static int loc_fn[MAXL];
    size_t ns = 0;
    memset(loc_fn, 0xff, sizeof(loc_fn));
    char line[4096];
    long cur = -1;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "Samples:", 8) == 0) {
            sect = SAMPLES;
            continue;
        }
        if (strncmp(line, "Locations", 9) == 0) {
            sect = LOCS;
            continue;
        }
        if (strncmp(line, "Mappings", 8) == 0)
            break;
        if (sect == SAMPLES && ns < MAXS) {
            double a, b, c, d;
            int used = 0;
            if (sscanf(line, " %lf %lf %lf %lf:%n", &a, &b, &c, &d, &used) == 4 && used > 0) {
                vals[ns][0] = a, vals[ns][1] = b, vals[ns][2] = c, vals[ns][3] = d;
                nlocs[ns] = 0;
                char *p = line + used, *end;
                for (long id; nlocs[ns] < MAXD && (id = strtol(p, &end, 10), end != p); p = end)
                    locs[ns][nlocs[ns]++] = id;
                ns++;
            }
        } else if (sect == LOCS) {
            long id;
            char addr[64], m[32], fn[1024], pos[2048];
            char text[3200];
            if (sscanf(line, " %ld: %63s %31s %1023s %2047s", &id, addr, m, fn, pos) == 5 &&
                id >= 0 && id < MAXL) {
                cur = id;
                loc_fn[id] = fidx(fn); /* the first line is the innermost */
                strip_column(pos);
                snprintf(text, sizeof(text), "%s %s", fn, pos);
                free(loc_text[id]);
                loc_text[id] = strdup(text);
            } else if (cur >= 0 && sscanf(line, " %1023s %2047s s=", fn, pos) == 2 &&
                       line[0] == ' ') {
                /* an inlined caller of the same location */
                strip_column(pos);
                size_t need = strlen(loc_text[cur]) + strlen(fn) + strlen(pos) + 3;
                char *t = malloc(need);
                snprintf(t, need, "%s;%s %s", loc_text[cur], fn, pos);
                free(loc_text[cur]);
                loc_text[cur] = t;
            }
        }
    }
    int rc = pclose(f);
    REQUIRE(rc == 0 && ns > 0, "go tool pprof -raw failed (rc %d, %zu samples)", rc, ns);
    sums s = {0};
    for (size_t i = 0; i < ns; i++) {
        long l0 = nlocs[i] ? locs[i][0] : -1;
        int k = l0 >= 0 && l0 < MAXL ? loc_fn[l0] : -1;
        for (int t = 0; k >= 0 && t < 4; t++)
            s.v[k][t] += vals[i][t];
        if (k < 0 || !stacks)
            continue;
        char buf[8192] = "";
        for (int j = 0; j < nlocs[i]; j++) {
            long id = locs[i][j];
            if (id < 0 || id >= MAXL || !loc_text[id])
                continue;
            if (buf[0])
                strncat(buf, ";", sizeof(buf) - strlen(buf) - 1);
            strncat(buf, loc_text[id], sizeof(buf) - strlen(buf) - 1);
        }
        stackset_add(stacks, buf);
    }
    for (int i = 0; i < MAXL; i++) {
        free(loc_text[i]);
        loc_text[i] = NULL;
    }
    return s;
}

static sums pprof_sums(void)
{
    return pprof_sums_stacks(NULL);
}

/* Every stack Go's pprof shows for the allocating functions, pfr shows identically. */
static void same_stacks(const stackset *ours, const stackset *theirs)
{
    CHECK(theirs->n >= NF, "pprof shows %d stacks of the alloc functions", theirs->n);
    for (int i = 0; i < theirs->n; i++) {
        int found = 0;
        for (int j = 0; j < ours->n && !found; j++)
            found = strcmp(ours->s[j], theirs->s[i]) == 0;
        CHECK(found, "pprof's stack not in pfr's profile:\n    %s", theirs->s[i]);
    }
    for (int j = 0; j < ours->n; j++) {
        int found = 0;
        for (int i = 0; i < theirs->n && !found; i++)
            found = strcmp(ours->s[j], theirs->s[i]) == 0;
        CHECK(found, "pfr's stack not in pprof's profile:\n    %s", ours->s[j]);
    }
    fprintf(stderr, "  %d stacks identical to pprof's, e.g. %s\n", theirs->n,
            theirs->n ? theirs->s[0] : "");
}

static void agree(const char *what, double ours, double theirs, double tol)
{
    double err = theirs != 0 ? fabs(ours - theirs) / theirs : (ours == 0 ? 0 : 1);
    fprintf(stderr, "  %-40s pfr %14.0f  reference %14.0f  (%.2f%%)\n", what, ours, theirs,
            err * 100);
    CHECK(err <= tol, "%s: pfr %.0f vs %.0f differs by %.1f%% (> %.0f%%)", what, ours, theirs,
          err * 100, tol * 100);
}

/* ---- cases ---- */

static void case_pprof(void)
{
    char bin[1024];
    build("alloc", "-tags withpprof", "alloc-pprof", bin, sizeof(bin));
    start_alloc(bin);
    REQUIRE(port > 0, "pprof port");
    pfr_goheap *c = collector(PFR_GOHEAP_ENABLED, NULL);
    capture cap = {0};

    run_phase();
    collect(c, proc.pid, &cap);
    sums p1 = pprof_sums();
    REQUIRE(cap.nprofiles == 1, "a profile after phase 1");
    CHECK(cap.info.baseline, "first look at a running process is a baseline");
    CHECK(cap.info.mem_profile_rate == PFR_GOHEAP_DEFAULT_RATE, "rate %" PRId64,
          cap.info.mem_profile_rate);
    CHECK(
        strcmp(pfr_profile_sample_type(cap.profile, 0, NULL), PFR_GOHEAP_TYPE_ALLOC_OBJECTS) == 0 &&
            strcmp(pfr_profile_sample_type(cap.profile, 3, NULL), PFR_GOHEAP_TYPE_INUSE_SPACE) == 0,
        "sample type names");
    sums s1 = profile_sums(cap.profile);
    for (int k = 0; k < NF; k++) {
        char what[128];
        CHECK(s1.v[k][1] == 0, "baseline alloc_space of %s is %.0f", fnames[k], s1.v[k][1]);
        snprintf(what, sizeof(what), "phase 1 inuse_space %s", fnames[k]);
        agree(what, s1.v[k][3], p1.v[k][3], 0.10);
        snprintf(what, sizeof(what), "phase 1 inuse_objects %s", fnames[k]);
        agree(what, s1.v[k][2], p1.v[k][2], 0.10);
    }

    run_phase();
    collect(c, proc.pid, &cap);
    stackset ours = {0}, theirs = {0};
    sums p2 = pprof_sums_stacks(&theirs);
    REQUIRE(cap.nprofiles == 2, "a profile after phase 2");
    CHECK(!cap.info.baseline, "second profile has deltas");
    sums s2 = profile_sums_stacks(cap.profile, &ours);
    same_stacks(&ours, &theirs);
    stackset_free(&ours);
    stackset_free(&theirs);
    for (int k = 0; k < NF; k++) {
        char what[128];
        snprintf(what, sizeof(what), "phase 2 alloc_space %s", fnames[k]);
        agree(what, s2.v[k][1], p2.v[k][1] - p1.v[k][1], 0.10);
        snprintf(what, sizeof(what), "phase 2 alloc_objects %s", fnames[k]);
        agree(what, s2.v[k][0], p2.v[k][0] - p1.v[k][0], 0.10);
        snprintf(what, sizeof(what), "phase 2 inuse_space %s", fnames[k]);
        agree(what, s2.v[k][3], p2.v[k][3], 0.10);
        /* the sampled estimate against what the program really allocated */
        snprintf(what, sizeof(what), "phase 2 alloc_space %s vs known", fnames[k]);
        agree(what, s2.v[k][1], phase_bytes[k], 0.30);
    }
    int64_t dur = pfr_profile_duration_nanos(cap.profile);
    CHECK(dur > 0 && dur < 120ll * 1000000000, "duration %" PRId64, dur);
    pfr_goheap_free(c);
    cap_reset(&cap);
}

static void case_modes(void)
{
    char bin[1024];
    build("alloc", "", "alloc-plain", bin, sizeof(bin));
    start_alloc(bin);
    capture cap = {0};
    pfr_goheap_stats st;

    pfr_goheap *en = collector(PFR_GOHEAP_ENABLED, NULL);
    run_phase();
    collect(en, proc.pid, &cap);
    collect(en, proc.pid, &cap);
    pfr_goheap_get_stats(en, &st);
    CHECK(cap.nprofiles == 0, "enabled mode: %d profiles of a process with rate 0", cap.nprofiles);
    CHECK(st.not_sampling == 2, "not_sampling %" PRIu64, st.not_sampling);
    CHECK(st.rates_forced == 0, "enabled mode never writes");
    pfr_goheap_free(en);

    pfr_goheap *fo = collector(PFR_GOHEAP_FORCE, NULL);
    collect(fo, proc.pid, &cap);
    pfr_goheap_get_stats(fo, &st);
    CHECK(st.rates_forced == 1 && cap.nevents_kind[PFR_GOHEAP_EV_RATE_FORCED] == 1,
          "force mode reports the pid it changed (%" PRIu64 ")", st.rates_forced);
    CHECK(cap.nprofiles == 0, "nothing to report right after forcing");
    run_phase();
    collect(fo, proc.pid, &cap);
    REQUIRE(cap.nprofiles == 1, "force mode: a profile after the next phase");
    CHECK(!cap.info.baseline, "sampling started by us: the whole counts are this interval's");
    sums s = profile_sums(cap.profile);
    for (int k = 0; k < NF; k++) {
        char what[128];
        snprintf(what, sizeof(what), "forced alloc_space %s vs known", fnames[k]);
        agree(what, s.v[k][1], phase_bytes[k], 0.30);
    }
    collect(fo, proc.pid, &cap);
    pfr_goheap_get_stats(fo, &st);
    CHECK(st.rates_forced == 1, "written once only");
    pfr_goheap_free(fo);
    cap_reset(&cap);
}

static void case_stripped(void)
{
    char bin[1024];
    build("alloc", "-tags withpprof -ldflags=-s", "alloc-stripped", bin, sizeof(bin));
    start_alloc(bin);
    run_phase();
    capture cap = {0};
    pfr_goheap *c = collector(PFR_GOHEAP_FORCE, NULL);
    collect(c, proc.pid, &cap);
    collect(c, proc.pid, &cap);
    pfr_goheap_stats st;
    pfr_goheap_get_stats(c, &st);
    CHECK(cap.nprofiles == 0, "no profile of a stripped binary");
    CHECK(st.stripped_binaries == 1, "stripped counted once (%" PRIu64 ")", st.stripped_binaries);
    CHECK(cap.nevents_kind[PFR_GOHEAP_EV_STRIPPED] == 1, "one event for the binary (%d)",
          cap.nevents_kind[PFR_GOHEAP_EV_STRIPPED]);
    CHECK(st.rates_forced == 0, "nothing written into a stripped binary's process");
    pfr_goheap_free(c);
    cap_reset(&cap);
}

static void case_pie(void)
{
    char bin[1024];
    build("alloc", "-tags withpprof -buildmode=pie", "alloc-pie", bin, sizeof(bin));
    start_alloc(bin);
    run_phase();
    capture cap = {0};
    pfr_goheap *c = collector(PFR_GOHEAP_ENABLED, NULL);
    collect(c, proc.pid, &cap);
    sums p = pprof_sums();
    REQUIRE(cap.nprofiles == 1, "a profile of a PIE process");
    sums s = profile_sums(cap.profile);
    double named = 0;
    for (int k = 0; k < NF; k++) {
        char what[128];
        snprintf(what, sizeof(what), "PIE inuse_space %s", fnames[k]);
        agree(what, s.v[k][3], p.v[k][3], 0.10);
        named += s.v[k][3];
    }
    /* frames named through the load bias: the program's own functions are found */
    CHECK(named > 0, "no in-use memory attributed to main.alloc* in a PIE");
    pfr_goheap_free(c);
    cap_reset(&cap);
}

/* Reader wrapper: before the Nth read, do something to the process. */
typedef struct hook {
    pfr_goheap_mem inner;
    int reads, at;
    void (*act)(void);
} hook;
static hook the_hook;

static ssize_t hooked_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    hook *h = ctx;
    if (++h->reads == h->at)
        h->act();
    return h->inner.read(h->inner.ctx, addr, buf, len);
}

static int hooked_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
    hook *h = ctx;
    return h->inner.write(h->inner.ctx, addr, buf, len);
}

static void install_hook(void *ctx, pid_t pid, pfr_goheap_mem *mem)
{
    (void)ctx;
    (void)pid;
    the_hook.inner = *mem;
    the_hook.reads = 0;
    mem->ctx = &the_hook;
    mem->read = hooked_read;
    mem->write = hooked_write;
}

static void act_kill(void)
{
    kill(proc.pid, SIGKILL);
    waitpid(proc.pid, NULL, 0); /* gone, reaped: its memory is no more */
}

static void case_exit(void)
{
    char bin[1024];
    build("alloc", "-tags withpprof", "alloc-pprof", bin, sizeof(bin));
    start_alloc(bin);
    run_phase();
    pid_t pid = proc.pid;
    the_hook = (hook){.at = 2, .act = act_kill}; /* after MemProfileRate, before the list */
    pfr_goheap_opts o = {.mem_hook = install_hook};
    pfr_goheap *c = collector(PFR_GOHEAP_ENABLED, &o);
    capture cap = {0};
    double t0 = mono_s();
    collect(c, pid, &cap);
    double dt = mono_s() - t0;
    pfr_goheap_stats st;
    pfr_goheap_get_stats(c, &st);
    CHECK(cap.nprofiles == 0, "no profile from a process that died mid-read");
    CHECK(st.walk_errors == 1 && st.read_errors == 1,
          "counted as a read error (%" PRIu64 "/%" PRIu64 ")", st.walk_errors, st.read_errors);
    CHECK(cap.nevents_kind[PFR_GOHEAP_EV_WALK_ERROR] == 1, "one walk-error event");
    CHECK(dt < 2.0, "bounded time: %.3f s", dt);
    proc.pid = -1;
    collect(c, pid, &cap); /* gone now: quietly forgotten */
    pfr_goheap_get_stats(c, &st);
    CHECK(st.walk_errors == 1, "a gone process is not an error");
    pfr_goheap_free(c);
    cap_reset(&cap);
}

static void act_exec(void)
{
    char exe[64], target[256] = "", line[256];
    snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)proc.pid);
    pfr_gohelp_send(&proc, "exec /bin/sleep 30");
    /* wait for the new image: a Go program execs from any of its threads, and until the old
     * leader is gone its /proc/PID/exe reads nothing; on a loaded machine (a CPU hog on each
     * core beside the suite) that took over the 2 s this loop first allowed */
    for (int i = 0; i < 2000; i++) {
        ssize_t n = readlink(exe, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        if (strstr(target, "sleep"))
            break;
        usleep(5000);
    }
    (void)line;
    CHECK(strstr(target, "sleep"), "process did not exec (%s)", target);
}

static void case_exec(void)
{
    char bin[1024], line[256];
    build("alloc", "-tags withpprof", "alloc-pprof", bin, sizeof(bin));
    pfr_goheap_stats st;
    capture cap = {0};

    /* 1: exec into another program in the middle of the walk */
    start_alloc(bin);
    run_phase();
    the_hook = (hook){.at = 2, .act = act_exec};
    pfr_goheap_opts o = {.mem_hook = install_hook};
    pfr_goheap *c = collector(PFR_GOHEAP_ENABLED, &o);
    double t0 = mono_s();
    collect(c, proc.pid, &cap);
    double dt = mono_s() - t0;
    pfr_goheap_get_stats(c, &st);
    CHECK(dt < 3.0, "bounded time: %.3f s", dt);
    /* the old addresses now point into /bin/sleep: the walk must fail, never crash */
    CHECK(cap.nprofiles == 0 && st.walk_errors == 1,
          "exec mid-read: %d profiles, %" PRIu64 " walk errors", cap.nprofiles, st.walk_errors);
    collect(c, proc.pid, &cap);
    pfr_goheap_get_stats(c, &st);
    CHECK(cap.nprofiles == 0 && st.walk_errors == 1, "not a Go process any more");
    pfr_goheap_free(c);
    pfr_gohelp_kill(&proc);

    /* 2: exec itself between collections: state is reset, not diffed across images */
    start_alloc(bin);
    run_phase();
    c = collector(PFR_GOHEAP_ENABLED, NULL);
    collect(c, proc.pid, &cap);
    REQUIRE(cap.nprofiles == 1, "profile before exec");
    char cmd[1100];
    snprintf(cmd, sizeof(cmd), "exec %s", bin);
    pfr_gohelp_send(&proc, cmd);
    REQUIRE(pfr_gohelp_expect(&proc, "ready", line, sizeof(line), 10000) == 0, "re-exec'ed");
    run_phase();
    collect(c, proc.pid, &cap);
    pfr_goheap_get_stats(c, &st);
    REQUIRE(cap.nprofiles == 2, "profile after exec");
    CHECK(st.restarts == 1 && cap.nevents_kind[PFR_GOHEAP_EV_RESTARTED] == 1,
          "exec detected (%" PRIu64 ")", st.restarts);
    sums s = profile_sums(cap.profile);
    /* the new image allocated one phase since we last looked: all of it is this interval's */
    agree("after exec: alloc_space main.allocLarge vs known", s.v[F_LARGE][1], phase_bytes[F_LARGE],
          0.30);
    pfr_goheap_free(c);
    cap_reset(&cap);
}

static void case_heavy(void)
{
    char bin[1024], line[256];
    build("many", "", "many", bin, sizeof(bin));
    char *argv[] = {bin, "3000", "churn", NULL};
    REQUIRE(pfr_gohelp_start(&proc, argv) == 0, "start many");
    REQUIRE(pfr_gohelp_expect(&proc, "ready", line, sizeof(line), 30000) == 0, "many ready");
    capture cap = {0};
    pfr_goheap *c = collector(PFR_GOHEAP_ENABLED, NULL);
    size_t last = 0;
    double worst = 0;
    for (int i = 0; i < 6; i++) {
        double t0 = mono_s();
        collect(c, proc.pid, &cap);
        double dt = mono_s() - t0;
        worst = dt > worst ? dt : worst;
        CHECK(cap.nprofiles == i + 1, "collection %d under churn gave no profile (%s)", i,
              cap.last_msg);
        CHECK(cap.info.buckets >= 3000 && cap.info.buckets >= last, "buckets %zu after %zu",
              cap.info.buckets, last);
        last = cap.info.buckets;
        usleep(100000);
    }
    fprintf(stderr, "  buckets %zu, worst collection %.1f ms\n", last, worst * 1000);
    CHECK(worst < 2.0, "bounded time");
    pfr_goheap_free(c);

    /* the guards, on the same live process */
    pfr_goheap_stats st;
    pfr_goheap_opts o = {.max_walk_ns = -1};
    c = collector(PFR_GOHEAP_ENABLED, &o);
    collect(c, proc.pid, &cap);
    pfr_goheap_get_stats(c, &st);
    CHECK(st.timeouts == 1, "expired deadline counted (%" PRIu64 ")", st.timeouts);
    pfr_goheap_free(c);
    o = (pfr_goheap_opts){.max_buckets = 500};
    c = collector(PFR_GOHEAP_ENABLED, &o);
    collect(c, proc.pid, &cap);
    pfr_goheap_get_stats(c, &st);
    CHECK(st.limit_errors == 1, "bucket bound counted (%" PRIu64 ")", st.limit_errors);
    pfr_goheap_free(c);
    cap_reset(&cap);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s CASE GO_VERSION SRC_DIR WORK_DIR\n", argv[0]);
        return 2;
    }
    go_version = argv[2];
    src_dir = argv[3];
    work_dir = argv[4];
    if (!pfr_gohelp_toolchain(go_version, go_bin, sizeof(go_bin))) {
        printf("SKIP: Go %s is not installed (%s)\n", go_version, go_bin);
        return GOHELP_SKIP;
    }
    if (geteuid() != 0) {
        printf("SKIP: reading another process's memory needs root\n");
        return GOHELP_SKIP;
    }
    atexit(on_exit_kill);
    REQUIRE(pfr_symbolizer_new(&(pfr_sym_opts){0}, &sym) == 0, "symbolizer");
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"pprof", case_pprof}, {"modes", case_modes}, {"stripped", case_stripped},
                 {"pie", case_pie},     {"exit", case_exit},   {"exec", case_exec},
                 {"heavy", case_heavy}};
    int found = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            fprintf(stderr, "== go%s %s\n", go_version, argv[1]);
            cases[i].fn();
            found = 1;
        }
    }
    pfr_gohelp_kill(&proc);
    pfr_symbolizer_free(sym);
    if (!found) {
        fprintf(stderr, "unknown case %s\n", argv[1]);
        return 2;
    }
    fprintf(stderr, "%s\n", check_failures ? "FAILED" : "ok");
    return check_failures ? 1 : 0;
}
