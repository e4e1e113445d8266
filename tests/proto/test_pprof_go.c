/* Integration: profiles written by pfr_profile_encode are read by the reference reader,
 * `go tool pprof -raw`, with the same totals, sample counts and function names.
 * Usage: test_pprof_go <path of the go binary> */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pfr_testgen.h"

static const char *go_bin;

struct raw {
    size_t nsamples, nlabel_lines;
    int64_t total[4];
    char **funcs; /* distinct function names seen in Locations */
    size_t nfuncs, cap;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_name(struct raw *r, const char *name, size_t len)
{
    if (r->nfuncs == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 256;
        r->funcs = realloc(r->funcs, r->cap * sizeof(*r->funcs));
        assert_non_null(r->funcs);
    }
    r->funcs[r->nfuncs++] = strndup(name, len);
}

/* Sort and drop duplicates. */
static void uniq(char **v, size_t *n)
{
    qsort(v, *n, sizeof(*v), cmp_str);
    size_t w = 0;
    for (size_t i = 0; i < *n; i++) {
        if (w && strcmp(v[w - 1], v[i]) == 0) {
            free(v[i]);
            continue;
        }
        v[w++] = v[i];
    }
    *n = w;
}

/* Run go tool pprof -raw on path and parse its report. */
static void run_raw(const char *path, struct raw *r)
{
    memset(r, 0, sizeof(*r));
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s' tool pprof -raw '%s' 2>&1", go_bin, path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    static char line[1 << 16];
    enum { HEAD, SAMPLES, LOCATIONS, MAPPINGS } sec = HEAD;
    bool saw_types = false;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Samples:", 8) == 0) {
            sec = SAMPLES;
            continue;
        }
        if (strncmp(line, "Locations", 9) == 0) {
            sec = LOCATIONS;
            continue;
        }
        if (strncmp(line, "Mappings", 8) == 0) {
            sec = MAPPINGS;
            continue;
        }
        if (sec == SAMPLES) {
            if (!saw_types) { /* the line naming the sample types */
                saw_types = true;
                continue;
            }
            char *colon = strchr(line, ':');
            if (!colon)
                continue;
            if (strchr(line, '[')) { /* a label line: "key:[value]" */
                r->nlabel_lines++;
                continue;
            }
            /* "  v1 v2: id id id" */
            char *s = line;
            for (int i = 0; i < 4 && s < colon; i++) {
                char *end;
                long long v = strtoll(s, &end, 10);
                if (end == s)
                    break;
                r->total[i] += v;
                s = end;
            }
            r->nsamples++;
        } else if (sec == LOCATIONS) {
            /* "   12: 0xaddr M=1 name file:line s=0" or a continuation "        name file..." */
            char *s = line;
            while (*s == ' ')
                s++;
            char *tok = s;
            char *colon = strchr(tok, ':'), *space = strchr(tok, ' ');
            if (*tok >= '0' && *tok <= '9' && colon && space && colon < space) {
                tok = strchr(tok, ' ');
                while (*tok == ' ')
                    tok++;
                if (strncmp(tok, "0x", 2) == 0)
                    tok = strchr(tok, ' ') + 1;
                if (strncmp(tok, "M=", 2) == 0)
                    tok = strchr(tok, ' ') + 1;
            }
            size_t len = strcspn(tok, " \n");
            if (len)
                add_name(r, tok, len);
        }
    }
    int st = pclose(f);
    if (st != 0)
        fail_msg("go tool pprof exited with %d on %s (last line: %s)", st, path, line);
    uniq(r->funcs, &r->nfuncs);
}

static void free_raw(struct raw *r)
{
    for (size_t i = 0; i < r->nfuncs; i++)
        free(r->funcs[i]);
    free(r->funcs);
}

/* Compare what pprof read with what we wrote. */
static void check(const pfr_profile *p, const char *path)
{
    struct raw r;
    run_raw(path, &r);
    assert_int_equal(r.nsamples, pfr_profile_num_samples(p));
    size_t nt = pfr_profile_num_sample_types(p);
    for (size_t t = 0; t < nt && t < 4; t++) {
        int64_t want = 0;
        for (size_t i = 0; i < pfr_profile_num_samples(p); i++)
            want += pfr_profile_sample_values(p, i)[t];
        assert_int_equal(r.total[t], want);
    }
    size_t nlab = 0;
    char **names = NULL;
    size_t nn = 0, cap = 0;
    pfr_frame fr[512];
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        const pfr_label *l;
        size_t nl = pfr_profile_sample_labels(p, i, &l);
        bool has_str = false, has_num = false;
        for (size_t j = 0; j < nl; j++) {
            has_str |= l[j].str != NULL;
            has_num |= l[j].str == NULL;
        }
        nlab += has_str + has_num;
        size_t nf = pfr_profile_sample_frames(p, i, fr, 512);
        assert_true(nf <= 512);
        for (size_t j = 0; j < nf; j++) {
            if (nn == cap) {
                cap = cap ? cap * 2 : 1024;
                names = realloc(names, cap * sizeof(*names));
            }
            names[nn++] = strdup(fr[j].function);
        }
    }
    uniq(names, &nn);
    /* pprof prints a line of string labels and a line of numeric labels per sample. */
    assert_int_equal(r.nlabel_lines, nlab);
    print_message("pprof read %zu samples, total %lld, %zu functions\n", r.nsamples,
                  (long long)r.total[0], r.nfuncs);
    assert_int_equal(r.nfuncs, nn);
    for (size_t i = 0; i < nn; i++) {
        assert_string_equal(r.funcs[i], names[i]);
        free(names[i]);
    }
    free(names);
    free_raw(&r);
}

static void write_file(const pfr_profile *p, bool gz, char *path)
{
    strcpy(path, "/tmp/pfr-pprof-go-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    uint8_t *buf;
    size_t len;
    assert_int_equal(pfr_profile_encode(p, gz, &buf, &len), 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    free(buf);
}

static void test_generated_profile(void **state)
{
    (void)state;
    pfr_testgen *g = pfr_testgen_new(3, 0, NULL);
    pfr_profile *p = pfr_testgen_next(g, 1700000000000000000LL, 10000000000LL);
    char path[64];
    for (int gz = 0; gz < 2; gz++) {
        write_file(p, gz, path);
        check(p, path);
        unlink(path);
    }
    pfr_profile_free(p);
    pfr_testgen_free(g);
}

static void test_merged_profile(void **state)
{
    (void)state;
    pfr_testgen *g = pfr_testgen_new(4, 1, NULL);
    pfr_profile *m = pfr_profile_new();
    int64_t want = 0;
    for (int i = 0; i < 6; i++) {
        pfr_profile *p =
            pfr_testgen_next(g, 1700000000000000000LL + i * 10000000000LL, 10000000000LL);
        want += pfr_testgen_total(p);
        assert_int_equal(pfr_profile_merge(m, p, PFR_MERGE_DROP_LABELS), 0);
        pfr_profile_free(p);
    }
    assert_int_equal(pfr_testgen_total(m), want);
    char path[64];
    write_file(m, true, path);
    check(m, path);
    unlink(path);
    pfr_profile_free(m);
    pfr_testgen_free(g);
}

/* Two sample types, numeric labels with units, inlined frames, no mapping. */
static void test_hand_made_profile(void **state)
{
    (void)state;
    pfr_profile *p = pfr_profile_new();
    pfr_profile_add_sample_type(p, "alloc_objects", "count");
    pfr_profile_add_sample_type(p, "alloc_space", "bytes");
    pfr_profile_set_period(p, "space", "bytes", 524288);
    int64_t fa = pfr_profile_add_function(p, "main.alloc", "main.alloc", "/src/a.go", 3);
    int64_t fb = pfr_profile_add_function(p, "bytes.growSlice", "bytes.growSlice",
                                          "/go/src/bytes/buffer.go", 200);
    pfr_line ls[2] = {{(uint32_t)fb, 230}, {(uint32_t)fa, 9}};
    uint32_t loc = (uint32_t)pfr_profile_add_location(p, -1, 0x1234, ls, 2);
    uint32_t top = (uint32_t)pfr_profile_add_frame(p, "main.main", "/src/main.go", 20);
    uint32_t st[] = {loc, top};
    int64_t v[] = {3, 3 * 4096};
    pfr_label lab[] = {{"bytes", NULL, 4096, "bytes"}, {"goroutine", "worker", 0, NULL}};
    pfr_profile_add_sample(p, st, 2, v, lab, 2);
    pfr_profile_add_sample(p, st + 1, 1, v, NULL, 0);
    assert_int_equal(pfr_profile_error(p), 0);
    char path[64];
    write_file(p, true, path);
    check(p, path);
    unlink(path);
    pfr_profile_free(p);
}

int main(int argc, char **argv)
{
    go_bin = argc > 1 ? argv[1] : "/usr/lib/go-1.19/bin/go";
    if (access(go_bin, X_OK) != 0) {
        fprintf(stderr, "go not found at %s\n", go_bin);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generated_profile),
        cmocka_unit_test(test_merged_profile),
        cmocka_unit_test(test_hand_made_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
