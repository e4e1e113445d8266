/*
 * jfr_internal: what the parser's files share (jfr_wire.c: bytes, strings and values;
 * jfr_meta.c: the metadata; jfr_parse.c: pools, records, chunks), and the format they read,
 * as the JDK's own reader takes it (jdk.jfr.internal.consumer.ChunkHeader, ChunkParser,
 * MetadataReader, StringParser):
 *
 *   header   "FLR\0", u16 major, u16 minor, then big-endian i64: chunk size, constant pool
 *            offset, metadata offset, start (unix ns), duration (ns), start ticks, ticks per
 *            second; u8 file state (0 = finished), 2 bytes, u8 flags. 68 bytes.
 *   record   varint size (of the whole record), varint type id, the fields.
 *   varint   7 bits a byte, low first, high bit = more; the 9th byte carries 8 bits. Every int,
 *            long, short and char is one; byte and boolean are a raw byte, float and double
 *            raw big-endian.
 *   string   u8 encoding: 0 null, 1 "", 2 constant pool key (java.lang.String), 3 UTF-8,
 *            4 UTF-16 code units as varints, 5 Latin-1; 3-5 with a varint length first.
 *   metadata (type 0) start, duration, id; a string table; then an element tree: name
 *            (string index), attributes (key, value indices), children. root > metadata >
 *            class (id, name, superType) > field (name, class = type id, constantPool,
 *            dimension) > annotation; root > region (time zone).
 *   pools    (type 1, checkpoints) start, duration, delta to the previous checkpoint (0 =
 *            first), u8 flags, a count of pools; each pool: type id, a count, and (key, value)
 *            pairs. A value is its class's fields in order: a constant pool field is a key, an
 *            array a count then elements, a struct its fields again.
 */
#ifndef PFR_RECORDER_JAVA_JFR_INTERNAL_H
#define PFR_RECORDER_JAVA_JFR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jfr_parse.h"
#include "pfr_map.h"

enum prim {
    P_STRUCT = 0,
    P_BOOLEAN,
    P_BYTE,
    P_CHAR,
    P_SHORT,
    P_INT,
    P_LONG,
    P_FLOAT,
    P_DOUBLE,
    P_STRING,
};

typedef struct field_def {
    uint32_t name; /* arena offset */
    uint32_t cls;  /* class index, once resolved */
    uint64_t type_id;
    bool cpool, array;
} field_def;

typedef struct class_def {
    uint64_t id;
    uint32_t name;            /* arena offset */
    uint32_t field0, nfields; /* declaration order, in fields[] */
    uint32_t live0, nlive;    /* the fields with bytes on the wire, in live[] */
    uint8_t prim;
    bool has_data; /* a value of it takes at least a byte */
} class_def;

/* A string: none, an arena offset, or a key into the java.lang.String pool. */
enum { S_NONE, S_ARENA, S_POOLREF };
typedef struct sref {
    uint8_t kind;
    uint64_t v;
} sref;

typedef struct class_ent {
    uint64_t name;
    bool has_name;
} class_ent;

typedef struct method_ent {
    uint64_t cls, name;
    bool has_cls, has_name;
} method_ent;

typedef struct stack_ent {
    uint32_t frame0, n;
    bool truncated;
} stack_ent;

struct jfr_chunk {
    jfr_chunk *prev; /* the newest earlier chunk kept for lookups (pfr_jfr_chunk_prev), or NULL */
    const uint8_t *base;
    size_t size;
    int64_t start_ns, duration_ns, start_ticks, tps;
    uint64_t cp_off, md_off;

    char *arena; /* NUL-terminated strings; offset 0 is "" */
    size_t alen, acap;
    class_def *classes;
    size_t nclasses, ccap;
    field_def *fields;
    size_t nfields, fcap;
    uint32_t *live;
    size_t nlive, lcap;
    pfr_map class_by_id;
    size_t *pool_n; /* entries read per class's pool */

    /* the classes whose pools are kept, and their fields' live positions (-1: absent) */
    int64_t k_stack, k_frame, k_method, k_class, k_symbol, k_string;
    int f_trunc, f_frames, f_fmethod, f_fline, f_mtype, f_mname, f_cname, f_sstring;

    pfr_map m_sym, m_str, m_cls, m_meth, m_stack;
    sref *syms, *strs;
    size_t nsyms, symcap, nstrs, strcap;
    class_ent *cents;
    size_t ncents, centcap;
    method_ent *ments;
    size_t nments, mentcap;
    stack_ent *sents;
    size_t nsents, sentcap;
    jfr_frame *frames;
    size_t nframes, framecap;
};

typedef struct jp {
    const jfr_limits *lim;
    char *err;
    size_t errlen;
    size_t records;
} jp;

typedef struct rd {
    const uint8_t *p, *end;
} rd;

/* Sets the reason (printf-style) and returns rc. */
__attribute__((format(printf, 3, 4))) int pfr_jfr_fail(jp *P, int rc, const char *fmt, ...);
#define TRUNC(P) pfr_jfr_fail((P), -EINVAL, "%s: data ends inside a value", __func__)

static inline size_t jfr_rd_left(const rd *r)
{
    return (size_t)(r->end - r->p);
}

/* jfr_wire.c */
int pfr_jfr_rd_varint(jp *P, rd *r, uint64_t *v);
int pfr_jfr_rd_u8(jp *P, rd *r, uint8_t *v);
int pfr_jfr_rd_skip(jp *P, rd *r, size_t n);
/* A count of items that each take at least min_bytes: more than the data holds is -EINVAL,
 * found before anything is allocated or looped for it. */
int pfr_jfr_rd_count(jp *P, rd *r, size_t min_bytes, const char *what, uint64_t *n);
int pfr_jfr_arena_reserve(jp *P, jfr_chunk *c, size_t more);
void pfr_jfr_arena_putc(jfr_chunk *c, char ch);
int pfr_jfr_skip_string(jp *P, rd *r);
/* Reads a string and keeps it (in the arena, or as a pool key). */
int pfr_jfr_read_string(jp *P, jfr_chunk *c, rd *r, sref *out);
/* A field that holds an integer: an integral primitive or a pool key, not an array. */
bool pfr_jfr_integral(const jfr_chunk *c, const field_def *f);
int pfr_jfr_read_int(jp *P, const jfr_chunk *c, rd *r, const field_def *f, int64_t *out);
int pfr_jfr_skip_field(jp *P, const jfr_chunk *c, rd *r, const field_def *f, int depth);
/* Skips one value of class cls (not an array, not a pool key). */
int pfr_jfr_skip_value(jp *P, const jfr_chunk *c, rd *r, uint32_t cls, int depth);
/* Reads one struct value of class cls, its integer fields at live positions want[0..n) into
 * vals (bit i of *found set for each read); skips the others. */
int pfr_jfr_read_struct(jp *P, const jfr_chunk *c, rd *r, uint32_t cls, const int *want, size_t n,
                        int64_t *vals, uint32_t *found, int depth);

/* jfr_meta.c */
/* The chunk's metadata record: classes, fields, their layout, the pools pfr keeps. */
int pfr_jfr_parse_metadata(jp *P, jfr_chunk *c);
/* Position of field name among cls's live fields, or -1. */
int pfr_jfr_live_pos(const jfr_chunk *c, int64_t cls, const char *name);
const field_def *pfr_jfr_live_field(const jfr_chunk *c, int64_t cls, int pos);

#endif
