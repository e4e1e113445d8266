/* Symbolizer benchmark: first parse and warm lookup cost of pfr's symbolizer beside elfutils'
 * libdwfl (the usual C way to symbolize a live process), on the same process and the same
 * addresses: a Go service binary (built here), the Go toolchain's stripped compiler (names and
 * lines from its 4 MB .gopclntab only: libdwfl names from the symbol table it lacks, so it
 * names nothing there) and libc (in cat).
 * Usage: bench_symbolizer GO_TOOL WORKDIR [passes] */
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer.h"
#include "testutil.h"

#define NADDR 2000

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return v[n / 2];
}

/* NADDR addresses spread over the executable mapping of pid whose path ends with suffix. */
static int pick_addrs(pid_t pid, const char *suffix, uint64_t *out)
{
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    uint64_t s = 0, e = 0;
    while (f && fgets(line, sizeof(line), f)) {
        uint64_t a, b;
        char perms[8], file[4000] = "";
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*s %*s %*s %3999s", &a, &b, perms, file) >=
                3 &&
            perms[2] == 'x' && pfr_tu_ends_with(file, suffix)) {
            s = a;
            e = b;
            break;
        }
    }
    if (f)
        fclose(f);
    if (!e)
        return -1;
    uint64_t x = 42;
    for (int i = 0; i < NADDR; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        out[i] = s + (x >> 11) % (e - s);
    }
    return 0;
}

struct result {
    double parse_ms, cold_ms, warm_ns;
    int named, lines;
};

static struct result run_pfr(pid_t pid, const uint64_t *addrs, int passes)
{
    struct result r = {0};
    pfr_symbolizer *s;
    pfr_symbolizer_new(NULL, &s);
    double t0 = now_ns();
    pfr_symbolizer_add_process(s, pid);
    double t1 = now_ns();
    pfr_sym_frame fr[8];
    for (int i = 0; i < NADDR; i++) {
        int n = pfr_symbolize_user(s, pid, addrs[i], fr, 8);
        r.named += strchr(fr[n - 1].function, '+') == NULL && fr[n - 1].function[0] != '[';
        r.lines += fr[n - 1].line > 0;
    }
    double t2 = now_ns();
    double *per = malloc(sizeof(double) * (size_t)passes);
    for (int p = 0; p < passes; p++) {
        double a = now_ns();
        for (int i = 0; i < NADDR; i++)
            pfr_symbolize_user(s, pid, addrs[i], fr, 8);
        per[p] = (now_ns() - a) / NADDR;
    }
    r.parse_ms = (t1 - t0) / 1e6;
    r.cold_ms = (t2 - t1) / 1e6;
    r.warm_ns = median(per, passes);
    free(per);
    pfr_sym_stats st;
    pfr_symbolizer_stats(s, &st);
    printf("  pfr memory after: %zu KiB (cache %" PRIu64 " KiB)\n", pfr_symbolizer_memory(s) >> 10,
           st.cache_bytes >> 10);
    pfr_symbolizer_free(s);
    return r;
}

static int dwfl_resolve(Dwfl *d, uint64_t a, int *line)
{
    Dwfl_Module *m = dwfl_addrmodule(d, a);
    const char *name = m ? dwfl_module_addrname(m, a) : NULL;
    Dwfl_Line *l = m ? dwfl_module_getsrc(m, a) : NULL;
    *line = 0;
    if (l)
        dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL);
    return name != NULL;
}

static struct result run_dwfl(pid_t pid, const uint64_t *addrs, int passes)
{
    static char *debuginfo_path = NULL;
    static const Dwfl_Callbacks cb = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .debuginfo_path = &debuginfo_path,
    };
    struct result r = {0};
    double t0 = now_ns();
    Dwfl *d = dwfl_begin(&cb);
    dwfl_report_begin(d);
    dwfl_linux_proc_report(d, pid);
    dwfl_report_end(d, NULL, NULL);
    double t1 = now_ns();
    for (int i = 0; i < NADDR; i++) {
        int line;
        r.named += dwfl_resolve(d, addrs[i], &line);
        r.lines += line > 0;
    }
    double t2 = now_ns();
    double *per = malloc(sizeof(double) * (size_t)passes);
    for (int p = 0; p < passes; p++) {
        double a = now_ns();
        for (int i = 0; i < NADDR; i++) {
            int line;
            dwfl_resolve(d, addrs[i], &line);
        }
        per[p] = (now_ns() - a) / NADDR;
    }
    r.parse_ms = (t1 - t0) / 1e6;
    r.cold_ms = (t2 - t1) / 1e6;
    r.warm_ns = median(per, passes);
    free(per);
    dwfl_end(d);
    return r;
}

static void compare(const char *what, pid_t pid, const char *suffix, int passes)
{
    uint64_t addrs[NADDR];
    int tries = 0; /* a child started through sh: its exec may still be under way */
    while (pick_addrs(pid, suffix, addrs) && ++tries < 100)
        usleep(10000);
    if (tries == 100) {
        fprintf(stderr, "no executable mapping of %s\n", suffix);
        exit(1);
    }
    printf("%s (%d addresses over its text):\n", what, NADDR);
    struct result p = run_pfr(pid, addrs, passes), d = run_dwfl(pid, addrs, passes);
    printf("  %-6s snapshot+parse %8.2f ms  first lookups %8.2f ms  warm lookup %7.1f ns  "
           "named %d  with line %d\n",
           "pfr", p.parse_ms, p.cold_ms, p.warm_ns, p.named, p.lines);
    printf("  %-6s snapshot+parse %8.2f ms  first lookups %8.2f ms  warm lookup %7.1f ns  "
           "named %d  with line %d\n",
           "dwfl", d.parse_ms, d.cold_ms, d.warm_ns, d.named, d.lines);
    printf("  ratio dwfl/pfr: warm %.1fx, parse+first lookups %.1fx\n", d.warm_ns / p.warm_ns,
           (d.parse_ms + d.cold_ms) / (p.parse_ms + p.cold_ms));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s GO_TOOL WORKDIR [passes]\n", argv[0]);
        return 2;
    }
    int passes = argc > 3 ? atoi(argv[3]) : 21;
    /* The go build below runs in the source folder: WORKDIR must be an absolute path. */
    if (pfr_tu_sh("mkdir -p %s", argv[2]) != 0)
        return 1;
    char *work = realpath(argv[2], NULL);
    if (!work) {
        perror(argv[2]);
        return 1;
    }
    char gobin[4096];
    snprintf(gobin, sizeof(gobin), "%s/gobig", work);
    if (pfr_tu_sh("mkdir -p %s && cd %s && CGO_ENABLED=0 GO111MODULE=off GOCACHE=%s/gocache "
                  "GOPATH=%s/gopath HOME=%s %s build -o %s gobig.go",
                  work, BENCH_SRC, work, work, work, argv[1], gobin) != 0)
        return 1;
    struct tu_child go, sl;
    char *goargv[] = {gobin, NULL};
    char *slargv[] = {"/bin/sh", "-c", "echo ready; exec cat >/dev/null", NULL};
    if (pfr_tu_start(&go, goargv) || pfr_tu_start(&sl, slargv))
        return 1;
    compare("Go service binary", go.pid, "/gobig", passes);
    compare("libc (in cat)", sl.pid, "libc.so.6", passes);
    /* GO_TOOL's compiler, .../bin/go -> .../pkg/tool/linux_amd64/compile, reading its source
     * from stdin: alive until the pipe closes */
    char compile[4096], cmd[8192];
    snprintf(compile, sizeof(compile), "%s", argv[1]);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(compile, '/');
        if (slash)
            *slash = '\0';
    }
    snprintf(cmd, sizeof(cmd),
             "echo ready; exec %s/pkg/tool/linux_amd64/compile -o /dev/null "
             "-p main /dev/stdin",
             compile);
    struct tu_child cc;
    char *ccargv[] = {"/bin/sh", "-c", cmd, NULL};
    if (pfr_tu_start(&cc, ccargv))
        return 1;
    compare("Go compiler, stripped (.gopclntab)", cc.pid, "/compile", passes);
    pfr_tu_stop(&cc);
    pfr_tu_stop(&go);
    pfr_tu_stop(&sl);
    free(work);
    return 0;
}
