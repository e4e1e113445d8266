#include "sym_gopcln.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PCDATA_INLTREE 2
#define MAX_STEPS      (1u << 20) /* pc-value pairs decoded for one lookup */

enum ver { GO116, GO118, GO120 };

struct pfr_sym_gopcln {
    uint8_t *d; /* owned copy of the section */
    size_t size;
    enum ver ver;
    unsigned ptr, quantum;
    uint64_t nfunc, text;
    uint64_t funcname, cu, filetab, pctab, pcln; /* offsets of the sub-tables in d */
};

static bool in(const struct pfr_sym_gopcln *g, uint64_t off, uint64_t len)
{
    return off <= g->size && len <= g->size - off;
}

static uint32_t u32(const struct pfr_sym_gopcln *g, uint64_t off)
{
    uint32_t v;
    memcpy(&v, g->d + off, 4); /* little-endian hosts only, like the recorder itself */
    return v;
}

static uint64_t word(const struct pfr_sym_gopcln *g, uint64_t off)
{
    if (g->ptr == 4)
        return u32(g, off);
    uint64_t v;
    memcpy(&v, g->d + off, 8);
    return v;
}

/* A NUL-terminated string at off within [base, end of table), or NULL. */
static const char *str_at(const struct pfr_sym_gopcln *g, uint64_t off)
{
    if (off >= g->size)
        return NULL;
    return memchr(g->d + off, '\0', g->size - off) ? (const char *)g->d + off : NULL;
}

static int parse_header(struct pfr_sym_gopcln *g, char *err, size_t errlen)
{
    if (g->size < 16) {
        snprintf(err, errlen, ".gopclntab too small");
        return -EINVAL;
    }
    uint32_t magic = u32(g, 0);
    g->ver = magic == 0xfffffffa ? GO116 : magic == 0xfffffff0 ? GO118 : GO120;
    if (magic != 0xfffffffa && magic != 0xfffffff0 && magic != 0xfffffff1) {
        snprintf(err, errlen, "unsupported .gopclntab magic %#x (Go before 1.16?)", magic);
        return -ENOTSUP;
    }
    g->quantum = g->d[6];
    g->ptr = g->d[7];
    if ((g->ptr != 4 && g->ptr != 8) || g->quantum == 0 || g->quantum > 8) {
        snprintf(err, errlen, "bad .gopclntab header");
        return -EINVAL;
    }
    unsigned nwords = g->ver == GO116 ? 7 : 8;
    if (!in(g, 8, (uint64_t)nwords * g->ptr)) {
        snprintf(err, errlen, ".gopclntab header truncated");
        return -EINVAL;
    }
    uint64_t w[8];
    for (unsigned i = 0; i < nwords; i++)
        w[i] = word(g, 8 + (uint64_t)i * g->ptr);
    unsigned k = 2;
    g->nfunc = w[0];
    if (g->ver != GO116) {
        if (w[2])
            g->text = w[2]; /* else left to a relocation (PIE): keep .text's address */
        k = 3;
    }
    g->funcname = w[k];
    g->cu = w[k + 1];
    g->filetab = w[k + 2];
    g->pctab = w[k + 3];
    g->pcln = w[k + 4];
    uint64_t ent = g->ver == GO116 ? 2ull * g->ptr : 8;
    if (g->funcname >= g->size || g->cu >= g->size || g->filetab >= g->size ||
        g->pctab >= g->size || g->nfunc == 0 || g->nfunc > g->size / ent ||
        !in(g, g->pcln, (g->nfunc + 1) * ent)) {
        snprintf(err, errlen, ".gopclntab offsets out of range");
        return -EINVAL;
    }
    return 0;
}

/* A table over d (malloc'ed, size bytes, taken over: freed on failure). */
static int take(uint8_t *d, size_t size, uint64_t text_start, struct pfr_sym_gopcln **out,
                char *err, size_t errlen)
{
    struct pfr_sym_gopcln *g = calloc(1, sizeof(*g));
    if (!g) {
        free(d);
        return -ENOMEM;
    }
    g->d = d;
    g->size = size;
    g->text = text_start;
    int rc = parse_header(g, err, errlen);
    if (rc) {
        pfr_sym_gopcln_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

int pfr_sym_gopcln_open_mem(const uint8_t *data, size_t size, uint64_t text_start,
                            struct pfr_sym_gopcln **out, char *err, size_t errlen)
{
    *out = NULL;
    uint8_t *d = malloc(size ? size : 1);
    if (!d)
        return -ENOMEM;
    if (size)
        memcpy(d, data, size);
    return take(d, size, text_start, out, err, errlen);
}

/* The section's bytes from fd into a new buffer; NULL when outside the file or unreadable. */
static uint8_t *read_section(int fd, const GElf_Shdr *sh)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || sh->sh_offset > (uint64_t)st.st_size ||
        sh->sh_size > (uint64_t)st.st_size - sh->sh_offset)
        return NULL;
    uint8_t *d = malloc(sh->sh_size ? sh->sh_size : 1);
    for (size_t got = 0; d && got < sh->sh_size;) {
        ssize_t r = pread(fd, d + got, sh->sh_size - got, (off_t)(sh->sh_offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(d);
            return NULL;
        }
        got += (size_t)r;
    }
    return d;
}

int pfr_sym_gopcln_open(Elf *e, int fd, size_t max_bytes, struct pfr_sym_budget *b,
                        struct pfr_sym_gopcln **out, char *err, size_t errlen)
{
    *out = NULL;
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx) != 0)
        return -ENODATA;
    Elf_Scn *scn = NULL, *pcln = NULL;
    uint64_t text = 0;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstrndx, sh.sh_name)))
            continue;
        if (strcmp(name, ".gopclntab") == 0 && sh.sh_type == SHT_PROGBITS)
            pcln = scn;
        else if (strcmp(name, ".text") == 0)
            text = sh.sh_addr;
    }
    if (!pcln)
        return -ENODATA;
    GElf_Shdr sh;
    if (!gelf_getshdr(pcln, &sh) || sh.sh_size > max_bytes) {
        snprintf(err, errlen, ".gopclntab larger than %zu bytes", max_bytes);
        return pfr_sym_refuse(b, PFR_REFUSED_TOO_BIG, -EFBIG);
    }
    int rc;
    if (fd >= 0) {
        uint8_t *d = read_section(fd, &sh);
        if (!d) {
            snprintf(err, errlen, "cannot read .gopclntab: outside the file or unreadable");
            return pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, -EINVAL);
        }
        rc = take(d, sh.sh_size, text, out, err, errlen);
    } else {
        Elf_Data *d = elf_rawdata(pcln, NULL);
        if (!d || !d->d_buf) {
            snprintf(err, errlen, "cannot read .gopclntab: %s", elf_errmsg(-1));
            return pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, -EINVAL);
        }
        rc = pfr_sym_gopcln_open_mem(d->d_buf, d->d_size, text, out, err, errlen);
    }
    return rc == -EINVAL ? pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, rc) : rc;
}

static bool uvarint(const struct pfr_sym_gopcln *g, uint64_t *p, uint32_t *v)
{
    uint32_t x = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        if (*p >= g->size)
            return false;
        uint8_t b = g->d[(*p)++];
        x |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Value of the pc-value table at off for pc (both relative to the function's entry). */
static bool pcvalue(const struct pfr_sym_gopcln *g, uint32_t off, uint64_t target, int32_t *out)
{
    if (off == 0)
        return false; /* no table */
    uint64_t p = g->pctab + off, pc = 0;
    int32_t val = -1;
    for (unsigned step = 0; step < MAX_STEPS; step++) {
        uint32_t uv, pcd;
        if (!uvarint(g, &p, &uv) || (uv == 0 && step > 0))
            return false;
        /* zig-zag delta; hostile tables may overflow, so wrap as the runtime's int32 would */
        val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
        if (!uvarint(g, &p, &pcd))
            return false;
        pc += (uint64_t)pcd * g->quantum;
        if (target < pc) {
            *out = val;
            return true;
        }
    }
    return false;
}

/* Index of the function holding rel (pc relative to text, or absolute before 1.18). */
static bool find_func(const struct pfr_sym_gopcln *g, uint64_t pc, uint64_t *entry, uint64_t *foff)
{
    uint64_t ent = g->ver == GO116 ? 2ull * g->ptr : 8;
    uint64_t lo = 0, hi = g->nfunc;
#define ENTRY(i) (g->ver == GO116 ? word(g, g->pcln + (i)*ent) : u32(g, g->pcln + (i)*ent))
    if (pc < ENTRY(0) || pc >= ENTRY(g->nfunc))
        return false;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ENTRY(mid) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    *entry = ENTRY(lo);
#undef ENTRY
    uint64_t at = g->pcln + lo * ent + (g->ver == GO116 ? g->ptr : 4);
    *foff = g->ver == GO116 ? word(g, at) : u32(g, at);
    return true;
}

int pfr_sym_gopcln_lookup(const struct pfr_sym_gopcln *g, uint64_t vaddr,
                          struct pfr_sym_gopcln_frame *out)
{
    if (!g)
        return 0;
    uint64_t pc = vaddr, entry, foff;
    if (g->ver != GO116) {
        if (vaddr < g->text)
            return 0;
        pc = vaddr - g->text;
    }
    if (!find_func(g, pc, &entry, &foff))
        return 0;
    /* _func: [entry], nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset, ... */
    uint64_t f = g->pcln + foff, base = g->ver == GO116 ? g->ptr : 4;
    uint64_t fixed = base + 32 + (g->ver == GO120 ? 8 : 4);
    if (!in(g, f, fixed))
        return 0;
    const char *name = str_at(g, g->funcname + u32(g, f + base));
    if (!name)
        return 0;
    *out = (struct pfr_sym_gopcln_frame){name, NULL, 0};
    uint64_t rel = pc - entry;
    uint32_t npcdata = u32(g, f + base + 24), cuoff = u32(g, f + base + 28);
    int32_t inl = -1, fileno, line;
    if (npcdata > PCDATA_INLTREE && in(g, f + fixed, 4ull * (PCDATA_INLTREE + 1))) {
        uint32_t tab = u32(g, f + fixed + 4 * PCDATA_INLTREE);
        if (tab && !pcvalue(g, tab, rel, &inl))
            inl = -1;
    }
    if (inl >= 0)
        return 1; /* inside an inlined call: the line would be the callee's */
    if (pcvalue(g, u32(g, f + base + 20), rel, &line) && line > 0)
        out->line = line;
    if (pcvalue(g, u32(g, f + base + 16), rel, &fileno) && fileno >= 0) {
        uint64_t at = g->cu + 4 * ((uint64_t)cuoff + (uint64_t)fileno);
        if (in(g, at, 4) && u32(g, at) != UINT32_MAX)
            out->file = str_at(g, g->filetab + u32(g, at));
    }
    return 1;
}

size_t pfr_sym_gopcln_bytes(const struct pfr_sym_gopcln *g)
{
    return g ? sizeof(*g) + g->size : 0;
}

void pfr_sym_gopcln_free(struct pfr_sym_gopcln *g)
{
    if (!g)
        return;
    free(g->d);
    free(g);
}
