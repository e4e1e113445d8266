/* libFuzzer target: the JFR parser and its conversion to pprof (recorder/java) over fuzzed
 * recordings: the conversion with small limits, the encoding of what it made, and a walk that
 * reads the first fields of every event of every type and the stacks they name (in their chunk
 * or the one before). */
#include <stdint.h>
#include <stdlib.h>

#include "jfr_parse.h"
#include "pfr_jfr.h"

static int read_every_event(void *ctx, const jfr_chunk *c, const jfr_record *rec)
{
    (void)ctx;
    if (rec->kind != JFR_REC_EVENT)
        return 0;
    int pos[JFR_MAX_FIELDS_READ];
    int64_t vals[JFR_MAX_FIELDS_READ];
    uint32_t found;
    for (int i = 0; i < JFR_MAX_FIELDS_READ; i++)
        pos[i] = i;
    pfr_jfr_event_read(c, rec, pos, JFR_MAX_FIELDS_READ, vals, &found);
    /* the pools, through an event's keys: its chunk's, then the chunk before's */
    jfr_stack st;
    for (int i = 0; i < JFR_MAX_FIELDS_READ; i++) {
        const jfr_chunk *in = c;
        if (!(found & 1u << i))
            continue;
        if (pfr_jfr_stack_get(in, (uint64_t)vals[i], &st) < 0 &&
            (!(in = pfr_jfr_chunk_prev(c)) || pfr_jfr_stack_get(in, (uint64_t)vals[i], &st) < 0))
            continue;
        for (size_t f = 0; f < st.n; f++) {
            const char *cls, *name;
            pfr_jfr_method_get(in, st.frames[f].method, &cls, &name);
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    /* a carry bound small enough that some chunks are kept for the next and some are not */
    pfr_jfr_opts o = {.max_events = 1 << 16,
                      .max_pool_entries = 1 << 14,
                      .max_depth = 64,
                      .max_carry_bytes = 1 << 18};
    pfr_jfr_profiles out;
    if (pfr_jfr_to_profiles(data, size, &o, &out, err, sizeof(err)) == 0) {
        pfr_profile *ps[3] = {out.cpu, out.alloc, out.lock};
        for (int i = 0; i < 3; i++) {
            uint8_t *enc;
            size_t n;
            if (ps[i] && pfr_profile_encode(ps[i], false, &enc, &n) == 0)
                free(enc);
        }
        pfr_jfr_profiles_free(&out);
    }
    jfr_limits lim = {1 << 24, 1 << 16, 1 << 14, 1 << 16, 1 << 20};
    jfr_visitor v = {.record = read_every_event};
    jfr_parse_stats st;
    pfr_jfr_parse(data, size, &lim, &v, &st, err, sizeof(err));
    return 0;
}
