/*
 * Fuzz target: the decoders of stored rows (dictionary layers and chunks) and the profile built
 * from what they accept, and the same chunk read as samples (pfr_store_scan_samples' accessors
 * over every sample's stack, locations and labels). Rows come from the database file, so they are
 * outside input: any bytes must give a decoded row or -EBADMSG, never a crash or an out-of-bounds
 * access.
 *
 * Input: [flags][ntypes][layer length, 2 bytes LE][layer blob][chunk blob]
 *   flags bit 0: the layer bytes are a raw layer (no blob header) instead of a stored blob;
 *   flags bit 1: build the profile with a sample label filter.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_build.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read everything a samples reader can reach. */
static int walk_samples(const pfr_chunk_meta *m, const pfr_chunk_samples *v, void *ctx)
{
    (void)m;
    (void)ctx;
    static pfr_frame fr[256];
    pfr_label labels[64];
    size_t sum = 0;
    uint32_t stable_stacks, stable_locs;
    pfr_samples_dict(v, &stable_stacks, &stable_locs);
    for (size_t i = 0; i < pfr_samples_count(v); i++) {
        uint32_t st = pfr_samples_stack(v, i);
        size_t n = pfr_samples_stack_frames(v, st, fr, 256);
        for (size_t k = 0; k < n && k < 256; k++)
            sum += strlen(fr[k].function) + strlen(fr[k].file) + strlen(fr[k].module);
        size_t nl;
        const uint32_t *locs = pfr_samples_stack_locations(v, st, &nl);
        for (size_t k = 0; k < nl; k++)
            sum += pfr_samples_location_frames(v, locs[k], fr, 256);
        size_t nlab = pfr_samples_labels(v, pfr_samples_label_set(v, i), labels, 64);
        for (size_t k = 0; k < nlab && k < 64; k++)
            sum += strlen(labels[k].key) + (labels[k].str ? strlen(labels[k].str) : 0);
        sum += (size_t)pfr_samples_values(v, i)[0];
    }
    return sum == 1 ? 1 : 0; /* keeps the reads */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint8_t flags = data[0];
    uint32_t ntypes = 1 + data[1] % 4;
    size_t llen = (size_t)data[2] | (size_t)data[3] << 8;
    data += 4;
    size -= 4;
    if (llen > size)
        llen = size;
    struct tabs t = {0};
    pfr_buf raw = {0}, scratch = {0};
    int rc;
    if (flags & 1) {
        rc = pfr_st_layer_decode(data, llen, &t, &scratch);
    } else {
        rc = pfr_st_blob_unpack(data, llen, &raw);
        if (!rc)
            rc = pfr_st_layer_decode(raw.data, raw.len, &t, &scratch);
    }
    if (rc == 0) {
        /* A second layer on top: the chunk blob read as a layer too. */
        struct tabs t2 = {0};
        pfr_st_layer_decode(data + llen, size - llen, &t2, &scratch);
        pfr_st_tabs_free(&t2);

        uint32_t n[T_N];
        for (int k = 0; k < T_N; k++)
            n[k] = t.t[k].n;
        struct dchunk c = {0};
        rc = pfr_st_blob_unpack(data + llen, size - llen, &raw);
        if (!rc)
            rc = pfr_st_chunk_decode(raw.data, raw.len, n, ntypes, &c);
        if (rc) /* the raw bytes as a chunk */
            rc = pfr_st_chunk_decode(data + llen, size - llen, n, ntypes, &c);
        if (rc == 0) {
            const char *types[4] = {"a:b:c", "d", "e", "f"}, *units[4] = {"x", "y", "z", ""};
            struct rstream r = {
                .id = 1, .service = "s", .types = types, .units = units, .ntypes = ntypes};
            pfr_kv want = {"pid", "7"};
            pfr_store_filter f = {.sample_labels = &want, .nsample_labels = 1};
            struct build_scratch b = {0};
            pfr_profile *p = NULL;
            if (pfr_st_build_profile(&r, &t, &c, (flags & 2) ? &f : NULL, &b, &p) == 0) {
                uint8_t *out;
                size_t len;
                if (pfr_profile_encode(p, false, &out, &len) == 0)
                    free(out);
                pfr_profile_free(p);
            }
            pfr_chunk_meta m = {.service = "s", .types = types, .ntypes = ntypes};
            pfr_st_samples_call(&t, 1, &c, (flags & 2) ? &f : NULL, &b, &m, walk_samples, NULL);
            pfr_st_build_scratch_free(&b);
        }
        pfr_st_dchunk_free(&c);
    }
    pfr_st_tabs_free(&t);
    pfr_buf_free(&raw);
    pfr_buf_free(&scratch);
    return 0;
}
