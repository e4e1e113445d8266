/*
 * The handle (layer 3, internal): what a pfr_store is made of. The floor's connection, the
 * dictionary layer's caches, the disk state, and the writer's state (store_write.c). The modules
 * above (cursors, writer, readers, slices) and pfr_store.c (open, close, stats) use it. Layers:
 * docs/store.md, "Layers".
 */
#ifndef PFR_STORE_HANDLE_H
#define PFR_STORE_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

#include "pfr_store.h"
#include "store_db.h"
#include "store_dict.h"
#include "store_space.h"

struct writer;

struct pfr_store {
    struct store_db sql;    /* the floor: connection and kept statements */
    struct store_dict dict; /* stream rows and decoded chains, read through sql */
    char *path, *cursor_dir;
    bool read_only;
    uint64_t max_bytes;
    uint64_t pin_max_bytes; /* a writer's pin budget (pfr_store_opts.pin_max_bytes) */
    uint64_t
        table_max_bytes;   /* a writer's tables kept in memory (pfr_store_opts.table_max_bytes) */
    pfr_store_tiers tiers; /* roll-up steps in force (resolved: pfr_st_tiers_resolve) */
    size_t fold_stacks;    /* the coarsest tier's roll-ups folded to this many entries; 0: never */
    uint64_t corrupt;      /* corrupt chunks seen by this handle's scans */
    struct writer *w;      /* store_write.c: NULL until the first append */
    struct store_space space; /* disk space: the policy's decision, the spare file */
};

#endif
