/*
 * jfrgen: writes JFR chunks for the parser's tests and fuzz seeds: a small, valid recording with
 * the classes, pools and events pfr reads (and one it skips), and the pieces to make hostile
 * ones (a metadata record from a class table, with extra nesting; a checkpoint; headers with
 * any offsets).
 */
#ifndef PFR_TESTS_JAVA_JFRGEN_H
#define PFR_TESTS_JAVA_JFRGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jg {
    uint8_t *b;
    size_t n, cap;
} jg;

void pfr_jg_free(jg *g);
void pfr_jg_bytes(jg *g, const void *p, size_t n);
void pfr_jg_u8(jg *g, uint8_t v);
void pfr_jg_var(jg *g, uint64_t v);
void pfr_jg_be64(jg *g, uint64_t v);
void pfr_jg_str(jg *g, const char *s); /* encoding 3, UTF-8 */
/* A record: the size (4-byte padded varint, as the JDK writes it), the type, the body. */
void pfr_jg_record(jg *g, uint64_t type, const jg *body);

typedef struct jg_field {
    const char *name;
    uint64_t type;
    bool cpool, array;
} jg_field;

typedef struct jg_class {
    uint64_t id;
    const char *name;
    jg_field fields[8];
} jg_class;

/* Class ids of the standard table (pfr_jg_std_classes). */
enum {
    JG_BOOLEAN = 100,
    JG_INT,
    JG_LONG,
    JG_DOUBLE,
    JG_STRING,
    JG_SYMBOL,
    JG_CLASS,
    JG_METHOD,
    JG_FRAME,
    JG_STACK,
    JG_THREAD,
    JG_EXEC,
    JG_ALLOC,
    JG_MONITOR,
    JG_PARK,
    JG_CPULOAD,
};
extern const jg_class pfr_jg_std_classes[];
extern const size_t pfr_jg_std_nclasses;

/* A metadata record of classes[0..n), its class elements wrapped in extra_depth more levels
 * of elements (the JDK's tree is 5 deep). */
void pfr_jg_metadata(jg *g, const jg_class *classes, size_t n, int extra_depth);
/* A checkpoint record: delta to the previous one, npools pools already written in pools. */
void pfr_jg_checkpoint(jg *g, int64_t delta, uint64_t npools, const jg *pools);
/* The standard pools: symbols, classes, methods, two stack traces, a thread. */
void pfr_jg_std_pools(jg *pools, uint64_t *npools);
/* The same, stack trace 2 left out when stack2 is false: a chunk whose events refer to a stack
 * that only an earlier chunk's pools hold (the JVM writes such events; see test_jfr_unit). */
void pfr_jg_std_pools_with(jg *pools, uint64_t *npools, bool stack2);
/* The standard events: 3 execution samples on stack 1 and 1 on stack 2 (the lambda), an
 * allocation sample (weight 4096, stack 1), a monitor enter (5 ms, stack 2), a thread park and
 * a CPU load (skipped); start ticks from 1000, one per event. */
void pfr_jg_std_events(jg *events);

typedef struct jg_header {
    uint64_t size, cp_off, md_off;
    int64_t start_ns, duration_ns, start_ticks, tps;
    uint8_t state;
} jg_header;
void pfr_jg_chunk_header(jg *g, const jg_header *h);

/* A whole standard chunk (start 1e18 ns, ticks = ns): header, events, metadata, one
 * checkpoint. */
void pfr_jg_std_chunk(jg *g);

#endif
