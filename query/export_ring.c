/* `pfr export --ring FILE`: a range of the ring as a standalone ring file (a slice), for a site
 * with no link to carry out by hand. The store writes it (pfr_store_slice_write); this turns the
 * command's filters into a store filter and the outcome into messages and an exit code. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pfr_log.h"
#include "pfr_query.h"
#include "pfr_time.h"

/* Label keys of the ring's streams (profile labels), gathered by pfr_store_streams. */
struct keys {
    const pfr_kv *want;
    size_t nwant;
    bool *known; /* per wanted label: some stream has its key */
};

static int keys_cb(const pfr_stream_info *si, void *ctx)
{
    struct keys *k = ctx;
    for (size_t i = 0; i < k->nwant; i++)
        for (size_t j = 0; j < si->nlabels && !k->known[i]; j++)
            k->known[i] = strcmp(si->labels[j].key, k->want[i].key) == 0;
    return 0;
}

/* A slice keeps whole chunks: only labels of whole profiles (streams) can select them. */
static int check_labels(pfr_store *s, const pfr_store_filter *f)
{
    bool known[64] = {false};
    if (f->nlabels > sizeof(known) / sizeof(known[0])) {
        pfr_err("too many --label options");
        return PFR_EXIT_USAGE;
    }
    struct keys k = {f->labels, f->nlabels, known};
    int rc = f->nlabels ? pfr_store_streams(s, keys_cb, &k) : 0;
    if (rc < 0) {
        pfr_err("cannot read the ring's streams: %s", strerror(-rc));
        return PFR_EXIT_ERROR;
    }
    for (size_t i = 0; i < f->nlabels; i++) {
        if (!known[i]) {
            pfr_err("--label %s=%s: no profile in the ring has the label %s. A ring slice keeps "
                    "whole profiles, so it selects by profile labels (host.name, container.id, "
                    "...), not by sample labels (pid, comm)",
                    f->labels[i].key, f->labels[i].value, f->labels[i].key);
            return PFR_EXIT_USAGE;
        }
    }
    return 0;
}

static int exit_for(int rc)
{
    switch (rc) {
    case -ENOENT:
        return PFR_EXIT_NO_DATA;
    case -EINVAL:
        return PFR_EXIT_USAGE;
    default:
        return PFR_EXIT_ERROR;
    }
}

static int export_slice(pfr_store *s, const char *path, bool force, const pfr_store_filter *f)
{
    int rc = check_labels(s, f);
    if (rc)
        return rc;
    pfr_slice_stats st = {0};
    char err[1024] = "";
    rc = pfr_store_slice_write(s, f, path, force ? PFR_SLICE_FORCE : 0, &st, err, sizeof(err));
    if (st.corrupt)
        pfr_warn("%llu corrupt chunks of the range left out", (unsigned long long)st.corrupt);
    if (rc < 0) {
        char a[48], b[48];
        if (rc == -ENOENT)
            pfr_err("%s: nothing in %s to %s%s%s (nothing written)", err,
                    pfr_time_format(f->from_ns, false, a, sizeof(a)),
                    pfr_time_format(f->to_ns, false, b, sizeof(b)), f->service ? " for " : "",
                    f->service ? f->service : "");
        else
            pfr_err("%s", err[0] ? err : strerror(-rc));
        return exit_for(rc);
    }
    char a[48], b[48];
    fprintf(stdout,
            "wrote %s: %llu chunks (ids %lld..%lld, %s to %s), %llu streams, %llu dictionary "
            "layers, %.1f MiB\n",
            path, (unsigned long long)st.chunks, (long long)st.min_id, (long long)st.max_id,
            pfr_time_format(st.first_ns, false, a, sizeof(a)),
            pfr_time_format(st.last_ns, false, b, sizeof(b)), (unsigned long long)st.streams,
            (unsigned long long)st.layers, (double)st.bytes / (1 << 20));
    return fflush(stdout) == 0 ? PFR_EXIT_OK : PFR_EXIT_ERROR;
}

int pfr_export_ring_filter(pfr_store *s, const char *path, bool force, const pfr_store_filter *f)
{
    return export_slice(s, path, force, f);
}

int pfr_export_ring(pfr_store *s, const char *path, bool force, const pfr_store_filter *given)
{
    /* the names as printed (pfr_names.h) back to the ring's bytes, as every other query does */
    pfr_query q = {.service = given->service,
                   .type = given->type,
                   .labels = given->labels,
                   .nlabels = given->nlabels};
    pfr_query_names names;
    if (pfr_query_read_names(&q, &names) < 0) {
        pfr_err("out of memory");
        return PFR_EXIT_ERROR;
    }
    pfr_store_filter f = *given;
    f.service = names.q.service;
    f.type = names.q.type;
    f.labels = names.q.labels;
    int rc = export_slice(s, path, force, &f);
    pfr_query_names_free(&names);
    return rc;
}
