/* pfr_gzip: gzip over zlib (see pfr_gzip.h). zlib counts in 32 bits, so large inputs are fed in
 * pieces of at most UINT32_MAX bytes. */
#include "pfr_gzip.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

/* windowBits 15 + 16: a gzip wrapper, as Go's pprof writer and HTTP's Content-Encoding want. */
#define GZIP_WBITS (15 + 16)

void pfr_gzip_stream_end(pfr_gzip_stream *g)
{
    if (!g->z)
        return;
    deflateEnd(g->z);
    free(g->z);
    g->z = NULL;
}

static int stream_begin(pfr_gzip_stream *g, int level)
{
    if (level != PFR_GZIP_DEFAULT_LEVEL && (level < 1 || level > 9))
        return -EINVAL;
    z_stream *z = calloc(1, sizeof(*z));
    if (!z)
        return -ENOMEM;
    if (deflateInit2(z, level, Z_DEFLATED, GZIP_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(z);
        return -ENOMEM;
    }
    g->z = z;
    return 0;
}

/* Deflate one piece (< 4 GiB) with flush onto out. 0 or -ENOMEM. */
static int deflate_piece(z_stream *z, const uint8_t *in, uInt len, int flush, pfr_buf *out)
{
    z->next_in = (Bytef *)(uintptr_t)in;
    z->avail_in = len;
    int rc;
    do {
        /* Room for what the input can become (deflateBound), at least a trailer's worth; the
         * spare byte keeps pfr_buf_cstr from reallocating. */
        if (pfr_buf_reserve(out, deflateBound(z, z->avail_in) + 64) < 0)
            return -ENOMEM;
        size_t room = out->cap - out->len - 1;
        z->next_out = out->data + out->len;
        z->avail_out = room > UINT32_MAX ? UINT32_MAX : (uInt)room;
        uInt before = z->avail_out;
        rc = deflate(z, flush);
        out->len += before - z->avail_out;
        if (rc == Z_STREAM_ERROR)
            return -ENOMEM;
    } while (z->avail_in || (flush == Z_FINISH && rc != Z_STREAM_END) ||
             (flush != Z_FINISH && z->avail_out == 0));
    return 0;
}

int pfr_gzip_stream_put(pfr_gzip_stream *g, int level, const void *in, size_t len, bool last,
                        pfr_buf *out)
{
    if (!g->z) {
        int rc = stream_begin(g, level);
        if (rc < 0)
            return rc;
    }
    const uint8_t *p = in;
    do {
        uInt piece = len > UINT32_MAX ? UINT32_MAX : (uInt)len;
        int flush = last && piece == len ? Z_FINISH : Z_NO_FLUSH;
        if (deflate_piece(g->z, p, piece, flush, out) < 0) {
            pfr_gzip_stream_end(g);
            return -ENOMEM;
        }
        len -= piece;
        if (len) /* p may be NULL when len is 0 */
            p += piece;
    } while (len);
    if (last)
        pfr_gzip_stream_end(g);
    return 0;
}

int pfr_gzip(const void *in, size_t len, int level, pfr_buf *out)
{
    pfr_gzip_stream g = {0};
    return pfr_gzip_stream_put(&g, level, in, len, true, out);
}

/* Refuse the input: "gzip: " and why into err. @return -EBADMSG. */
static int refuse(char *err, size_t errlen, const char *why)
{
    if (err && errlen)
        snprintf(err, errlen, "gzip: %s", why);
    return -EBADMSG;
}

/* Make room in out for more output: doubling from a guess, never past max bytes in all. */
static int grow_out(pfr_buf *out, size_t start, size_t max, size_t in_len, char *err, size_t errlen)
{
    size_t used = out->len - start;
    if (used >= max) {
        char why[64];
        snprintf(why, sizeof(why), "decompressed size exceeds %zu bytes", max);
        return refuse(err, errlen, why);
    }
    size_t want = used ? used : (in_len < max / 4 ? in_len * 4 + 4096 : max);
    if (want > max - used)
        want = max - used;
    return pfr_buf_reserve(out, want + 1);
}

/* What a failed inflate() means, as an errno (with the reason in err). */
static int inflate_error(const z_stream *zs, int z, char *err, size_t errlen)
{
    if (z == Z_MEM_ERROR)
        return -ENOMEM;
    return refuse(err, errlen,
                  z == Z_BUF_ERROR ? "truncated stream"
                  : zs->msg        ? zs->msg
                                   : "corrupt stream");
}

static int inflate_all(z_stream *zs, const uint8_t *in, size_t len, size_t max, pfr_buf *out,
                       char *err, size_t errlen)
{
    size_t start = out->len, in_off = 0;
    for (;;) {
        if (out->cap - out->len <= 1 || out->len - start >= max) {
            int rc = grow_out(out, start, max, len, err, errlen);
            if (rc < 0)
                return rc;
        }
        size_t in_left = len - in_off, room = out->cap - out->len - 1;
        if (room > max - (out->len - start))
            room = max - (out->len - start);
        zs->next_in = (Bytef *)(uintptr_t)(in + in_off);
        zs->avail_in = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
        zs->next_out = out->data + out->len;
        zs->avail_out = room > UINT32_MAX ? UINT32_MAX : (uInt)room;
        uInt ai = zs->avail_in, ao = zs->avail_out;
        int z = inflate(zs, Z_NO_FLUSH);
        in_off += ai - zs->avail_in;
        out->len += ao - zs->avail_out;
        if (z == Z_STREAM_END) {
            if (in_off == len)
                return 0;
            /* Another member may follow (gzip allows concatenation); anything else is junk. */
            if (len - in_off < 2 || in[in_off] != 0x1f || in[in_off + 1] != 0x8b)
                return refuse(err, errlen, "trailing garbage after the stream");
            inflateReset(zs);
            continue;
        }
        if (z == Z_OK || (z == Z_BUF_ERROR && zs->avail_out == 0))
            continue; /* output full: grow */
        return inflate_error(zs, z, err, errlen);
    }
}

int pfr_gunzip(const void *in, size_t len, size_t max, pfr_buf *out, char *err, size_t errlen)
{
    if (out->oom)
        return -ENOMEM;
    z_stream zs = {0};
    if (inflateInit2(&zs, GZIP_WBITS) != Z_OK)
        return -ENOMEM;
    size_t start = out->len;
    int rc = inflate_all(&zs, in, len, max, out, err, errlen);
    inflateEnd(&zs);
    if (rc < 0)
        out->len = start;
    return rc;
}
