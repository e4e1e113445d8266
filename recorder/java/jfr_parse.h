/*
 * pfr_jfr_parse: the JDK Flight Recorder file format (version 2.x, what JDK 11 and later write),
 * read from memory; the parser behind pfr_jfr.h, and the dump tool's (tests/java).
 *
 * A recording is a sequence of chunks. Each chunk is whole in itself: a 68-byte header, event
 * records, one metadata record (the classes: ids, names, fields and their types) and constant
 * pool records (checkpoints, chained backwards from the header's offset) that the events refer
 * to by key. pfr_jfr_parse reads each whole chunk's metadata and the pools pfr needs (stack traces,
 * methods, classes, symbols, strings; every other pool is walked and dropped), then hands every
 * record to a visitor in file order. Event fields are read on demand (pfr_jfr_event_read), by
 * position in their class. The last few chunks' pools stay readable while the next chunks are
 * visited (pfr_jfr_chunk_prev, jfr_limits.max_carry_bytes): the JVM writes events that name a
 * stack only an earlier chunk holds.
 *
 * Everything read is outside input: each size, count, offset, key and depth is checked against
 * the data and the limits before it is used. Loops consume at least a byte each, or are over
 * classes that have none on the wire; nothing is allocated for a count the data cannot hold.
 */
#ifndef PFR_RECORDER_JAVA_JFR_PARSE_H
#define PFR_RECORDER_JAVA_JFR_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JFR_HEADER_SIZE     68
#define JFR_MAX_META_DEPTH  32         /* of the metadata element tree (the JDK's is 5 deep) */
#define JFR_MAX_VALUE_DEPTH 32         /* of values nested in values (the JDK's are 3 deep) */
#define JFR_MAX_CLASSES     65536      /* per metadata (JDK 17 declares ~200) */
#define JFR_MAX_FIELDS      (1u << 20) /* per metadata, all classes */
#define JFR_MAX_FIELDS_READ 8          /* per pfr_jfr_event_read call */
#define JFR_CARRY_CHUNKS    4          /* earlier chunks kept for lookups (max_carry_bytes) */

typedef struct jfr_limits {
    size_t max_bytes;        /* of the recording */
    size_t max_events;       /* records of every kind, per recording */
    size_t max_pool_entries; /* per constant pool type, per chunk */
    size_t max_frames;       /* stack frames kept, all stack traces of a chunk */
    /* The last JFR_CARRY_CHUNKS chunks, as many as hold at most this many bytes of parsed
     * state together, are kept while the next ones are read (pfr_jfr_chunk_prev); 0: none. */
    size_t max_carry_bytes;
} jfr_limits;

typedef struct jfr_chunk jfr_chunk;

enum jfr_record_kind {
    JFR_REC_METADATA,   /* type id 0 */
    JFR_REC_CHECKPOINT, /* type id 1 */
    JFR_REC_EVENT,      /* a type the metadata declares */
    JFR_REC_UNKNOWN,    /* a type it does not (the JDK skips those too) */
};

typedef struct jfr_record {
    enum jfr_record_kind kind;
    uint32_t cls; /* class index (pfr_jfr_class_name) for JFR_REC_EVENT */
    uint64_t type_id;
    const uint8_t *body; /* the fields, after the size and the type id */
    size_t len;
} jfr_record;

/* Callbacks, each may be NULL; a negative return stops the parse with that error. */
typedef struct jfr_visitor {
    void *ctx;
    int (*chunk_begin)(void *ctx, const jfr_chunk *c);
    int (*record)(void *ctx, const jfr_chunk *c, const jfr_record *rec);
    int (*chunk_end)(void *ctx, const jfr_chunk *c);
} jfr_visitor;

typedef struct jfr_parse_stats {
    uint64_t chunks;    /* whole chunks read */
    uint64_t records;   /* of every kind */
    uint64_t events;    /* JFR_REC_EVENT records */
    bool truncated;     /* a last chunk cut short (or still being written) was left out */
    uint64_t uncarried; /* chunks not kept for the next ones: alone past max_carry_bytes */
} jfr_parse_stats;

/* Parses buf[0..len). Returns 0, or a negative errno with a reason in err: -EINVAL (not JFR or
 * malformed), -E2BIG (a limit), -ENOMEM, or a visitor's error. A last chunk cut short is left
 * out (st->truncated); when it is the first chunk, that is -EINVAL. */
int pfr_jfr_parse(const uint8_t *buf, size_t len, const jfr_limits *lim, const jfr_visitor *v,
                  jfr_parse_stats *st, char *err, size_t errlen);

/* ---- a chunk, valid from chunk_begin to chunk_end ---- */
int64_t pfr_jfr_chunk_start_ns(const jfr_chunk *c); /* unix ns */
int64_t pfr_jfr_chunk_duration_ns(const jfr_chunk *c);
int64_t pfr_jfr_ticks_to_unix_ns(const jfr_chunk *c, int64_t ticks); /* a timestamp */
int64_t pfr_jfr_ticks_to_ns(const jfr_chunk *c, int64_t ticks);      /* a duration */

size_t pfr_jfr_num_classes(const jfr_chunk *c);
const char *pfr_jfr_class_name(const jfr_chunk *c, uint32_t cls);
/* Index of the class named name, or -1. */
int64_t pfr_jfr_class_find(const jfr_chunk *c, const char *name);
/* Position of field name among cls's fields that have bytes on the wire, or -1 (absent, or a
 * field that cannot hold an integer: arrays, strings, floats, structs). */
int pfr_jfr_field_find(const jfr_chunk *c, uint32_t cls, const char *name);

/* Reads the integer fields at positions pos[0..n) (n <= JFR_MAX_FIELDS_READ, from
 * pfr_jfr_field_find; -1 is skipped) of an event: vals[i] receives field pos[i], bit i of *found is
 * set when it was read. A constant pool field gives its key. 0 or -EINVAL (malformed record). */
int pfr_jfr_event_read(const jfr_chunk *c, const jfr_record *rec, const int *pos, size_t n,
                       int64_t *vals, uint32_t *found);

/* ---- the constant pools pfr keeps ---- */
typedef struct jfr_frame {
    uint64_t method; /* a jfr_method key */
    int32_t line;    /* the JFR line number (-1 or 0 when unknown) */
    bool has_method;
} jfr_frame;

typedef struct jfr_stack {
    size_t index;            /* 0..jfr_num_stacks-1, for per-stack caches */
    const jfr_frame *frames; /* leaf first */
    size_t n;
    bool truncated; /* the JVM cut it (deeper than the recording's stackdepth) */
} jfr_stack;

size_t pfr_jfr_num_stacks(const jfr_chunk *c);
/* The newest chunk read before c that is kept (jfr_limits.max_carry_bytes) while c's records
 * are visited, or NULL; called on that one, the one kept before it. Only their pools are to be
 * read (pfr_jfr_stack_get, pfr_jfr_method_get): the JVM writes events whose stack trace their
 * chunk's pools do not hold, but an earlier chunk's do (a monitor enter takes its stack when
 * the wait begins and is written when it ends, after a rotation or more). Stack keys are not
 * reused within a recording, so the first chunk back that holds one holds the right stack. */
const jfr_chunk *pfr_jfr_chunk_prev(const jfr_chunk *c);
/* The stack trace with constant pool key key. 0 or -ENOENT. */
int pfr_jfr_stack_get(const jfr_chunk *c, uint64_t key, jfr_stack *out);
/* The method with key key: its class's name and its own name as the JVM stores them ("" when
 * a reference is missing). 0 or -ENOENT when the method itself is missing. */
int pfr_jfr_method_get(const jfr_chunk *c, uint64_t key, const char **cls, const char **name);

#endif
