/* gzstream: gzip (RFC 1952) made piece by piece, for request bodies that are sent as they are
 * made. Open at the first piece, closed by the last one (or by pfr_gzstream_end). */
#ifndef PFR_SHIP_GZSTREAM_H
#define PFR_SHIP_GZSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

typedef struct pfr_gzstream {
    void *z; /* owned: zlib's stream, NULL until the first piece and after the last */
} pfr_gzstream;

/* Compress len (< 4 GiB) bytes at level (1..9, or -1 for zlib's default) onto the end of out; last
 * ends the stream (its trailer follows). 0 or -ENOMEM. */
int pfr_gzstream_put(pfr_gzstream *g, int level, const void *in, size_t len, bool last,
                     pfr_buf *out);
/* Drop a stream that will not be finished. */
void pfr_gzstream_end(pfr_gzstream *g);

#endif
