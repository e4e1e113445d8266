/*
 * Schema (layer 3, internal): a writer creates the schema or migrates an older file, one
 * function per step, in one transaction; a reader checks the file is one it reads. Layers:
 * docs/store.md, "Layers".
 */
#ifndef PFR_STORE_MIGRATE_H
#define PFR_STORE_MIGRATE_H

#include <stddef.h>

#include "store_db.h"
#include "store_dict.h"

#define PFR_STORE_SCHEMA_VERSION 5
/* The oldest version a reader reads as it is: 4 has the tables of 5 and no chain of several
 * streams, which a reader of 5 reads as well. */
#define PFR_STORE_SCHEMA_READ_MIN 4
#define PFR_STORE_APP_ID          0x70667221 /* "pfr!" in the SQLite header: our files, not others' */

/* A writer: create the schema in an empty file or migrate an older one. */
int pfr_st_schema_write(struct store_db *d, struct store_dict *dict, char *err, size_t errlen);
/* A reader: the file must be a pfr store of a schema version it reads (READ_MIN to VERSION). */
int pfr_st_schema_check(struct store_db *d, char *err, size_t errlen);

#endif
