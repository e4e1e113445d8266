/* goheap_memo: resolved frames of one executable's addresses, kept across collections and
 * processes so each address is resolved once. Strings are interned in one pool. */
#ifndef PFR_GOHEAP_MEMO_H
#define PFR_GOHEAP_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "pfr_map.h"
#include "pfr_goheap.h"

#define PFR_GOHEAP_MEMO_MAX_INLINE 32u /* frames kept per address */

typedef struct pfr_goheap_mframe {
    uint32_t function, file; /* offsets into the pool */
    int64_t line;
} pfr_goheap_mframe;

typedef struct pfr_goheap_memo {
    pfr_map index; /* address (file-relative) -> first frame << 8 | count */
    pfr_goheap_mframe *frames;
    size_t nframes, cap_frames;
    char *pool;
    size_t pool_len, pool_cap;
    pfr_map strings; /* string hash -> pool offset + 1 */
} pfr_goheap_memo;

/* 1 and the frames if key was stored (count may be 0: "could not resolve"), else 0. The
 * pointer is valid until the next put. */
int pfr_goheap_memo_get(const pfr_goheap_memo *m, uint64_t key, const pfr_goheap_mframe **fr,
                        size_t *n);
/* Store n frames (at most PFR_GOHEAP_MEMO_MAX_INLINE kept) for key: 0 or -ENOMEM. */
int pfr_goheap_memo_put(pfr_goheap_memo *m, uint64_t key, const pfr_goheap_frame *fr, size_t n);
static inline const char *pfr_goheap_memo_str(const pfr_goheap_memo *m, uint32_t off)
{
    return m->pool + off;
}
size_t pfr_goheap_memo_entries(const pfr_goheap_memo *m);
void pfr_goheap_memo_clear(pfr_goheap_memo *m);
void pfr_goheap_memo_free(pfr_goheap_memo *m);

#endif
