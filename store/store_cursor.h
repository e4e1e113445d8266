/* Cursors (layer 4, internal; the public calls are in pfr_store.h). */
#ifndef PFR_STORE_CURSOR_H
#define PFR_STORE_CURSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "store_handle.h"

/* The registered consumers' smallest cursor (*any false when there is none). */
int pfr_st_cursors_min(pfr_store *s, int64_t *min_cursor, bool *any);

#endif
