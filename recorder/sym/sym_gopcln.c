#include "sym_gopcln.h"
#include "sym_elf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PCDATA_INLTREE 2
#define MAX_STEPS      (1u << 20) /* pc-value pairs decoded for one lookup */
#define NAME_CAP       4096       /* longest function or file name read through the file */
#define NAME_FIRST     160        /* bytes of a name read first (most are shorter) */
#define WINDOW                                                                                     \
    1024 /* bytes of pc-value tables read at a time: a function's are                              \
          * written together, so one read holds its three */

enum ver { GO116, GO118, GO120 };

/* A part of the section copied into memory. */
struct part {
    uint64_t lo; /* section offset */
    size_t len;
    uint8_t *buf; /* owned */
};

/* The table is read where it lies: in memory (open_mem, d), or in the file through fd (open:
 * what every lookup searches or shares is copied, the function table and the compilation units'
 * file tables; a lookup reads its function's record, name and pc-value tables with pread,
 * three reads). The Go compiler's table is 4.4 MB, those parts 0.18 MB: a file passing through
 * the symbol cache is read again at a fortieth of the cost and holds a twentieth of the
 * memory. */
struct pfr_sym_gopcln {
    uint8_t *d; /* owned copy of the whole section (open_mem), else NULL */
    int fd;     /* not owned: the file's, open as long as the table is used */
    uint64_t off;
    size_t size;         /* the section's offset in the file, and size */
    const uint8_t *ftab; /* the function table, (nfunc + 1) entries: in d, or parts[0] */
    size_t ftab_len;
    struct part parts[2]; /* fd mode: the function table; the cu and file tables (or none) */
    enum ver ver;
    unsigned ptr, quantum;
    uint64_t nfunc, text;
    uint64_t funcname, cu, filetab, pctab, pcln; /* offsets of the sub-tables in the section */
    char name[NAME_CAP], file[NAME_CAP];         /* the last lookup's strings (fd mode) */
};

static bool in(const struct pfr_sym_gopcln *g, uint64_t off, uint64_t len)
{
    return off <= g->size && len <= g->size - off;
}

/* len bytes of the section at off; false when outside it or unreadable (a file truncated
 * since: not found, never a fault). */
static bool rd(const struct pfr_sym_gopcln *g, uint64_t off, void *buf, size_t len)
{
    if (!in(g, off, len))
        return false;
    if (g->d) {
        memcpy(buf, g->d + off, len);
        return true;
    }
    for (size_t i = 0; i < 2; i++) {
        const struct part *p = &g->parts[i];
        if (p->buf && off >= p->lo && off - p->lo <= p->len && len <= p->len - (off - p->lo)) {
            memcpy(buf, p->buf + (off - p->lo), len);
            return true;
        }
    }
    return pfr_sym_pread_full(g->fd, buf, len, g->off + off);
}

static uint32_t le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4); /* little-endian hosts only, like the recorder itself */
    return v;
}

static uint64_t le_word(const uint8_t *p, unsigned ptr)
{
    if (ptr == 4)
        return le32(p);
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static bool rd32(const struct pfr_sym_gopcln *g, uint64_t off, uint32_t *v)
{
    uint8_t b[4];
    if (!rd(g, off, b, 4))
        return false;
    *v = le32(b);
    return true;
}

/* A NUL-terminated string at off, or NULL: in d, or read into buf (NAME_CAP bytes). */
static const char *str_at(const struct pfr_sym_gopcln *g, uint64_t off, char *buf)
{
    if (off >= g->size)
        return NULL;
    if (g->d)
        return memchr(g->d + off, '\0', g->size - off) ? (const char *)g->d + off : NULL;
    size_t left = g->size - off;
    for (size_t cap = NAME_FIRST;; cap = NAME_CAP) {
        size_t n = left < cap ? left : cap;
        if (!rd(g, off, buf, n))
            return NULL;
        if (memchr(buf, '\0', n))
            return buf;
        if (n == left || cap == NAME_CAP)
            return NULL;
    }
}

/* The header's fields from its first bytes (hdr: len bytes of the section's start). */
static int parse_header(struct pfr_sym_gopcln *g, const uint8_t *hdr, size_t len, char *err,
                        size_t errlen)
{
    if (g->size < 16 || len < 16) {
        snprintf(err, errlen, ".gopclntab too small");
        return -EINVAL;
    }
    uint32_t magic = le32(hdr);
    g->ver = magic == 0xfffffffa ? GO116 : magic == 0xfffffff0 ? GO118 : GO120;
    if (magic != 0xfffffffa && magic != 0xfffffff0 && magic != 0xfffffff1) {
        snprintf(err, errlen, "unsupported .gopclntab magic %#x (Go before 1.16?)", magic);
        return -ENOTSUP;
    }
    g->quantum = hdr[6];
    g->ptr = hdr[7];
    if ((g->ptr != 4 && g->ptr != 8) || g->quantum == 0 || g->quantum > 8) {
        snprintf(err, errlen, "bad .gopclntab header");
        return -EINVAL;
    }
    unsigned nwords = g->ver == GO116 ? 7 : 8;
    if (!in(g, 8, (uint64_t)nwords * g->ptr) || len < 8 + (size_t)nwords * g->ptr) {
        snprintf(err, errlen, ".gopclntab header truncated");
        return -EINVAL;
    }
    uint64_t w[8];
    for (unsigned i = 0; i < nwords; i++)
        w[i] = le_word(hdr + 8 + (size_t)i * g->ptr, g->ptr);
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
    g->ftab_len = (size_t)((g->nfunc + 1) * ent);
    return 0;
}

/* Longest header: magic, pad, quantum, ptr size, then 8 words. */
#define HEADER_MAX (8 + 8 * 8)

int pfr_sym_gopcln_open_mem(const uint8_t *data, size_t size, uint64_t text_start,
                            struct pfr_sym_gopcln **out, char *err, size_t errlen)
{
    *out = NULL;
    struct pfr_sym_gopcln *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->fd = -1;
    g->d = malloc(size ? size : 1);
    if (!g->d) {
        free(g);
        return -ENOMEM;
    }
    if (size)
        memcpy(g->d, data, size);
    g->size = size;
    g->text = text_start;
    int rc = parse_header(g, g->d, size < HEADER_MAX ? size : HEADER_MAX, err, errlen);
    if (rc) {
        pfr_sym_gopcln_free(g);
        return rc;
    }
    g->ftab = g->d + g->pcln;
    *out = g;
    return 0;
}

/* len bytes at section offset lo read into part p: 0, -ENOMEM, or -EINVAL (unreadable). */
static int copy_part(struct pfr_sym_gopcln *g, struct part *p, uint64_t lo, size_t len)
{
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return -ENOMEM;
    if (!rd(g, lo, buf, len)) {
        free(buf);
        return -EINVAL;
    }
    *p = (struct part){lo, len, buf};
    return 0;
}

/* The table of the section sh of the file at fd: its header and function table read, the rest
 * left in the file. The function table's size is checked before it is read. */
static int open_fd(int fd, const GElf_Shdr *sh, uint64_t text, size_t max_bytes,
                   struct pfr_sym_budget *b, struct pfr_sym_gopcln **out, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || sh->sh_offset > (uint64_t)st.st_size ||
        sh->sh_size > (uint64_t)st.st_size - sh->sh_offset) {
        snprintf(err, errlen, "cannot read .gopclntab: outside the file");
        return pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, -EINVAL);
    }
    struct pfr_sym_gopcln *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    *g = (struct pfr_sym_gopcln){.fd = fd, .off = sh->sh_offset, .size = sh->sh_size, .text = text};
    uint8_t hdr[HEADER_MAX];
    size_t hl = g->size < HEADER_MAX ? g->size : HEADER_MAX;
    int rc = rd(g, 0, hdr, hl) ? parse_header(g, hdr, hl, err, errlen) : -EINVAL;
    if (rc == 0 && sizeof(*g) + g->ftab_len > max_bytes) {
        snprintf(err, errlen, ".gopclntab's function table larger than %zu bytes", max_bytes);
        pfr_sym_gopcln_free(g);
        return pfr_sym_refuse(b, PFR_REFUSED_TOO_BIG, -EFBIG);
    }
    if (rc == 0)
        rc = copy_part(g, &g->parts[0], g->pcln, g->ftab_len);
    /* the cu and file tables, between cutab and pctab as the linker lays them out, when they
     * fit beside it (else read as needed) */
    size_t meta = g->cu < g->filetab && g->filetab < g->pctab ? (size_t)(g->pctab - g->cu) : 0;
    if (rc == 0 && meta && sizeof(*g) + g->ftab_len + meta <= max_bytes)
        rc = copy_part(g, &g->parts[1], g->cu, meta);
    if (rc) {
        if (rc == -EINVAL)
            snprintf(err, errlen, "cannot read .gopclntab: unreadable");
        pfr_sym_gopcln_free(g);
        return rc == -EINVAL ? pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, rc) : rc;
    }
    g->ftab = g->parts[0].buf;
    *out = g;
    return 0;
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
    if (!gelf_getshdr(pcln, &sh)) {
        snprintf(err, errlen, "cannot read .gopclntab's header: %s", elf_errmsg(-1));
        return pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, -EINVAL);
    }
    if (fd >= 0)
        return open_fd(fd, &sh, text, max_bytes, b, out, err, errlen);
    /* no descriptor: the whole section through libelf, into memory */
    if (sh.sh_size > max_bytes) {
        snprintf(err, errlen, ".gopclntab larger than %zu bytes", max_bytes);
        return pfr_sym_refuse(b, PFR_REFUSED_TOO_BIG, -EFBIG);
    }
    Elf_Data *d = elf_rawdata(pcln, NULL);
    if (!d || !d->d_buf) {
        snprintf(err, errlen, "cannot read .gopclntab: %s", elf_errmsg(-1));
        return pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, -EINVAL);
    }
    int rc = pfr_sym_gopcln_open_mem(d->d_buf, d->d_size, text, out, err, errlen);
    return rc == -EINVAL ? pfr_sym_refuse(b, PFR_REFUSED_BAD_FILE, rc) : rc;
}

/* A pc-value table read forward through a window of the section. */
struct reader {
    const struct pfr_sym_gopcln *g;
    uint64_t p, lo; /* next byte; the window holds [lo, lo + n) */
    size_t n;
    uint8_t buf[WINDOW];
};

static bool next_byte(struct reader *r, uint8_t *b)
{
    const struct pfr_sym_gopcln *g = r->g;
    if (r->p >= g->size)
        return false;
    if (g->d) {
        *b = g->d[r->p++];
        return true;
    }
    if (r->p < r->lo || r->p >= r->lo + r->n) {
        size_t n = g->size - r->p < WINDOW ? (size_t)(g->size - r->p) : WINDOW;
        if (!rd(g, r->p, r->buf, n))
            return false;
        r->lo = r->p;
        r->n = n;
    }
    *b = r->buf[r->p++ - r->lo];
    return true;
}

static bool uvarint(struct reader *r, uint32_t *v)
{
    uint32_t x = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        uint8_t b;
        if (!next_byte(r, &b))
            return false;
        x |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Value of the pc-value table at off for pc (both relative to the function's entry), read
 * through r (its window kept from one table to the next). */
static bool pcvalue(struct reader *r, uint32_t off, uint64_t target, int32_t *out)
{
    const struct pfr_sym_gopcln *g = r->g;
    if (off == 0)
        return false; /* no table */
    r->p = g->pctab + off;
    uint64_t pc = 0;
    int32_t val = -1;
    for (unsigned step = 0; step < MAX_STEPS; step++) {
        uint32_t uv, pcd;
        if (!uvarint(r, &uv) || (uv == 0 && step > 0))
            return false;
        /* zig-zag delta; hostile tables may overflow, so wrap as the runtime's int32 would */
        val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
        if (!uvarint(r, &pcd))
            return false;
        pc += (uint64_t)pcd * g->quantum;
        if (target < pc) {
            *out = val;
            return true;
        }
    }
    return false;
}

/* The function holding pc (relative to text, or absolute before 1.18): its entry and the
 * offset of its record, from the function table in memory. */
static bool find_func(const struct pfr_sym_gopcln *g, uint64_t pc, uint64_t *entry, uint64_t *foff)
{
    uint64_t ent = g->ver == GO116 ? 2ull * g->ptr : 8;
    uint64_t lo = 0, hi = g->nfunc;
#define ENTRY(i) (g->ver == GO116 ? le_word(g->ftab + (i)*ent, g->ptr) : le32(g->ftab + (i)*ent))
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
    const uint8_t *at = g->ftab + lo * ent + (g->ver == GO116 ? g->ptr : 4);
    *foff = g->ver == GO116 ? le_word(at, g->ptr) : le32(at);
    return true;
}

int pfr_sym_gopcln_lookup(struct pfr_sym_gopcln *g, uint64_t vaddr,
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
    /* _func: [entry], nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset, ...,
     * then the pcdata offsets: read at once, the inline tree's included */
    uint64_t f = g->pcln + foff, base = g->ver == GO116 ? g->ptr : 4;
    uint64_t fixed = base + 32 + (g->ver == GO120 ? 8 : 4);
    uint8_t rec[8 + 32 + 8 + 4 * (PCDATA_INLTREE + 1)];
    bool with_inl = rd(g, f, rec, fixed + 4 * (PCDATA_INLTREE + 1)); /* the inline tree's too */
    if (!with_inl && !rd(g, f, rec, fixed))
        return 0;
    const char *name = str_at(g, g->funcname + le32(rec + base), g->name);
    if (!name)
        return 0;
    *out = (struct pfr_sym_gopcln_frame){name, NULL, 0};
    uint64_t rel = pc - entry;
    uint32_t npcdata = le32(rec + base + 24), cuoff = le32(rec + base + 28);
    int32_t inl = -1, fileno, line;
    uint32_t tab =
        npcdata > PCDATA_INLTREE && with_inl ? le32(rec + fixed + 4 * PCDATA_INLTREE) : 0;
    uint32_t pcfile = le32(rec + base + 16), pcln = le32(rec + base + 20);
    /* one window from the lowest of the function's tables holds the others as a rule */
    uint32_t first = pcln;
    if (pcfile && (!first || pcfile < first))
        first = pcfile;
    if (tab && (!first || tab < first))
        first = tab;
    struct reader r = {.g = g};
    uint64_t at = g->pctab + first;
    if (first && !g->d && at < g->size) {
        size_t n = g->size - at < WINDOW ? (size_t)(g->size - at) : WINDOW;
        if (rd(g, at, r.buf, n)) {
            r.lo = at;
            r.n = n;
        }
    }
    if (tab && !pcvalue(&r, tab, rel, &inl))
        inl = -1;
    if (inl >= 0)
        return 1; /* inside an inlined call: the line would be the callee's */
    if (pcvalue(&r, pcln, rel, &line) && line > 0)
        out->line = line;
    uint32_t fileoff;
    if (pcvalue(&r, pcfile, rel, &fileno) && fileno >= 0 &&
        rd32(g, g->cu + 4 * ((uint64_t)cuoff + (uint64_t)fileno), &fileoff) &&
        fileoff != UINT32_MAX)
        out->file = str_at(g, g->filetab + fileoff, g->file);
    return 1;
}

size_t pfr_sym_gopcln_bytes(const struct pfr_sym_gopcln *g)
{
    return g ? sizeof(*g) + (g->d ? g->size : g->parts[0].len + g->parts[1].len) : 0;
}

void pfr_sym_gopcln_free(struct pfr_sym_gopcln *g)
{
    if (!g)
        return;
    free(g->d);
    free(g->parts[0].buf);
    free(g->parts[1].buf);
    free(g);
}
