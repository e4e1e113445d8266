/*
 * pfr_profile: the in-memory profile model shared by the recorder, the shipper and the query
 * tool, and its pprof (perftools.profiles.Profile) encoding.
 *
 * The model mirrors pprof: an interned string table, mappings, functions, locations (an address
 * plus one or more lines, innermost inlined line first), and samples (a stack of locations, leaf
 * first, one value per sample type, and labels). Indices in this API are dense and 0-based;
 * the pprof "id" fields (1-based) are produced by the encoder.
 *
 * Errors: functions that can fail return 0 / a valid index on success and a negative errno on
 * failure (-ENOMEM, -EINVAL for misuse, -EBADMSG for malformed input). Builder calls are "sticky":
 * after an allocation failure every further builder call fails too and pfr_profile_error() returns
 * it, so a caller may add many items and check once.
 *
 * Ownership: a pfr_profile owns all its strings and arrays; pointers it hands out stay valid until
 * the next mutating call or pfr_profile_free().
 */
#ifndef PFR_PROFILE_H
#define PFR_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfr_profile pfr_profile;

/* One source line of a location. function is a function index. */
typedef struct pfr_line {
    uint32_t function;
    int64_t line;
} pfr_line;

/* A sample label: a string value (str != NULL) or a number (num, with an optional unit). */
typedef struct pfr_label {
    const char *key;
    const char *str; /* NULL for a numeric label */
    int64_t num;
    const char *unit; /* numeric labels only; may be NULL */
} pfr_label;

/* One frame of a stack as people read it: one per pprof Line, so inlined calls are frames too. */
typedef struct pfr_frame {
    const char *function; /* "" when unknown (never NULL) */
    const char *file;     /* "" when unknown */
    int64_t line;         /* 0 when unknown */
    uint64_t address;     /* the location's address (0 if none) */
    const char *module;   /* the mapping's file, "" when none */
} pfr_frame;

/* ---- life cycle ---- */
pfr_profile *pfr_profile_new(void);
void pfr_profile_free(pfr_profile *p);
/* 0, or the first (sticky) builder error. */
int pfr_profile_error(const pfr_profile *p);

/* ---- building ---- */
/* Intern a string; returns its index (0 is always ""), or a negative errno. */
int64_t pfr_profile_intern(pfr_profile *p, const char *s);
/* A string with its length and hash (pfr_hash_bytes of its bytes): a caller that keeps its
 * strings interned across profiles (the CPU profiler's frame cache) hands them in without their
 * being measured and hashed again in every profile. */
typedef struct pfr_hstr {
    const char *s;
    size_t len;
    uint64_t hash;
} pfr_hstr;
/* Intern a string of known length and hash (which must be pfr_hash_bytes(s, len)); as
 * pfr_profile_intern. */
int64_t pfr_profile_intern_hstr(pfr_profile *p, const pfr_hstr *s);
/* As pfr_profile_add_function and pfr_profile_add_mapping, with the strings given as indexes of
 * strings interned in p already; -EINVAL for an index past them. */
int64_t pfr_profile_add_function_ids(pfr_profile *p, uint32_t name, uint32_t system_name,
                                     uint32_t file, int64_t start_line);
int64_t pfr_profile_add_mapping_ids(pfr_profile *p, uint64_t start, uint64_t limit, uint64_t offset,
                                    uint32_t file, uint32_t build_id);
/* Append a sample type ("ebpf:cpu:nanoseconds" style type name and a unit); returns its index. */
int pfr_profile_add_sample_type(pfr_profile *p, const char *type, const char *unit);
void pfr_profile_set_period(pfr_profile *p, const char *type, const char *unit, int64_t period);
/* time_nanos is the profile's start (pprof convention); duration_nanos its length. */
void pfr_profile_set_time(pfr_profile *p, int64_t time_nanos, int64_t duration_nanos);
/* Add (or find the identical) mapping; returns its index or a negative errno. */
int64_t pfr_profile_add_mapping(pfr_profile *p, uint64_t start, uint64_t limit, uint64_t offset,
                                const char *file, const char *build_id);
/* Add (or find the identical) function; returns its index or a negative errno. */
int64_t pfr_profile_add_function(pfr_profile *p, const char *name, const char *system_name,
                                 const char *file, int64_t start_line);
/* Add (or find the identical) location. mapping is a mapping index or -1 for none. lines are
 * innermost first (the inlined callee first, as in pprof). Returns its index or a negative errno.
 */
int64_t pfr_profile_add_location(pfr_profile *p, int64_t mapping, uint64_t address,
                                 const pfr_line *lines, size_t nlines);
/* Convenience: a location with one line for a function named name in file:line. */
int64_t pfr_profile_add_frame(pfr_profile *p, const char *name, const char *file, int64_t line);
/* Add a sample: locs are location indices, leaf first; values has one entry per sample type.
 * If a sample with the same stack and the same labels exists, its values are summed instead.
 * Returns the sample's index or a negative errno. */
int64_t pfr_profile_add_sample(pfr_profile *p, const uint32_t *locs, size_t nlocs,
                               const int64_t *values, const pfr_label *labels, size_t nlabels);

/* ---- reading ---- */
size_t pfr_profile_num_sample_types(const pfr_profile *p);
/* type and unit of sample type i (unit may be NULL). */
const char *pfr_profile_sample_type(const pfr_profile *p, size_t i, const char **unit);
/* Index of the sample type named type, or -1. */
int pfr_profile_find_sample_type(const pfr_profile *p, const char *type);
int64_t pfr_profile_time_nanos(const pfr_profile *p);
int64_t pfr_profile_duration_nanos(const pfr_profile *p);
int64_t pfr_profile_period(const pfr_profile *p, const char **type, const char **unit);

size_t pfr_profile_num_strings(const pfr_profile *p);
const char *pfr_profile_string(const pfr_profile *p, size_t i);
size_t pfr_profile_num_mappings(const pfr_profile *p);
size_t pfr_profile_num_functions(const pfr_profile *p);
size_t pfr_profile_num_locations(const pfr_profile *p);

size_t pfr_profile_num_samples(const pfr_profile *p);
/* Values of sample i (num_sample_types entries). */
const int64_t *pfr_profile_sample_values(const pfr_profile *p, size_t i);
/* Location indices of sample i, leaf first; *n receives the count. */
const uint32_t *pfr_profile_sample_locations(const pfr_profile *p, size_t i, size_t *n);
/* Labels of sample i (pointers valid as above); returns the count. */
size_t pfr_profile_sample_labels(const pfr_profile *p, size_t i, const pfr_label **labels);
/* String value of label key on sample i, or NULL. */
const char *pfr_profile_sample_label_str(const pfr_profile *p, size_t i, const char *key);
/* Numeric value of label key on sample i; returns false if absent or not numeric. */
bool pfr_profile_sample_label_num(const pfr_profile *p, size_t i, const char *key, int64_t *out);

/* Frames of sample i, leaf first, one per line (inlined lines expanded, innermost first).
 * Writes at most cap frames to out and returns the total number (which may exceed cap). */
size_t pfr_profile_sample_frames(const pfr_profile *p, size_t i, pfr_frame *out, size_t cap);
/* Frames of location loc (one per line, innermost first); same contract. */
size_t pfr_profile_location_frames(const pfr_profile *p, uint32_t loc, pfr_frame *out, size_t cap);

/* The hash the profile keeps for each string it holds: a 64-bit hash of the bytes, the same in
 * every profile and process. Consumers that fingerprint content (the store) use it so that
 * strings are hashed once, when interned, not again by each reader. */
uint64_t pfr_string_hash(const char *s, size_t len);
/* Hashes of the strings of location loc's frames, in pfr_profile_location_frames' order:
 * out[i] = {function name, file} (pfr_string_hash of each); *module receives the hash of the
 * mapping's file ("" when none). Same return contract as pfr_profile_location_frames. */
typedef struct pfr_frame_hash {
    uint64_t function, file;
} pfr_frame_hash;
size_t pfr_profile_location_hashes(const pfr_profile *p, uint32_t loc, pfr_frame_hash *out,
                                   size_t cap, uint64_t *module);

/* ---- pprof encoding ---- */
/* Encode as a serialized perftools.profiles.Profile. gzip selects a gzip'd body (what Go writes
 * and Coroot accepts). *out is malloc'ed and owned by the caller. */
int pfr_profile_encode(const pfr_profile *p, bool gzip, uint8_t **out, size_t *out_len);
/* Decode raw or gzip'd pprof (detected by the gzip magic). Any byte string yields either a valid
 * profile (every index in range, every stack resolvable) or -EBADMSG with a reason in err (if
 * errlen > 0). max_bytes bounds the decompressed size (0 = 256 MiB). */
int pfr_profile_decode(const uint8_t *buf, size_t len, size_t max_bytes, pfr_profile **out,
                       char *err, size_t errlen);

/* ---- merging ---- */
enum pfr_merge_flags {
    PFR_MERGE_DROP_LABELS = 1u << 0, /* drop sample labels so stacks from all processes merge */
};
/* Add every sample of src into dst (strings, functions, locations remapped and de-duplicated;
 * samples with equal stack and labels summed). If dst has no sample types yet it takes src's;
 * otherwise the sample types must be equal (-EINVAL if not). The time range of dst grows to cover
 * both. */
int pfr_profile_merge(pfr_profile *dst, const pfr_profile *src, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
