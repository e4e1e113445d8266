/* Ring building helpers for the query tests (see ring_fixture.h). */
#include "ring_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pfr_profile *pfr_fx_profile(const char *type)
{
    pfr_profile *p = pfr_profile_new();
    const char *unit = strrchr(type, ':');
    if (p && pfr_profile_add_sample_type(p, type, unit ? unit + 1 : "count") < 0) {
        pfr_profile_free(p);
        return NULL;
    }
    return p;
}

int pfr_fx_sample(pfr_profile *p, const char *folded, int64_t value, int64_t pid, const char *comm)
{
    char buf[1024];
    const char *names[128];
    uint32_t locs[128];
    size_t n = 0;
    snprintf(buf, sizeof(buf), "%s", folded);
    for (char *save, *tok = strtok_r(buf, ";", &save); tok && n < 128;
         tok = strtok_r(NULL, ";", &save))
        names[n++] = tok;
    /* locations are leaf first */
    for (size_t i = 0; i < n; i++) {
        int64_t loc = pfr_profile_add_frame(p, names[n - 1 - i], "src.c", (int64_t)i + 1);
        if (loc < 0)
            return (int)loc;
        locs[i] = (uint32_t)loc;
    }
    pfr_label labels[2];
    size_t nl = 0;
    if (pid >= 0)
        labels[nl++] = (pfr_label){.key = "pid", .num = pid};
    if (comm)
        labels[nl++] = (pfr_label){.key = "comm", .str = comm};
    int64_t rc = pfr_profile_add_sample(p, locs, n, &value, labels, nl);
    return rc < 0 ? (int)rc : 0;
}

pfr_store *pfr_fx_open(const char *path)
{
    pfr_store *s = NULL;
    char err[256] = "";
    pfr_store_opts o = {.max_bytes = 2ull << 30};
    int rc = pfr_store_open(path, &o, &s, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "cannot create ring %s: %s (%d)\n", path, err, rc);
        abort();
    }
    return s;
}

int pfr_fx_append(pfr_store *s, const char *service, const pfr_kv *labels, size_t nlabels,
                  int64_t start, int64_t len, const pfr_profile *p)
{
    pfr_chunk_in in = {.service = service,
                       .labels = labels,
                       .nlabels = nlabels,
                       .start_ns = start,
                       .end_ns = start + len,
                       .profile = p};
    return pfr_store_append(s, &in, NULL);
}

int pfr_fx_shift_ring(pfr_store *s, const char *service, int64_t start, int nchunks)
{
    for (int i = 0; i < nchunks; i++) {
        pfr_profile *p = pfr_fx_profile("ebpf:cpu:nanoseconds");
        if (!p)
            return -ENOMEM;
        bool second = i >= nchunks / 2;
        int rc = pfr_fx_sample(p, "main;serve;steady_work", 2 * FX_S, 100, "app");
        if (!rc)
            rc = pfr_fx_sample(p, "main;serve;hot_before", (second ? 1 : 6) * FX_S / 2, 100, "app");
        if (!rc)
            rc = pfr_fx_sample(p, "main;serve;hot_after", (second ? 6 : 1) * FX_S / 2, 100, "app");
        if (!rc)
            rc = pfr_fx_append(s, service, NULL, 0, start + (int64_t)i * 10 * FX_S, 10 * FX_S, p);
        pfr_profile_free(p);
        if (rc)
            return rc;
    }
    return 0;
}

const fx_named pfr_fx_names[] = {
    {"/system.slice/nginx.service", "/system.slice/nginx.service", "nginx_worker", 3 * FX_S},
    {"/docker/web", "/docker/web", "web_handler", 2 * FX_S},
    {"/k8s/default/api", "/k8s/default/api-7d4f9c6b8d-x2b5k/app", "api_x2b5k", 4 * FX_S},
    {"/k8s/default/api", "/k8s/default/api-7d4f9c6b8d-q9zzm/app", "api_q9zzm", 1 * FX_S},
    {"/k8s/prod/db-0/postgres", "/k8s/prod/db-0/postgres", "pg_exec", 5 * FX_S},
    {"/k8s-cronjob/ns/backup", "/k8s-cronjob/ns/backup/backup", "backup_run", 1 * FX_S},
    {"nginx", NULL, "plain_nginx", 2 * FX_S},
    {"/weird/a+b %2F c?d=e&f#g:8080", "/weird/a+b %2F c?d=e&f#g:8080", "weird_fn", 1 * FX_S},
    {"<!--<script><img src=x onerror=alert(1)>\"'&amp;</script>", "<b>\"'&</b>",
     "<svg/onload=alert(2)>", 1 * FX_S},
    {"bytes\xff\xfe", "\xc3(", "bytes_fn\xff", 1 * FX_S},
    {"semi;colon\nnew line\x1b[31mred\x1b[0m", NULL, "hostile_control", 1 * FX_S},
    {FX_LONG_NAME, NULL, "long_fn", 1 * FX_S},
};
const size_t pfr_fx_nnames = sizeof(pfr_fx_names) / sizeof(pfr_fx_names[0]);

int pfr_fx_names_ring(pfr_store *s, int64_t start, int nchunks)
{
    for (int i = 0; i < nchunks; i++) {
        for (size_t k = 0; k < pfr_fx_nnames; k++) {
            const fx_named *n = &pfr_fx_names[k];
            pfr_kv cid = {"container.id", n->container_id};
            char stack[256];
            snprintf(stack, sizeof(stack), "main;%s", n->leaf);
            pfr_profile *p = pfr_fx_profile("ebpf:cpu:nanoseconds");
            if (!p)
                return -ENOMEM;
            int rc = pfr_fx_sample(p, stack, n->value, 100 + (int64_t)k, "app");
            if (!rc)
                rc = pfr_fx_append(s, n->service, n->container_id ? &cid : NULL,
                                   n->container_id ? 1 : 0, start + (int64_t)i * 10 * FX_S,
                                   10 * FX_S, p);
            pfr_profile_free(p);
            if (rc)
                return rc;
        }
    }
    return 0;
}

const fx_named pfr_fx_escapes[] = {
    {"comm\xff\xfe", "id\xc3(", "leaf\xc3(\xed\xa0\x80", 1 * FX_S},
    {"a\\x3bb", "a\\x3bb", "fn\\x3bb", 2 * FX_S},
    {"a;b", "a;b", "fn;b", 3 * FX_S},
    {"with space", "with space", "fn with space", 4 * FX_S},
    {"new\nline", "new\nline", "fn\nline\t\x1b", 5 * FX_S},
    {"dev-disk-by\\x2duuid.device", "by\\x2duuid", "by\\x2dfn", 6 * FX_S},
    {"two\\\\back\\xff", "\\xFF\\", "C:\\dir\\\\x80\\u0041", 7 * FX_S},
    {"\\", "\\\xff", "\\", 8 * FX_S},
};
const size_t pfr_fx_nescapes = sizeof(pfr_fx_escapes) / sizeof(pfr_fx_escapes[0]);

int pfr_fx_escapes_ring(pfr_store *s, int64_t start, int nchunks)
{
    for (int i = 0; i < nchunks; i++) {
        for (size_t k = 0; k < pfr_fx_nescapes; k++) {
            const fx_named *n = &pfr_fx_escapes[k];
            pfr_kv cid = {"container.id", n->container_id};
            pfr_profile *p = pfr_fx_profile("ebpf:cpu:nanoseconds");
            if (!p)
                return -ENOMEM;
            /* frames by hand: pfr_fx_sample would split the leaf at its ';' */
            int64_t leaf = pfr_profile_add_frame(p, n->leaf, "src.c", 2);
            int64_t root = pfr_profile_add_frame(p, "main", "src.c", 1);
            pfr_label comm = {.key = "comm", .str = n->service};
            int64_t rc = leaf < 0 ? leaf : root;
            if (rc >= 0) {
                uint32_t locs[2] = {(uint32_t)leaf, (uint32_t)root};
                rc = pfr_profile_add_sample(p, locs, 2, &n->value, &comm, 1);
            }
            if (rc >= 0)
                rc = pfr_fx_append(s, n->service, &cid, 1, start + (int64_t)i * 10 * FX_S,
                                   10 * FX_S, p);
            pfr_profile_free(p);
            if (rc < 0)
                return (int)rc;
        }
    }
    return 0;
}
