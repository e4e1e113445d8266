/*
 * store_dump: reads a ring with pfr_store and prints one JSON object per chunk (one per line):
 * id, service, labels, start_ns, end_ns, types, period, and with --samples every sample's value,
 * pid, comm and frames (leaf first). The recorder's integration tests read the store this way.
 * --service NAME and --type TYPE keep the chunks of that service with that sample type, chosen by
 * the store's scan: a test polling for one service's chunks has the rest neither decoded nor
 * printed (on a busy host the whole ring, dumped every second, was most of such a test's CPU).
 *
 *   store_dump STORE [--samples|--meta] [--service NAME] [--type TYPE]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_profile.h"
#include "pfr_store.h"

struct ctx {
    bool samples;
};

static json_t *frames_json(const pfr_profile *p, size_t i)
{
    pfr_frame fr[512];
    size_t n = pfr_profile_sample_frames(p, i, fr, 512);
    if (n > 512)
        n = 512;
    json_t *a = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:I,s:s}", "function", fr[k].function, "file",
                                           fr[k].file, "line", (json_int_t)fr[k].line, "module",
                                           fr[k].module));
    return a;
}

static int on_chunk(const pfr_chunk_meta *m, const pfr_profile *p, void *arg)
{
    struct ctx *c = arg;
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(m->id));
    json_object_set_new(o, "service", json_string(m->service));
    json_object_set_new(o, "start_ns", json_integer(m->start_ns));
    json_object_set_new(o, "end_ns", json_integer(m->end_ns));
    json_t *labels = json_object();
    for (size_t i = 0; i < m->nlabels; i++)
        json_object_set_new(labels, m->labels[i].key, json_string(m->labels[i].value));
    json_object_set_new(o, "labels", labels);
    json_t *types = json_array();
    for (size_t i = 0; i < m->ntypes; i++)
        json_array_append_new(types, json_string(m->types[i]));
    json_object_set_new(o, "types", types);
    if (!p && m->ntypes > 0)
        json_object_set_new(o, "total", json_integer(m->totals[0]));
    if (p) {
        const char *ptype = NULL, *punit = NULL;
        int64_t period = pfr_profile_period(p, &ptype, &punit);
        json_object_set_new(o, "period", json_integer(period));
        json_object_set_new(o, "period_type", json_string(ptype ? ptype : ""));
        json_object_set_new(o, "period_unit", json_string(punit ? punit : ""));
        const char *unit = NULL;
        const char *t0 =
            pfr_profile_num_sample_types(p) ? pfr_profile_sample_type(p, 0, &unit) : "";
        json_object_set_new(o, "type", json_string(t0 ? t0 : ""));
        json_object_set_new(o, "unit", json_string(unit ? unit : ""));
        json_object_set_new(o, "time_nanos", json_integer(pfr_profile_time_nanos(p)));
        json_object_set_new(o, "duration_nanos", json_integer(pfr_profile_duration_nanos(p)));
        json_t *ss = json_array();
        int64_t total = 0;
        for (size_t i = 0; i < pfr_profile_num_samples(p); i++) {
            int64_t v = pfr_profile_sample_values(p, i)[0];
            total += v;
            if (!c->samples)
                continue;
            int64_t pid = -1;
            pfr_profile_sample_label_num(p, i, "pid", &pid);
            const char *comm = pfr_profile_sample_label_str(p, i, "comm");
            json_array_append_new(ss, json_pack("{s:I,s:I,s:s,s:o}", "value", (json_int_t)v, "pid",
                                                (json_int_t)pid, "comm", comm ? comm : "", "frames",
                                                frames_json(p, i)));
        }
        json_object_set_new(o, "total", json_integer(total));
        json_object_set_new(o, "samples", ss);
    }
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        return -1;
    puts(s);
    free(s);
    return 0;
}

int main(int argc, char **argv)
{
    struct ctx c = {0};
    bool meta = false;
    pfr_store_filter f = {0};
    int i = 2;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--samples"))
            c.samples = true;
        else if (!strcmp(argv[i], "--meta"))
            meta = true;
        else if (!strcmp(argv[i], "--service") && i + 1 < argc)
            f.service = argv[++i];
        else if (!strcmp(argv[i], "--type") && i + 1 < argc)
            f.type = argv[++i];
        else
            break;
    }
    if (argc < 2 || i < argc) {
        fprintf(stderr,
                "usage: store_dump STORE [--samples|--meta] [--service NAME] [--type TYPE]\n");
        return 2;
    }
    pfr_store *s;
    char err[256];
    pfr_store_opts o = {.read_only = true};
    if (pfr_store_open(argv[1], &o, &s, err, sizeof(err))) {
        fprintf(stderr, "store_dump: %s\n", err);
        return 1;
    }
    pfr_scan_stats st;
    int rc = pfr_store_scan(s, &f, meta ? PFR_SCAN_META_ONLY : 0, on_chunk, &c, &st);
    pfr_store_close(s);
    if (rc) {
        fprintf(stderr, "store_dump: scan failed: %d\n", rc);
        return 1;
    }
    return 0;
}
