#include "pfr_goheap_sym.h"

#include "goheap_memo.h"

static int sym_begin(void *ctx, pid_t pid)
{
    /* the mappings may have changed since the CPU profiler took its snapshot */
    return pfr_symbolizer_add_process(ctx, pid);
}

static int sym_resolve(void *ctx, pid_t pid, uint64_t addr, pfr_goheap_frame *out, size_t cap)
{
    pfr_sym_frame fr[PFR_GOHEAP_MEMO_MAX_INLINE];
    if (cap > PFR_GOHEAP_MEMO_MAX_INLINE)
        cap = PFR_GOHEAP_MEMO_MAX_INLINE;
    int n = pfr_symbolize_user(ctx, pid, addr, fr, cap);
    for (int i = 0; i < n; i++)
        out[i] = (pfr_goheap_frame){fr[i].function, fr[i].file, fr[i].line};
    return n;
}

pfr_goheap_resolver pfr_goheap_sym_resolver(pfr_symbolizer *s)
{
    pfr_goheap_resolver r = {.ctx = s, .begin = sym_begin, .resolve = sym_resolve};
    return r;
}
