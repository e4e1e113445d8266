/*
 * pfr_gzip: gzip (RFC 1952) over zlib, the one encoder and decoder of pfr: pprof bodies, request
 * bodies sent as they are made, compressed HTTP responses. Output is appended to a pfr_buf
 * (common/pfr_buf.h) that the caller owns.
 *
 * Tiers: one-shot pfr_gzip / pfr_gunzip first, then the stream that is fed piece by piece.
 * Functions return 0 or a negative errno; pfr_gunzip also writes a reason into err.
 */
#ifndef PFR_GZIP_H
#define PFR_GZIP_H

#include <stdbool.h>
#include <stddef.h>

#include "pfr_buf.h"

/* zlib's default level (6). Levels run 1 (fast) to 9 (small). */
#define PFR_GZIP_DEFAULT_LEVEL (-1)

/* Append the gzip of len bytes of in, at level, onto out.
 * @return 0, -EINVAL (level out of range), or -ENOMEM. */
int pfr_gzip(const void *in, size_t len, int level, pfr_buf *out);

/* Append the decompressed bytes of one gzip stream or several concatenated ones onto out, at most
 * max bytes (input is untrusted: a bomb stops at max).
 * @return 0; -EBADMSG with a reason in err for a corrupt, truncated or oversized stream or
 * trailing garbage; -ENOMEM. On error out keeps what was written before the call. */
int pfr_gunzip(const void *in, size_t len, size_t max, pfr_buf *out, char *err, size_t errlen);

/* A gzip stream made piece by piece: opened by the first piece, closed by the last (or by
 * pfr_gzip_stream_end). A zeroed struct is a stream not yet begun. */
typedef struct pfr_gzip_stream {
    void *z; /* owned: zlib's stream, NULL before the first piece and after the last */
} pfr_gzip_stream;

/* Compress len bytes of in at level (fixed by the first piece) onto the end of out; last ends the
 * stream (its trailer follows). @return 0, -EINVAL (bad level), or -ENOMEM (the stream ended). */
int pfr_gzip_stream_put(pfr_gzip_stream *g, int level, const void *in, size_t len, bool last,
                        pfr_buf *out);
/* Drop a stream that will not be finished. Safe on an ended or zeroed stream. */
void pfr_gzip_stream_end(pfr_gzip_stream *g);

#endif
