#include "gzstream.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

void pfr_gzstream_end(pfr_gzstream *g)
{
    if (!g->z)
        return;
    deflateEnd(g->z);
    free(g->z);
    g->z = NULL;
}

int pfr_gzstream_put(pfr_gzstream *g, int level, const void *in, size_t len, bool last,
                     pfr_buf *out)
{
    if (len > UINT32_MAX) {
        pfr_gzstream_end(g);
        return -ENOMEM;
    }
    if (!g->z) {
        z_stream *z = calloc(1, sizeof(*z));
        if (!z)
            return -ENOMEM;
        if (deflateInit2(z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(z);
            return -ENOMEM;
        }
        g->z = z;
    }
    z_stream *z = g->z;
    z->next_in = (Bytef *)(uintptr_t)in;
    z->avail_in = (uInt)len;
    int flush = last ? Z_FINISH : Z_NO_FLUSH, rc;
    do {
        /* Room for what the input can become (deflateBound), at least a trailer's worth. */
        if (pfr_buf_reserve(out, deflateBound(z, z->avail_in) + 64) < 0) {
            pfr_gzstream_end(g);
            return -ENOMEM;
        }
        z->next_out = out->data + out->len;
        z->avail_out = (uInt)(out->cap - out->len - 1);
        uInt before = z->avail_out;
        rc = deflate(z, flush);
        out->len += before - z->avail_out;
        if (rc == Z_STREAM_ERROR) {
            pfr_gzstream_end(g);
            return -ENOMEM;
        }
    } while (z->avail_in || (last && rc != Z_STREAM_END) || (!last && z->avail_out == 0));
    if (last)
        pfr_gzstream_end(g);
    return 0;
}
