#include "sym_file.h"
#include "sym_demangle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint32_t pfr_symfile_sym_name(struct pfr_sym_file *f, const struct pfr_sym_elf_sym *sym)
{
    uint64_t idx = (uint64_t)(sym - f->syms.v), v;
    if (pfr_sym_hmap_get(&f->named, idx, 0, &v))
        return (uint32_t)v;
    uint32_t off = PFR_STR_NONE;
    char small[512], *big = NULL;
    const char *raw = NULL;
    if (!f->syms.lazy) {
        raw = pfr_sym_strpool_get(&f->syms.names, sym->name);
    } else {
        int n = pfr_sym_elf_read_name(&f->syms, f->fd, sym, small, sizeof(small));
        if (n == -ENAMETOOLONG && (big = malloc(PFR_ELF_MAX_NAME)) != NULL)
            n = pfr_sym_elf_read_name(&f->syms, f->fd, sym, big, PFR_ELF_MAX_NAME);
        if (n >= 0)
            raw = big ? big : small;
        else
            f->name_errors++;
    }
    if (raw) {
        /* demangling every name at parse time would cost tens of ms on big C++ binaries */
        char *d = pfr_sym_demangle(raw);
        if (d)
            off = pfr_sym_strpool_add(&f->syms.names, d, strlen(d));
        else if (f->syms.lazy)
            off = pfr_sym_strpool_add(&f->syms.names, raw, strlen(raw));
        else
            off = sym->name;
        if (off == PFR_STR_NONE && !f->syms.lazy)
            off = sym->name; /* out of memory: the mangled name still names it */
        free(d);
    }
    free(big);
    pfr_sym_hmap_put(&f->named, idx, 0, off); /* on failure, only not memoized */
    return off;
}

uint32_t pfr_symfile_intern_name(struct pfr_sym_file *f, const char *name)
{
    char *d = pfr_sym_demangle(name);
    const char *s = d ? d : name;
    uint32_t off = pfr_sym_strpool_intern(&f->syms.names, s, strlen(s));
    free(d);
    return off;
}

const struct pfr_sym_rec *pfr_symfile_memo_get(const struct pfr_sym_file *f, uint64_t vaddr,
                                               size_t *n)
{
    uint64_t v;
    if (!pfr_sym_hmap_get(&f->memo, vaddr, 0, &v))
        return NULL;
    *n = v & 0xff;
    return &f->recs[v >> 8];
}

int pfr_symfile_memo_put(struct pfr_sym_file *f, uint64_t vaddr, const struct pfr_sym_rec *r,
                         size_t n)
{
    if (n == 0 || n > 0xff)
        return -EINVAL;
    if (f->memo.n >= PFR_FILE_MAX_MEMO) {
        /* a bounded memo: start over rather than track recency per address */
        pfr_sym_hmap_clear(&f->memo);
        f->nrecs = 0;
    }
    if (f->nrecs + n > f->caprecs) {
        size_t ncap = f->caprecs ? f->caprecs * 2 : 256;
        while (ncap < f->nrecs + n)
            ncap *= 2;
        struct pfr_sym_rec *nr = realloc(f->recs, ncap * sizeof(*nr));
        if (!nr)
            return -ENOMEM;
        f->recs = nr;
        f->caprecs = ncap;
    }
    uint64_t v = (uint64_t)f->nrecs << 8 | n;
    if (pfr_sym_hmap_put(&f->memo, vaddr, 0, v) != 0)
        return -ENOMEM;
    memcpy(&f->recs[f->nrecs], r, n * sizeof(*r));
    f->nrecs += n;
    return 0;
}

size_t pfr_symfile_bytes(const struct pfr_sym_file *f)
{
    return sizeof(*f) + pfr_sym_elf_syms_bytes(&f->syms) + pfr_sym_hmap_bytes(&f->named) +
           pfr_sym_dwarf_bytes(f->dwarf) + pfr_sym_gopcln_bytes(f->gopcln) +
           pfr_sym_hmap_bytes(&f->memo) + f->caprecs * sizeof(struct pfr_sym_rec) +
           f->caplinks * sizeof(struct pfr_symfile_link);
}

void pfr_symfile_free(struct pfr_sym_file *f)
{
    if (!f)
        return;
    pfr_sym_elf_syms_free(&f->syms);
    pfr_sym_hmap_free(&f->named);
    pfr_sym_dwarf_close(f->dwarf);
    pfr_sym_gopcln_free(f->gopcln);
    if (f->fd >= 0)
        close(f->fd);
    pfr_sym_hmap_free(&f->memo);
    free(f->recs);
    free(f->links);
    free(f);
}
