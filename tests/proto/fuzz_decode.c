/* libFuzzer target: pfr_profile_decode on any bytes, then the invariants a decoded profile must
 * keep: every accessor is safe, and encode -> decode (raw and gzip) and merge keep the totals.
 * The decoder reads the wire format itself; protobuf-c's unpack of the same bytes is the oracle:
 * both must agree on what is well-formed protobuf, and on the totals of what is accepted. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_profile.h"
#include "profile.pb-c.h"

/* Wrapping sums: hostile values may overflow, and the model sums with wrap-around too. */
static void totals(const pfr_profile *p, uint64_t *t, size_t nt)
{
    memset(t, 0, nt * sizeof(*t));
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        const int64_t *v = pfr_profile_sample_values(p, i);
        for (size_t j = 0; j < nt; j++)
            t[j] += (uint64_t)v[j];
    }
}

static void touch_everything(const pfr_profile *p)
{
    pfr_frame fr[64];
    volatile size_t sink = 0;
    for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
        size_t n = pfr_profile_sample_frames(p, i, fr, 64);
        for (size_t j = 0; j < n && j < 64; j++)
            sink += strlen(fr[j].function) + strlen(fr[j].file) + strlen(fr[j].module);
        const pfr_label *l;
        size_t nl = pfr_profile_sample_labels(p, i, &l);
        for (size_t j = 0; j < nl; j++)
            sink += strlen(l[j].key) + (l[j].str ? strlen(l[j].str) : 0);
    }
    for (size_t i = 0; i < pfr_profile_num_sample_types(p); i++) {
        const char *u;
        sink += strlen(pfr_profile_sample_type(p, i, &u)) + strlen(u);
    }
    (void)sink;
}

static pfr_profile *reencode(const pfr_profile *p, bool gz)
{
    uint8_t *buf;
    size_t len;
    if (pfr_profile_encode(p, gz, &buf, &len) != 0)
        abort();
    pfr_profile *q = NULL;
    char err[256];
    if (pfr_profile_decode(buf, len, 0, &q, err, sizeof(err)) != 0)
        abort(); /* what we encode we must read back */
    free(buf);
    return q;
}

/* Compare with protobuf-c on raw (not gzip'd) input. */
static void oracle(const uint8_t *data, size_t size, int rc, const char *err, const pfr_profile *p)
{
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b)
        return;
    Perftools__Profiles__Profile *m = perftools__profiles__profile__unpack(NULL, size, data);
    if (!m) {
        if (rc == 0)
            abort(); /* we accepted bytes protobuf-c finds malformed */
        return;
    }
    if (rc != 0 && strncmp(err, "malformed", 9) == 0)
        abort(); /* we rejected as malformed protobuf what protobuf-c reads */
    if (rc == 0) {
        /* Samples with equal stack and labels are summed: the totals must match. */
        size_t nt = pfr_profile_num_sample_types(p);
        if (m->n_sample_type != nt || m->n_sample < pfr_profile_num_samples(p))
            abort();
        uint64_t *a = calloc(nt + 1, sizeof(*a)), *b = calloc(nt + 1, sizeof(*b));
        totals(p, a, nt);
        for (size_t i = 0; i < m->n_sample; i++) {
            if (m->sample[i]->n_value != nt)
                abort();
            for (size_t j = 0; j < nt; j++)
                b[j] += (uint64_t)m->sample[i]->value[j];
        }
        if (memcmp(a, b, nt * sizeof(*a)) != 0)
            abort();
        free(a);
        free(b);
        if (pfr_profile_num_strings(p) > m->n_string_table ||
            pfr_profile_time_nanos(p) != m->time_nanos ||
            pfr_profile_period(p, NULL, NULL) != m->period)
            abort();
    }
    perftools__profiles__profile__free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pfr_profile *p = NULL;
    char err[256];
    int rc = pfr_profile_decode(data, size, 1u << 20, &p, err, sizeof(err));
    if (rc != 0 && (p || (rc == -EBADMSG && !err[0])))
        abort(); /* failures hand out nothing and say why */
    oracle(data, size, rc, err, p);
    if (rc != 0)
        return 0;
    touch_everything(p);
    size_t nt = pfr_profile_num_sample_types(p);
    uint64_t *want = calloc(nt + 1, sizeof(*want)), *got = calloc(nt + 1, sizeof(*got));
    totals(p, want, nt);
    for (int gz = 0; gz < 2; gz++) {
        pfr_profile *q = reencode(p, gz);
        totals(q, got, nt);
        if (pfr_profile_num_samples(q) != pfr_profile_num_samples(p) ||
            pfr_profile_num_sample_types(q) != nt || memcmp(got, want, nt * sizeof(*got)) != 0)
            abort();
        pfr_profile_free(q);
    }
    /* Merging twice doubles every total; dropping labels keeps them. */
    pfr_profile *m = pfr_profile_new();
    if (pfr_profile_merge(m, p, 0) != 0 || pfr_profile_merge(m, p, 0) != 0)
        abort();
    totals(m, got, nt);
    for (size_t j = 0; j < nt; j++)
        if (got[j] != 2 * want[j])
            abort();
    if (pfr_profile_num_samples(m) != pfr_profile_num_samples(p))
        abort();
    pfr_profile *d = pfr_profile_new();
    if (pfr_profile_merge(d, m, PFR_MERGE_DROP_LABELS) != 0)
        abort();
    totals(d, got, nt);
    for (size_t j = 0; j < nt; j++)
        if (got[j] != 2 * want[j])
            abort();
    pfr_profile_free(d);
    pfr_profile_free(m);
    free(want);
    free(got);
    pfr_profile_free(p);
    return 0;
}
