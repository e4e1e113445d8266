/*
 * cgroup path -> what it is (pfr_identity_classify), following coroot-node-agent's
 * containerByCgroup: the order of the tests and the unanchored, leftmost matching of its
 * patterns are kept, since a path can match more than one of them.
 */
#include <string.h>

#include "id_internal.h"

/* Longest path classified; the kernel's /proc/PID/cgroup lines stay under PATH_MAX. */
#define CG_PATH_MAX 4096

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool ends(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The first 64 characters of the first run of >= 64 [a-z0-9] (the agent's `([a-z0-9]{64})`). */
static bool find_any_rid(const char *s, char *rid)
{
    while (*s) {
        size_t run = pfr_identity_rid_run(s);
        if (run >= PFR_IDENTITY_RUNTIME_ID_LEN) {
            memcpy(rid, s, PFR_IDENTITY_RUNTIME_ID_LEN);
            rid[PFR_IDENTITY_RUNTIME_ID_LEN] = '\0';
            return true;
        }
        s += run ? run : 1;
    }
    return false;
}

/* The 64 characters after the leftmost `tag` followed by one of seps and 64 [a-z0-9]. */
static bool find_tagged_rid(const char *s, const char *tag, const char *seps, char *rid)
{
    size_t tl = strlen(tag);
    for (const char *p = strstr(s, tag); p; p = strstr(p + 1, tag)) {
        const char *q = p + tl;
        if (!*q || !strchr(seps, *q))
            continue;
        if (pfr_identity_rid_run(q + 1) >= PFR_IDENTITY_RUNTIME_ID_LEN) {
            memcpy(rid, q + 1, PFR_IDENTITY_RUNTIME_ID_LEN);
            rid[PFR_IDENTITY_RUNTIME_ID_LEN] = '\0';
            return true;
        }
    }
    return false;
}

/* The leftmost "/<word><suffix>/<x>" (x: one or more characters other than '/') for word one of
 * words: returns where the match starts (its '/'), and *x, *xlen; or NULL. */
static const char *find_word_child(const char *s, const char *const *words, size_t nwords,
                                   const char *suffix, const char **x, size_t *xlen)
{
    size_t sl = strlen(suffix);
    for (const char *p = strchr(s, '/'); p; p = strchr(p + 1, '/')) {
        for (size_t i = 0; i < nwords; i++) {
            size_t wl = strlen(words[i]);
            const char *q = p + 1;
            if (strncmp(q, words[i], wl) != 0 || strncmp(q + wl, suffix, sl) != 0 ||
                q[wl + sl] != '/')
                continue;
            const char *c = q + wl + sl + 1;
            size_t n = strcspn(c, "/");
            if (n == 0)
                continue;
            *x = c;
            *xlen = n;
            return p;
        }
    }
    return NULL;
}

static const char *const slices[] = {"system", "runtime", "reserved",
                                     "kube",   "azure",   "podruntime"};
static const char *const talos_dirs[] = {"system", "podruntime"};

/* "/<slice>.slice/<unit>" with "\x2d" (systemd's escaped '-') turned back into '-'. */
static void systemd_id(const char *s, pfr_identity_cgroup *out)
{
    const char *x;
    size_t xlen;
    const char *start =
        find_word_child(s, slices, sizeof(slices) / sizeof(slices[0]), ".slice", &x, &xlen);
    if (!start) {
        out->kind = PFR_IDENTITY_KIND_UNKNOWN;
        return;
    }
    size_t w = 0;
    for (const char *p = start; p < x + xlen; p++) {
        if (w + 1 >= sizeof(out->id)) {
            out->kind = PFR_IDENTITY_KIND_UNKNOWN;
            out->id[0] = '\0';
            return;
        }
        if (strncmp(p, "\\x2d", 4) == 0 && p + 4 <= x + xlen) {
            out->id[w++] = '-';
            p += 3;
        } else {
            out->id[w++] = *p;
        }
    }
    out->id[w] = '\0';
    /* conmon, CRI-O's monitor, runs in a unit of its own that the agent skips */
    out->kind = starts(out->id, "/system.slice/crio-conmon-") ? PFR_IDENTITY_KIND_PLAIN
                                                              : PFR_IDENTITY_KIND_SYSTEMD;
    if (out->kind != PFR_IDENTITY_KIND_SYSTEMD)
        out->id[0] = '\0';
}

static void kubepods(const char *s, pfr_identity_cgroup *out)
{
    out->kubepods = true;
    if (find_tagged_rid(s, "crio", "-", out->runtime_id)) {
        out->kind = PFR_IDENTITY_KIND_CRIO;
    } else if (strstr(s, "crio-conmon-")) {
        out->kind = PFR_IDENTITY_KIND_UNKNOWN;
    } else if (find_tagged_rid(s, "cri-containerd", "-:", out->runtime_id)) {
        out->kind = PFR_IDENTITY_KIND_CONTAINERD;
    } else if (find_any_rid(s, out->runtime_id)) {
        out->kind = PFR_IDENTITY_KIND_DOCKER;
    } else {
        out->kind = PFR_IDENTITY_KIND_SANDBOX;
    }
}

static void talos(const char *s, pfr_identity_cgroup *out)
{
    const char *x;
    size_t xlen;
    if (!find_word_child(s, talos_dirs, 2, "", &x, &xlen) ||
        pfr_identity_fmt(out->id, sizeof(out->id), "/talos/%.*s", (int)xlen, x) != 0) {
        out->kind = PFR_IDENTITY_KIND_UNKNOWN;
        return;
    }
    out->kind = PFR_IDENTITY_KIND_TALOS;
}

/* "/lxc/<name>" gives "/lxc/<name>" here (the agent keeps only <name>; neither is used). */
static void lxc(const char *s, const char *dir, const char *sep, pfr_identity_cgroup *out)
{
    out->kind = PFR_IDENTITY_KIND_UNKNOWN;
    size_t dl = strlen(dir), sl = strlen(sep);
    for (const char *p = strchr(s, '/'); p; p = strchr(p + 1, '/')) {
        if (strncmp(p + 1, dir, dl) != 0 || strncmp(p + 1 + dl, sep, sl) != 0)
            continue;
        const char *x = p + 1 + dl + sl;
        size_t n = strcspn(x, "/");
        if (n && pfr_identity_fmt(out->id, sizeof(out->id), "/lxc/%.*s", (int)n, x) == 0) {
            out->kind = PFR_IDENTITY_KIND_LXC;
            return;
        }
    }
}

static bool is_slice_prefix(const char *first, size_t len)
{
    for (size_t i = 0; i < sizeof(slices) / sizeof(slices[0]); i++) {
        size_t sl = strlen(slices[i]);
        if (len == sl + 6 && strncmp(first, slices[i], sl) == 0 &&
            strncmp(first + sl, ".slice", 6) == 0)
            return true;
    }
    return false;
}

static bool first_is(const char *first, size_t len, const char *word)
{
    return strlen(word) == len && strncmp(first, word, len) == 0;
}

static void classify_clean(const char *s, pfr_identity_cgroup *out)
{
    const char *first = s;
    while (*first == '/')
        first++;
    size_t flen = strcspn(first, "/");
    bool more = first[flen] == '/'; /* a second component, possibly empty */

    if (strcmp(s, "/init") == 0) {
        out->kind = PFR_IDENTITY_KIND_TALOS;
        pfr_identity_copy(out->id, sizeof(out->id), "/talos/init");
    } else if (first_is(first, flen, "user.slice") || first_is(first, flen, "init.scope") ||
               first_is(first, flen, "systemd")) {
        out->kind = PFR_IDENTITY_KIND_PLAIN;
    } else if (first_is(first, flen, "docker") || (first_is(first, flen, "system.slice") && more &&
                                                   starts(first + flen + 1, "docker-"))) {
        out->kind =
            find_any_rid(s, out->runtime_id) ? PFR_IDENTITY_KIND_DOCKER : PFR_IDENTITY_KIND_UNKNOWN;
    } else if (strstr(s, "kubepods")) {
        kubepods(s, out);
    } else if (first_is(first, flen, "system") || first_is(first, flen, "podruntime")) {
        talos(s, out);
    } else if (is_slice_prefix(first, flen)) {
        if (ends(s, ".scope"))
            out->kind = PFR_IDENTITY_KIND_PLAIN;
        else
            systemd_id(s, out);
    } else if (first_is(first, flen, "lxc")) {
        lxc(s, "lxc", "/", out);
    } else if (starts(first, "lxc.payload.") && (size_t)(strlen("lxc.payload.")) <= flen) {
        lxc(s, "lxc", ".payload.", out);
    } else if (!more) {
        out->kind = PFR_IDENTITY_KIND_PLAIN;
    } else {
        out->kind = PFR_IDENTITY_KIND_UNKNOWN;
    }
}

void pfr_identity_classify(const char *cgroup, pfr_identity_cgroup *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = cgroup ? strlen(cgroup) : 0;
    if (n > CG_PATH_MAX) {
        out->kind = PFR_IDENTITY_KIND_UNKNOWN;
        return;
    }
    char clean[CG_PATH_MAX + 2];
    pfr_identity_path_clean(cgroup ? cgroup : "", n, clean);
    /* a process left in a removed cgroup (v1 shows " (deleted)"): the agent skips it */
    if (ends(clean, "(deleted)")) {
        out->kind = PFR_IDENTITY_KIND_PLAIN;
        return;
    }
    classify_clean(clean, out);
    if (out->kind != PFR_IDENTITY_KIND_DOCKER && out->kind != PFR_IDENTITY_KIND_CRIO &&
        out->kind != PFR_IDENTITY_KIND_CONTAINERD)
        out->runtime_id[0] = '\0';
}

const char *pfr_identity_kind_name(enum pfr_identity_kind k)
{
    static const char *const names[] = {"plain", "unknown",    "systemd", "talos", "docker",
                                        "crio",  "containerd", "sandbox", "lxc"};
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}
