/*
 * Differential test of pfr_identity's pure tier against idoracle (tests/identity/go), which
 * answers the same questions with Go's regexp and path packages, as coroot-node-agent and
 * Coroot do. Hundreds of thousands of inputs, built from the pieces that matter to the patterns
 * (ids, pod name shapes, slices, separators, stray characters), are asked of both; every
 * difference is reported.
 *
 * Usage: test_identity_oracle <idoracle binary> <work dir>
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_check.h"
#include "pfr_identity.h"

#define NSVC  150000
#define NCG   150000
#define NK8S  60000
#define NPROC 40000
#define NOW   1700000000ll

/* ---- a deterministic generator ---- */

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}

struct buf {
    char s[2048];
    size_t n;
};

static void add(struct buf *b, const char *t)
{
    size_t l = strlen(t);
    if (b->n + l < sizeof(b->s)) {
        memcpy(b->s + b->n, t, l + 1);
        b->n += l;
    }
}

static void add_char(struct buf *b, const char *set)
{
    char c[2] = {set[rnd((uint32_t)strlen(set))], 0};
    add(b, c);
}

#define RID "73051af271105c07e1f493b34856a77e665e3b0b4fc72f76c807dfbffeb881bd"

static const char *const svc_tokens[] = {
    "/k8s/",
    "/k8s/",
    "/",
    "/",
    "-",
    "-",
    "ns",
    "web",
    "api2",
    "7d4b9c8f6",
    "bcdfg",
    "x9z4q",
    "abcde",
    "12",
    "0",
    "a",
    "-1-",
    "k8s",
    "/k8s-cronjob/",
    "\n",
    ".",
    "Z",
    "f",
    "28283967",
    "khz2f",
    "0123456789a",
    "0123456789",
    "kube-proxy",
    "2",
    "zz",
    "c",
    "/docker/",
    "db-0",
};

/* A run of n characters from set, one of them sometimes from anywhere. */
static void add_run(struct buf *b, const char *set, int n)
{
    for (int i = 0; i < n; i++)
        add_char(b, rnd(20) ? set : "aeiou013-/.Z_");
}

#define HEX      "0123456789abcdef"
#define ALPHABET "bcdfghjklmnpqrstvwxz2456789"

/* "/k8s/<ns>/<pod>/<container>" with pod names shaped like a controller's, near misses too. */
static void gen_svc_shaped(struct buf *b)
{
    static const char *const names[] = {"web", "api-v2", "a", "db2", "kube-proxy", "x-1", ""};
    add(b, rnd(10) ? "/k8s/" : "/k8s//k8s/");
    add(b, rnd(10) ? "ns" : "Ns");
    add(b, "/");
    add(b, names[rnd(sizeof(names) / sizeof(names[0]))]);
    int parts = 1 + (int)rnd(2);
    for (int i = 0; i < parts; i++) {
        add(b, rnd(8) ? "-" : "");
        switch (rnd(3)) {
        case 0:
            add_run(b, HEX, 1 + (int)rnd(12));
            break;
        case 1:
            add_run(b, ALPHABET, 4 + (int)rnd(3));
            break;
        default:
            add_run(b, "0123456789", 1 + (int)rnd(4));
        }
    }
    static const char *const tails[] = {"/c", "/c", "/", "", "/\n", "/a/b", "/k8s/x/y-bcdfg/z"};
    add(b, tails[rnd(sizeof(tails) / sizeof(tails[0]))]);
}

static void gen_svc(struct buf *b)
{
    b->n = 0;
    b->s[0] = 0;
    if (rnd(2)) {
        gen_svc_shaped(b);
        return;
    }
    if (rnd(4))
        add(b, "/k8s/");
    int n = 1 + (int)rnd(9);
    for (int i = 0; i < n; i++) {
        if (rnd(6) == 0)
            add_char(b, "abcdefghjkz0123456789-/._\nA");
        else
            add(b, svc_tokens[rnd(sizeof(svc_tokens) / sizeof(svc_tokens[0]))]);
    }
}

static const char *const cg_tokens[] = {
    "/",
    "/",
    "/",
    "kubepods",
    "kubepods.slice",
    "kubepods-burstable.slice",
    "burstable",
    "pod1a2b",
    ".slice",
    ".scope",
    "crio-",
    "crio-conmon-",
    "cri-containerd-",
    "cri-containerd:",
    "docker-",
    "docker",
    RID,
    RID,
    "73051af271105c07e1f493b34856a77e665e3b0b4fc72f76c807dfbffeb881",
    "system.slice",
    "user.slice",
    "init.scope",
    "systemd",
    "system",
    "podruntime",
    "runtime.slice",
    "kube.slice",
    "azure.slice",
    "reserved.slice",
    "podruntime.slice",
    "lxc",
    "lxc.payload.",
    "lxc.monitor.",
    "\\x2d",
    "\\x2",
    "nginx.service",
    "..",
    ".",
    "//",
    "(deleted)",
    "init",
    " ",
    "libpod-",
    "machine.slice",
    "containerd.service",
    "-",
    ":",
    "a",
    "x",
    "0",
    "_",
};

static void gen_cg(struct buf *b)
{
    static const char *const firsts[] = {"/system.slice/",
                                         "/runtime.slice/",
                                         "/kube.slice/",
                                         "/azure.slice/",
                                         "/reserved.slice/",
                                         "/podruntime.slice/",
                                         "/system/",
                                         "/podruntime/",
                                         "/init",
                                         "/lxc/",
                                         "/lxc.payload.",
                                         "/docker/",
                                         "/kubepods/",
                                         "/kubepods.slice/",
                                         "/user.slice/",
                                         "/init.scope/",
                                         "/systemd/",
                                         "//system.slice//",
                                         "/system.slice/docker-",
                                         "/machine.slice/"};
    b->n = 0;
    b->s[0] = 0;
    if (rnd(2))
        add(b, firsts[rnd(sizeof(firsts) / sizeof(firsts[0]))]);
    int n = 1 + (int)rnd(8);
    for (int i = 0; i < n; i++) {
        if (rnd(8) == 0)
            add_char(b, "abcdefxyz0123456789-/._:\\A ");
        else
            add(b, cg_tokens[rnd(sizeof(cg_tokens) / sizeof(cg_tokens[0]))]);
    }
}

static void gen_pod(struct buf *b)
{
    static const char *const parts[] = {"backup", "my",    "job2", "-", "-", ".",    "bcdfg",
                                        "abcde",  "x9z4q", "zz",   "0", "a", "k8k8k"};
    b->n = 0;
    b->s[0] = 0;
    if (rnd(2)) { /* <name>-<minute>-<suffix>, with near misses */
        add(b, parts[rnd(3)]);
        add(b, rnd(10) ? "-" : ".");
        char m[32];
        /* often right at the edges of the 7-day window (10080 minutes) */
        int64_t off =
            rnd(2) ? (int64_t)rnd(30000) - 15000 : (rnd(2) ? 10080 : -10080) + (int64_t)rnd(5) - 2;
        int64_t minute = NOW / 60 + off;
        snprintf(m, sizeof(m), "%lld", (long long)(rnd(10) ? minute : minute / 10));
        add(b, m);
        add(b, "-");
        add_run(b, ALPHABET, 4 + (int)rnd(3));
        if (rnd(4) == 0)
            add(b, parts[rnd(sizeof(parts) / sizeof(parts[0]))]);
        return;
    }
    int n = 1 + (int)rnd(6);
    for (int i = 0; i < n; i++) {
        switch (rnd(4)) {
        case 0: { /* a scheduled minute within about ten days of now */
            char m[32];
            snprintf(m, sizeof(m), "%lld", (long long)(NOW / 60 + (int64_t)rnd(30000) - 15000));
            add(b, m);
            break;
        }
        case 1:
            add_char(b, "abz0189-.");
            break;
        default:
            add(b, parts[rnd(sizeof(parts) / sizeof(parts[0]))]);
        }
    }
}

static void gen_proc(struct buf *b)
{
    static const char *const heads[] = {
        "0::",  "12:cpu,cpuacct:", "4:memory:",  "1:name=systemd:", "3:cpu:", "7:pids:",
        "junk", "2:cpu,:",         "3:,memory:", "5:memory,cpu:",   "0:",     ":"};
    b->n = 0;
    b->s[0] = 0;
    int lines = 1 + (int)rnd(5);
    for (int i = 0; i < lines; i++) {
        add(b, heads[rnd(sizeof(heads) / sizeof(heads[0]))]);
        struct buf p;
        switch (rnd(5)) {
        case 0:
            add(b, "/");
            break;
        case 1:
            add(b, "/init.scope");
            break;
        case 2:
            add(b, rnd(2) ? "/kubepods/burstable/pod1/" RID : "/lxc.payload.first/x/y");
            break;
        default:
            gen_cg(&p);
            add(b, p.s);
        }
        if (i + 1 < lines || rnd(2))
            add(b, "\n");
    }
}

/* ---- the protocol ---- */

static void put_hex(FILE *f, const char *s, size_t n)
{
    fputs(" x", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", (unsigned char)s[i]);
}

/* Decode the next " x<hex>" field of line at *p into out. */
static bool get_field(const char **p, char *out, size_t cap)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    if (*s != 'x')
        return false;
    s++;
    size_t n = 0;
    while (s[0] && s[0] != ' ' && s[0] != '\n' && s[1]) {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1 || n + 1 >= cap)
            return false;
        out[n++] = (char)v;
        s += 2;
    }
    out[n] = 0;
    *p = s;
    return true;
}

enum op { SVC, CG, K8S, PROC };
static const struct {
    enum op op;
    int n;
} plan[] = {{SVC, NSVC}, {CG, NCG}, {K8S, NK8S}, {PROC, NPROC}};

static const char *const ns_choices[] = {"", "ns", "kube-system"};
static const char *const c_choices[] = {"", "POD", "c", "app"};

/* One case: the request (written to f when not NULL) and pfr_identity's own answer. */
static void one_case(enum op op, FILE *f, char *mine, size_t cap)
{
    struct buf a, b;
    switch (op) {
    case SVC:
        gen_svc(&a);
        if (f) {
            fputs("svc", f);
            put_hex(f, a.s, a.n);
        }
        if (pfr_identity_service_name(a.s, mine, cap) != 0)
            snprintf(mine, cap, "<too long>");
        break;
    case CG: {
        gen_cg(&a);
        if (f) {
            fputs("cg", f);
            put_hex(f, a.s, a.n);
        }
        pfr_identity_cgroup cg;
        pfr_identity_classify(a.s, &cg);
        snprintf(mine, cap, "%s|%s|%s", pfr_identity_kind_name(cg.kind), cg.runtime_id, cg.id);
        break;
    }
    case K8S: {
        gen_pod(&a);
        const char *ns = ns_choices[rnd(3)], *c = c_choices[rnd(4)];
        char now[32];
        snprintf(now, sizeof(now), "%lld", NOW);
        if (f) {
            fputs("k8s", f);
            put_hex(f, ns, strlen(ns));
            put_hex(f, a.s, a.n);
            put_hex(f, c, strlen(c));
            put_hex(f, now, strlen(now));
        }
        if (pfr_identity_k8s_id(ns, a.s, c, NOW, mine, cap) != 0)
            snprintf(mine, cap, "<error>");
        break;
    }
    case PROC:
        gen_proc(&b);
        if (f) {
            fputs("proc", f);
            put_hex(f, b.s, b.n);
        }
        if (pfr_identity_cgroup_from_proc(b.s, b.n, mine, cap) != 0)
            snprintf(mine, cap, "<too long>");
        break;
    }
    if (f)
        fputc('\n', f);
}

/* The oracle's answer in the same shape as one_case's. */
static bool theirs(enum op op, const char *line, char *out, size_t cap)
{
    const char *p = line;
    if (op != CG)
        return get_field(&p, out, cap);
    char k[64], r[128], id[2048];
    if (!get_field(&p, k, sizeof(k)) || !get_field(&p, r, sizeof(r)) ||
        !get_field(&p, id, sizeof(id)))
        return false;
    snprintf(out, cap, "%s|%s|%s", k, r, id);
    return true;
}

int main(int argc, char **argv)
{
    REQUIRE(argc == 3, "usage: %s <idoracle> <work dir>", argv[0]);
    char req[4096], cmd[8400];
    snprintf(req, sizeof(req), "%s/oracle-requests.txt", argv[2]);
    FILE *f = fopen(req, "w");
    REQUIRE(f, "%s: %s", req, strerror(errno));
    rng = 0x9e3779b97f4a7c15ull;
    char mine[4096];
    for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); i++)
        for (int k = 0; k < plan[i].n; k++)
            one_case(plan[i].op, f, mine, sizeof(mine));
    REQUIRE(fclose(f) == 0, "writing %s", req);

    snprintf(cmd, sizeof(cmd), "'%s' < '%s'", argv[1], req);
    FILE *o = popen(cmd, "r");
    REQUIRE(o, "cannot run %s", argv[1]);
    rng = 0x9e3779b97f4a7c15ull; /* the same cases again, compared as the answers come */
    static char line[1 << 16];
    char want[4096];
    long cases = 0, shown = 0;
    for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); i++) {
        for (int k = 0; k < plan[i].n; k++, cases++) {
            one_case(plan[i].op, NULL, mine, sizeof(mine));
            REQUIRE(fgets(line, sizeof(line), o), "oracle stopped after %ld answers", cases);
            REQUIRE(theirs(plan[i].op, line, want, sizeof(want)), "bad answer: %s", line);
            if (strcmp(mine, want) != 0) {
                check_failures++;
                if (shown++ < 20)
                    fprintf(stderr, "DIFF op %d case %d: pfr '%s' go '%s'\n", (int)plan[i].op, k,
                            mine, want);
            }
        }
    }
    REQUIRE(pclose(o) == 0, "oracle failed");
    remove(req);
    printf("%ld cases, %d differences\n", cases, check_failures);
    return check_failures ? 1 : 0;
}
