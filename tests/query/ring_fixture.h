/* Helpers that build rings for the query tests and benchmarks with the real store API. */
#ifndef PFR_QUERY_RING_FIXTURE_H
#define PFR_QUERY_RING_FIXTURE_H

#include <stdint.h>

#include "pfr_profile.h"
#include "pfr_store.h"

#define FX_S 1000000000LL

/* A new profile with one sample type (unit from the type name's last field). */
pfr_profile *pfr_fx_profile(const char *type);
/* Add a sample: stack in folded form, root first ("main;work;hash"). pid < 0 / comm NULL: no
 * such label. Returns 0 or a negative errno. */
int pfr_fx_sample(pfr_profile *p, const char *folded, int64_t value, int64_t pid, const char *comm);

/* Open (create) a writable ring at path; aborts the test program on failure. */
pfr_store *pfr_fx_open(const char *path);
/* Append p as the chunk [start, start + len) of service with labels (may be NULL, n = 0). */
int pfr_fx_append(pfr_store *s, const char *service, const pfr_kv *labels, size_t nlabels,
                  int64_t start, int64_t len, const pfr_profile *p);

/* The "shift" workload: chunks of 10 s from start; in the first half hot_before takes most CPU,
 * in the second half hot_after does; steady work stays the same all along. */
int pfr_fx_shift_ring(pfr_store *s, const char *service, int64_t start, int nchunks);

/* Services named the way Coroot names them (tests of names with '/', '.', '-', ':'):
 * "/system.slice/nginx.service", "/docker/web", "/k8s/default/api" (two instances, told apart by
 * container.id), "/k8s/prod/db-0/postgres", "/k8s-cronjob/ns/backup", plain "nginx", a name
 * with URL-significant characters, and (hostile) ones with markup, quotes, ';', a newline and
 * an escape sequence, bytes that are not UTF-8, and a very long one. Every chunk of service k is 10
 * s long from start and holds "main;<leaf>" with the leaf and value given in pfr_fx_names[k]. */
typedef struct fx_named {
    const char *service;
    const char *container_id; /* container.id label; NULL: none */
    const char *leaf;         /* the one function on top of main */
    int64_t value;            /* per chunk */
} fx_named;
extern const fx_named pfr_fx_names[];
extern const size_t pfr_fx_nnames;
#define FX_X10   "xxxxxxxxxx"
#define FX_X100  FX_X10 FX_X10 FX_X10 FX_X10 FX_X10 FX_X10 FX_X10 FX_X10 FX_X10 FX_X10
#define FX_X1000 FX_X100 FX_X100 FX_X100 FX_X100 FX_X100 FX_X100 FX_X100 FX_X100 FX_X100 FX_X100
/* The very long service name: "/k8s/long/" and 2,000 'x'. */
#define FX_LONG_NAME "/k8s/long/" FX_X1000 FX_X1000
int pfr_fx_names_ring(pfr_store *s, int64_t start, int nchunks);

/* Names that need escapes, or hold text that reads as one (pfr_names.h), as service,
 * container.id, leaf function and comm (= the service): bytes that are not UTF-8, a literal
 * "a\x3bb" beside "a;b", a space, a newline, systemd's "\x2d", doubled backslashes, a lone one.
 * Chunks of 10 s from start, service k holding "main;<leaf>" with pfr_fx_escapes[k].value. */
extern const fx_named pfr_fx_escapes[];
extern const size_t pfr_fx_nescapes;
int pfr_fx_escapes_ring(pfr_store *s, int64_t start, int nchunks);

#endif
