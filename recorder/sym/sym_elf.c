#include "sym_elf.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SECTIONS PFR_SYM_MAX_SECTIONS
#define MAX_PHDRS    4096

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif
#define NT_GO_BUILDID 4

static void take_note_id(struct pfr_sym_elf_info *out, Elf_Data *d)
{
    GElf_Nhdr nh;
    size_t off = 0, name_off, desc_off, next;
    while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
        const char *name = (const char *)d->d_buf + name_off;
        const uint8_t *desc = (const uint8_t *)d->d_buf + desc_off;
        size_t dlen = nh.n_descsz < PFR_ELF_MAX_BUILDID ? nh.n_descsz : PFR_ELF_MAX_BUILDID;
        int kind = PFR_ELF_ID_NONE;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0)
            kind = PFR_ELF_ID_GNU;
        else if (nh.n_type == NT_GO_BUILDID && nh.n_namesz == 3 && memcmp(name, "Go", 3) == 0)
            kind = PFR_ELF_ID_GO;
        /* a GNU build-id wins over Go's; the first of each kind counts */
        if (kind != PFR_ELF_ID_NONE && dlen > 0 &&
            (out->id_kind == PFR_ELF_ID_NONE || (kind == PFR_ELF_ID_GNU && out->id_kind != kind))) {
            memcpy(out->id, desc, dlen);
            out->id_len = dlen;
            out->id_kind = kind;
        }
        off = next;
    }
}

static void read_sections(Elf *e, struct pfr_sym_elf_info *out)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx) != 0)
        return;
    Elf_Scn *scn = NULL;
    unsigned count = 0;
    while ((scn = elf_nextscn(e, scn)) != NULL && count++ < MAX_SECTIONS) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (!name)
            name = "";
        bool has_bits = sh.sh_type != SHT_NOBITS && sh.sh_size > 0;
        if (sh.sh_type == SHT_SYMTAB && has_bits)
            out->has_symtab = true;
        if (has_bits && (strcmp(name, ".debug_info") == 0 || strcmp(name, ".zdebug_info") == 0))
            out->has_debug = true;
        if (strcmp(name, ".gopclntab") == 0 || strcmp(name, ".go.buildinfo") == 0)
            out->is_go = true;
        if (sh.sh_type == SHT_NOTE && has_bits && sh.sh_size > PFR_SYM_MAX_NOTE) {
            out->refused = PFR_REFUSED_TOO_BIG; /* libelf would read it whole: no build-id there */
        } else if (sh.sh_type == SHT_NOTE && has_bits) {
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d && d->d_buf && (d->d_type == ELF_T_NHDR || d->d_type == ELF_T_NHDR8))
                take_note_id(out, d);
        }
    }
}

static void read_phdrs(Elf *e, struct pfr_sym_elf_info *out, bool want_notes)
{
    size_t n;
    if (elf_getphdrnum(e, &n) != 0)
        return;
    if (n > MAX_PHDRS)
        n = MAX_PHDRS;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph))
            continue;
        if (ph.p_type == PT_LOAD && ph.p_filesz > 0 && out->nsegs < PFR_ELF_MAX_SEGS &&
            ph.p_offset + ph.p_filesz > ph.p_offset) {
            out->segs[out->nsegs++] =
                (struct pfr_sym_elf_seg){ph.p_offset, ph.p_vaddr, ph.p_filesz};
        } else if (ph.p_type == PT_NOTE && want_notes && ph.p_filesz > PFR_SYM_MAX_NOTE) {
            out->refused = PFR_REFUSED_TOO_BIG;
        } else if (ph.p_type == PT_NOTE && want_notes && ph.p_filesz > 0) {
            /* files without section headers still carry their build-id in PT_NOTE */
            Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
            if (d && d->d_buf)
                take_note_id(out, d);
        }
    }
}

int pfr_sym_elf_read_info(Elf *e, struct pfr_sym_elf_info *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!e || elf_kind(e) != ELF_K_ELF) {
        snprintf(err, errlen, "not an ELF file");
        return -EINVAL;
    }
    GElf_Ehdr eh;
    if (!gelf_getehdr(e, &eh)) {
        snprintf(err, errlen, "bad ELF header: %s", elf_errmsg(-1));
        return -EINVAL;
    }
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
        snprintf(err, errlen, "ELF type %u is not an executable or shared object", eh.e_type);
        return -EINVAL;
    }
    read_sections(e, out);
    read_phdrs(e, out, out->id_kind == PFR_ELF_ID_NONE);
    if (out->id_kind == PFR_ELF_ID_GO)
        out->is_go = true;
    if (out->nsegs == 0) {
        snprintf(err, errlen, "no loadable segment");
        return -EINVAL;
    }
    return 0;
}

/* ---- raw bytes: from the file (pread, a window at a time) or from an image in memory ----
 *
 * The symbol tables are read here, not through libelf's Elf_Data: libelf would hold a copy of
 * .symtab, .strtab, .dynsym and .dynstr at once (17 MB for node), where a window of each and a
 * bit per byte of a string table do (what parsing needs of the names is whether they are empty). */

#define WIN_BYTES (32u << 10) /* a multiple of 64 */
#define SEQ_BITS  27          /* candidates per file; the rank takes the bits above */

struct src {
    int fd;                   /* -1 with an image */
    const unsigned char *img; /* NULL with a file */
    uint64_t size;
    bool is64, swap;
};

bool pfr_sym_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

static bool src_read(const struct src *s, uint64_t off, void *buf, size_t len)
{
    if (off > s->size || len > s->size - off)
        return false;
    if (s->img) {
        memcpy(buf, s->img + off, len);
        return true;
    }
    return pfr_sym_pread_full(s->fd, buf, len, off);
}

/* A section [off, off + size) of the source, read through a window. */
struct win {
    const struct src *src;
    uint64_t off, size;
    unsigned char *buf;
    uint64_t woff;
    size_t wlen;
};

static bool win_init(struct win *w, const struct src *src, uint64_t off, uint64_t size)
{
    memset(w, 0, sizeof(*w));
    w->src = src;
    w->off = off;
    w->size = size;
    return off <= src->size && size <= src->size - off;
}

/* Section bytes [at, at + len), len <= WIN_BYTES; NULL when outside it or unreadable. */
static const unsigned char *win_get(struct win *w, uint64_t at, size_t len)
{
    if (at > w->size || len > w->size - at || len > WIN_BYTES)
        return NULL;
    if (w->src->img)
        return w->src->img + w->off + at;
    if (w->wlen && at >= w->woff && at - w->woff + len <= w->wlen)
        return w->buf + (at - w->woff);
    if (!w->buf && !(w->buf = malloc(WIN_BYTES)))
        return NULL;
    size_t n = w->size - at < WIN_BYTES ? (size_t)(w->size - at) : WIN_BYTES;
    w->wlen = 0;
    if (!pfr_sym_pread_full(w->src->fd, w->buf, n, w->off + at))
        return NULL;
    w->woff = at;
    w->wlen = n;
    return w->buf;
}

static void win_free(struct win *w)
{
    free(w->buf);
    w->buf = NULL;
    w->wlen = 0;
}

static uint16_t get16(const struct src *s, const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return s->swap ? __builtin_bswap16(v) : v;
}

static uint32_t get32(const struct src *s, const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return s->swap ? __builtin_bswap32(v) : v;
}

static uint64_t get64(const struct src *s, const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return s->swap ? __builtin_bswap64(v) : v;
}

struct raw_sym {
    uint32_t name;
    unsigned char info;
    uint16_t shndx;
    uint64_t value, size;
};

static size_t sym_entsize(const struct src *s)
{
    return s->is64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
}

static void decode_sym(const struct src *s, const unsigned char *p, struct raw_sym *o)
{
    if (s->is64) {
        o->name = get32(s, p + offsetof(Elf64_Sym, st_name));
        o->info = p[offsetof(Elf64_Sym, st_info)];
        o->shndx = get16(s, p + offsetof(Elf64_Sym, st_shndx));
        o->value = get64(s, p + offsetof(Elf64_Sym, st_value));
        o->size = get64(s, p + offsetof(Elf64_Sym, st_size));
    } else {
        o->name = get32(s, p + offsetof(Elf32_Sym, st_name));
        o->info = p[offsetof(Elf32_Sym, st_info)];
        o->shndx = get16(s, p + offsetof(Elf32_Sym, st_shndx));
        o->value = get32(s, p + offsetof(Elf32_Sym, st_value));
        o->size = get32(s, p + offsetof(Elf32_Sym, st_size));
    }
}

/* A table libelf would refuse to read (elf_getdata fails): compressed, past the end of the
 * file, or not a whole number of entries. */
static bool table_ok(const struct src *s, const GElf_Shdr *sh, size_t entsz)
{
    return !(sh->sh_flags & SHF_COMPRESSED) && entsz && sh->sh_size % entsz == 0 &&
           sh->sh_offset <= s->size && sh->sh_size <= s->size - sh->sh_offset;
}

/* What we know of each section for symbol filtering: executable, and its address range. */
struct sec {
    uint64_t addr, end;
    bool exec;
};

static struct sec *section_table(Elf *e, size_t *nsec)
{
    size_t n;
    if (elf_getshdrnum(e, &n) != 0 || n == 0)
        return NULL;
    if (n > MAX_SECTIONS)
        n = MAX_SECTIONS;
    struct sec *t = calloc(n, sizeof(*t));
    if (!t)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        GElf_Shdr sh;
        Elf_Scn *scn = elf_getscn(e, i);
        if (!scn || !gelf_getshdr(scn, &sh))
            continue;
        t[i].exec = (sh.sh_flags & SHF_EXECINSTR) && (sh.sh_flags & SHF_ALLOC);
        t[i].addr = sh.sh_addr;
        t[i].end = sh.sh_addr + sh.sh_size < sh.sh_addr ? UINT64_MAX : sh.sh_addr + sh.sh_size;
    }
    *nsec = n;
    return t;
}

/* A string table names refer to, while parsing. A name at offset o is one elf_strptr() would
 * return and not empty when o <= last_nul (a NUL follows it in the section) and byte o is not
 * NUL: one bit per byte, built on first use. */
struct names_tab {
    size_t link;
    bool plt, ok, scanned;
    uint32_t base;
    uint64_t last_nul;
    uint8_t *nonzero; /* bit o: byte o is not NUL */
    struct win w;
};

/* A candidate symbol before sorting and trimming (24 bytes). */
struct cand {
    uint64_t addr;
    uint64_t end;   /* addr + size (saturated), or its section's end for a symbol without size */
    uint32_t name;  /* reference (table base + offset) */
    uint32_t order; /* rank << SEQ_BITS | sequence: lower wins among symbols at one address */
};

#define RANK_NO_SIZE 8u /* in the rank: the symbol has no size */

struct collect {
    struct cand *v;
    size_t n, cap, max;
    const struct src *src;
    struct pfr_sym_elf_syms *out;
    struct names_tab nt[PFR_ELF_MAX_STRTABS];
    size_t nnt;
    uint64_t next_base;
    size_t max_bytes;
    struct pfr_sym_budget *b;
};

/* Checked every this many entries of a table (a clock read is ~20 ns; 1024 entries ~10 us). */
#define DEADLINE_EVERY 1024u

static int push_cand(struct collect *c, uint64_t addr, uint64_t end, uint32_t name, uint32_t rank)
{
    if (c->n >= c->max)
        return -EFBIG;
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 1024;
        struct cand *nv = realloc(c->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        c->v = nv;
        c->cap = ncap;
    }
    c->v[c->n] = (struct cand){addr, end, name, rank << SEQ_BITS | (uint32_t)c->n};
    c->n++;
    return 0;
}

static uint32_t bind_rank(unsigned bind)
{
    return bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
}

/* The string table at section index link (as elf_strptr would use it), registered in out->tabs
 * so names can be read later; NULL when no name of it would be usable. */
static struct names_tab *names_tab(struct collect *c, Elf *e, size_t link, bool plt)
{
    for (size_t i = 0; i < c->nnt; i++)
        if (c->nt[i].link == link && c->nt[i].plt == plt)
            return c->nt[i].ok ? &c->nt[i] : NULL;
    if (c->nnt == PFR_ELF_MAX_STRTABS)
        return NULL;
    struct names_tab *t = &c->nt[c->nnt++];
    memset(t, 0, sizeof(*t));
    t->link = link;
    t->plt = plt;
    Elf_Scn *scn = elf_getscn(e, link);
    GElf_Shdr sh;
    if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB || sh.sh_size == 0)
        return NULL;
    if (!table_ok(c->src, &sh, 1))
        return pfr_sym_refuse(c->b, PFR_REFUSED_BAD_FILE, 0), NULL;
    if (sh.sh_size > PFR_ELF_MAX_STRTAB(c->max_bytes) || sh.sh_size >= UINT32_MAX - c->next_base)
        return pfr_sym_refuse(c->b, PFR_REFUSED_TOO_BIG, 0), NULL;
    win_init(&t->w, c->src, sh.sh_offset, sh.sh_size);
    t->base = (uint32_t)c->next_base;
    c->next_base += sh.sh_size;
    c->out->tabs[c->out->ntabs++] =
        (struct pfr_sym_elf_strtab){sh.sh_offset, t->base, (uint32_t)sh.sh_size, plt};
    t->ok = true;
    return t;
}

/* One pass over the table: a bit per non-NUL byte, and the last NUL. */
static bool scan_names(struct names_tab *t, struct pfr_sym_budget *b)
{
    if (t->scanned)
        return t->nonzero != NULL;
    t->scanned = true;
    uint64_t size = t->w.size;
    uint8_t *bits = calloc((size_t)(size + 7) / 8, 1);
    if (!bits)
        return false;
    bool any_nul = false;
    for (uint64_t at = 0; at < size;) {
        size_t chunk = size - at < WIN_BYTES ? (size_t)(size - at) : WIN_BYTES;
        const unsigned char *p = win_get(&t->w, at, chunk);
        if (!p || pfr_sym_budget_over(b)) {
            free(bits);
            return false;
        }
        size_t i = 0;
        for (; i + 8 <= chunk; i += 8) { /* at is a multiple of 64: whole bitmap bytes */
            uint64_t x;
            memcpy(&x, p + i, sizeof(x));
            uint64_t hi = (((x & 0x7f7f7f7f7f7f7f7fULL) + 0x7f7f7f7f7f7f7f7fULL) | x) &
                          0x8080808080808080ULL; /* the top bit of each non-zero byte */
            uint8_t m = (uint8_t)(((hi >> 7) * 0x0102040810204080ULL) >> 56);
            if (m != 0xff) {
                any_nul = true;
                t->last_nul = at + i + (uint64_t)(31 - __builtin_clz((unsigned)(uint8_t)~m));
            }
            bits[(at + i) / 8] = m;
        }
        for (; i < chunk; i++) {
            if (p[i])
                bits[(at + i) / 8] |= (uint8_t)(1u << ((at + i) & 7));
            else
                any_nul = true, t->last_nul = at + i;
        }
        at += chunk;
    }
    if (!any_nul) {
        free(bits); /* no name is terminated */
        return false;
    }
    t->nonzero = bits;
    /* the window is not needed any more (names are read later by reference) */
    win_free(&t->w);
    return true;
}

static bool name_usable(struct names_tab *t, uint32_t off, struct pfr_sym_budget *b)
{
    if (!t || !scan_names(t, b) || off > t->last_nul)
        return false;
    return t->nonzero[off / 8] >> (off & 7) & 1;
}

static int read_table(Elf *e, const GElf_Shdr *sh, uint32_t table_rank, const struct sec *secs,
                      size_t nsec, struct collect *c)
{
    size_t entsz = sym_entsize(c->src);
    struct win w;
    if (sh->sh_size == 0)
        return 0;
    if (!table_ok(c->src, sh, entsz) || !win_init(&w, c->src, sh->sh_offset, sh->sh_size))
        return pfr_sym_refuse(c->b, PFR_REFUSED_BAD_FILE, 0); /* the other table may still do */
    size_t count = sh->sh_size / entsz;
    if (count > PFR_ELF_MAX_ENTRIES(c->max_bytes))
        return pfr_sym_refuse(c->b, PFR_REFUSED_TOO_MANY_SYMBOLS, -EFBIG);
    struct names_tab *nt = NULL;
    bool nt_tried = false;
    int rc = 0;
    for (size_t i = 1; i < count && rc == 0; i++) {
        if (i % DEADLINE_EVERY == 0 && pfr_sym_budget_over(c->b)) {
            rc = -ETIME;
            break;
        }
        const unsigned char *p = win_get(&w, i * entsz, entsz);
        if (!p)
            break;
        struct raw_sym sym;
        decode_sym(c->src, p, &sym);
        unsigned type = GELF_ST_TYPE(sym.info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.value == 0 ||
            sym.shndx == SHN_UNDEF || sym.shndx >= SHN_LORESERVE || sym.shndx >= nsec ||
            !secs[sym.shndx].exec)
            continue;
        if (!nt_tried) {
            nt = names_tab(c, e, sh->sh_link, false);
            nt_tried = true;
        }
        if (!name_usable(nt, sym.name, c->b))
            continue;
        uint32_t rank =
            (sym.size ? 0 : RANK_NO_SIZE) + table_rank * 4 + bind_rank(GELF_ST_BIND(sym.info));
        uint64_t end = sym.size
                           ? (sym.value + sym.size < sym.value ? UINT64_MAX : sym.value + sym.size)
                           : secs[sym.shndx].end;
        rc = push_cand(c, sym.value, end, nt->base + sym.name, rank);
    }
    win_free(&w);
    return rc;
}

/* ---- PLT stubs: "name@plt", as perf names them ---- */

/* A sample (or a return address) in a PLT stub has no symbol of its own. The stubs follow the
 * order of .rela.plt: on x86-64 .plt.sec entry i (IBT builds) or .plt entry i + 1 (after the
 * 16-byte PLT0), 16 bytes each; on arm64 .plt entry i after a 32-byte header. */
struct plt_layout {
    Elf_Scn *stubs, *rela;
    GElf_Shdr stubs_sh, rela_sh;
    uint64_t first, entsize;
};

static bool find_plt(Elf *e, struct plt_layout *l)
{
    GElf_Ehdr eh;
    size_t shstrndx;
    if (!gelf_getehdr(e, &eh) || elf_getshdrstrndx(e, &shstrndx) != 0)
        return false;
    if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64)
        return false;
    Elf_Scn *plt = NULL, *plt_sec = NULL, *scn = NULL;
    GElf_Shdr plt_sh = {0}, sec_sh = {0}, sh;
    unsigned count = 0;
    memset(l, 0, sizeof(*l));
    while ((scn = elf_nextscn(e, scn)) != NULL && count++ < MAX_SECTIONS) {
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (!name)
            continue;
        if (!strcmp(name, ".plt"))
            plt = scn, plt_sh = sh;
        else if (!strcmp(name, ".plt.sec"))
            plt_sec = scn, sec_sh = sh;
        else if (!strcmp(name, ".rela.plt") && sh.sh_type == SHT_RELA)
            l->rela = scn, l->rela_sh = sh;
    }
    l->entsize = 16;
    if (plt_sec && eh.e_machine == EM_X86_64) {
        l->stubs = plt_sec, l->stubs_sh = sec_sh, l->first = sec_sh.sh_addr;
    } else if (plt) {
        l->stubs = plt, l->stubs_sh = plt_sh;
        l->first = plt_sh.sh_addr + (eh.e_machine == EM_X86_64 ? 16 : 32);
    }
    return l->stubs && l->rela && l->stubs_sh.sh_addr != 0;
}

#define PLT_NAME_MAX 508 /* perf's buffer: name + "@plt" + NUL in 512 bytes */
/* The .dynsym entries the stubs name (the imports: a prefix of .dynsym, named in no particular
 * order) are read at once when they span at most this much and at most PLT_SPAN_SPARSE entries
 * a stub: libisl's 3,429 stubs span 4,979 entries (117 KB), libstdc++'s 1,037 6,159; cc1's 490
 * span 28,497 (667 KB), read one by one as before, with nothing held. */
#define PLT_SPAN_MAX    (256u << 10)
#define PLT_SPAN_SPARSE 8u

/* Whether the name at off of a scanned table ends within PLT_NAME_MAX bytes (is not empty, and
 * fits perf's buffer with "@plt"): the first NUL after it, from the table's bits. */
static bool plt_name_fits(struct names_tab *t, uint32_t off, struct pfr_sym_budget *b)
{
    if (!name_usable(t, off, b))
        return false;
    /* off <= last_nul: a NUL follows within the table */
    for (uint64_t k = (uint64_t)off + 1; k - off < PLT_NAME_MAX; k++) {
        if ((k & 7) == 0 && k + 8 - off <= PLT_NAME_MAX && t->nonzero[k / 8] == 0xff) {
            k += 7; /* eight bytes without a NUL */
            continue;
        }
        if (!(t->nonzero[k / 8] >> (k & 7) & 1))
            return true;
    }
    return false;
}

/* The scanned table whose bits tell nt's names: the symbols' table of the same section when it
 * was scanned (libLLVM's 3 MB .dynstr is not scanned twice for its 477 stubs), else nt. */
static struct names_tab *names_bits(struct collect *c, struct names_tab *nt)
{
    for (size_t i = 0; i < c->nnt; i++)
        if (&c->nt[i] != nt && c->nt[i].link == nt->link && c->nt[i].scanned && c->nt[i].nonzero)
            return &c->nt[i];
    return nt;
}

/* The symbol indices the n relocations of rw name: [lo, hi] of those below nsyms (lo > hi: none).
 * One sequential pass over the relocations. */
static void plt_sym_span(const struct src *s, struct win *rw, size_t n, size_t nsyms, uint64_t *lo,
                         uint64_t *hi)
{
    size_t relsz = s->is64 ? sizeof(Elf64_Rela) : sizeof(Elf32_Rela);
    *lo = UINT64_MAX;
    *hi = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *rp = win_get(rw, i * relsz, relsz);
        if (!rp)
            break;
        uint64_t symi = s->is64 ? get64(s, rp + offsetof(Elf64_Rela, r_info)) >> 32
                                : get32(s, rp + offsetof(Elf32_Rela, r_info)) >> 8;
        if (symi >= nsyms || symi > INT32_MAX)
            continue;
        *lo = symi < *lo ? symi : *lo;
        *hi = symi > *hi ? symi : *hi;
    }
}

/* Symbol symi of the table at off: from span (entries [lo, ...] read at once) when it holds it,
 * else read alone. */
static bool plt_sym(const struct src *s, uint64_t off, const unsigned char *span, uint64_t lo,
                    uint64_t nspan, uint64_t symi, struct raw_sym *out)
{
    size_t entsz = sym_entsize(s);
    unsigned char raw[sizeof(Elf64_Sym)];
    const unsigned char *p = raw;
    if (span && symi >= lo && symi - lo < nspan)
        p = span + (symi - lo) * entsz;
    else if (!src_read(s, off + symi * entsz, raw, entsz))
        return false;
    decode_sym(s, p, out);
    return true;
}

/* Two passes over .rela.plt (sequential, through a window): the span of .dynsym the stubs name,
 * read at once, then the stubs; their names are checked with the string table's bits. Before,
 * each stub took two preads (its symbol, its name): 6,900 system calls for libisl, at every
 * parse of the file. */
static int read_plt(Elf *e, struct collect *c)
{
    struct plt_layout l;
    if (!find_plt(e, &l))
        return 0;
    const struct src *s = c->src;
    size_t relsz = s->is64 ? sizeof(Elf64_Rela) : sizeof(Elf32_Rela), entsz = sym_entsize(s);
    Elf_Scn *dynsym = elf_getscn(e, l.rela_sh.sh_link);
    GElf_Shdr dsh;
    struct win rw;
    if (!dynsym || !gelf_getshdr(dynsym, &dsh) ||
        (dsh.sh_type != SHT_SYMTAB && dsh.sh_type != SHT_DYNSYM) || !table_ok(s, &dsh, entsz) ||
        !table_ok(s, &l.rela_sh, relsz) ||
        !win_init(&rw, s, l.rela_sh.sh_offset, l.rela_sh.sh_size))
        return 0;
    uint64_t end = l.stubs_sh.sh_addr + l.stubs_sh.sh_size;
    size_t n = l.rela_sh.sh_size / relsz, nsyms = dsh.sh_size / entsz;
    if (n > PFR_ELF_MAX_ENTRIES(c->max_bytes))
        return pfr_sym_refuse(c->b, PFR_REFUSED_TOO_MANY_SYMBOLS, -EFBIG);
    uint64_t lo, hi, nspan = 0;
    plt_sym_span(s, &rw, n, nsyms, &lo, &hi);
    unsigned char *span = NULL;
    if (lo <= hi && (hi - lo + 1) * entsz <= PLT_SPAN_MAX && hi - lo + 1 <= PLT_SPAN_SPARSE * n) {
        nspan = hi - lo + 1;
        span = malloc(nspan * entsz);
        if (span && !src_read(s, dsh.sh_offset + lo * entsz, span, nspan * entsz)) {
            free(span);
            span = NULL;
        }
    }
    struct names_tab *nt = NULL, *bits = NULL;
    bool nt_tried = false;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0 && lo <= hi; i++) {
        if (i % DEADLINE_EVERY == DEADLINE_EVERY - 1 && pfr_sym_budget_over(c->b)) {
            rc = -ETIME;
            break;
        }
        uint64_t addr = l.first + i * l.entsize;
        const unsigned char *rp;
        if (addr < l.first || addr + l.entsize > end || !(rp = win_get(&rw, i * relsz, relsz)))
            break;
        uint64_t symi = s->is64 ? get64(s, rp + offsetof(Elf64_Rela, r_info)) >> 32
                                : get32(s, rp + offsetof(Elf32_Rela, r_info)) >> 8;
        struct raw_sym sym;
        if (symi >= nsyms || symi > INT32_MAX ||
            !plt_sym(s, dsh.sh_offset, span, lo, nspan, symi, &sym))
            continue;
        if (!nt_tried) {
            nt = names_tab(c, e, dsh.sh_link, true);
            bits = nt ? names_bits(c, nt) : NULL;
            nt_tried = true;
        }
        if (!nt || !plt_name_fits(bits, sym.name, c->b))
            continue;
        /* ranked after every real symbol: a stub never hides a function */
        rc = push_cand(c, addr, addr + l.entsize, nt->base + sym.name, 16);
    }
    free(span);
    win_free(&rw);
    return rc;
}

static int by_addr_order(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static inline bool cand_before(const struct cand *x, const struct cand *y)
{
    return x->addr != y->addr ? x->addr < y->addr : x->order < y->order;
}

#define SORT_RUN 32 /* candidates sorted by insertion before the merges */

static void insertion_sort(struct cand *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct cand x = v[i];
        size_t j = i;
        for (; j > 0 && cand_before(&x, &v[j - 1]); j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Candidates by address, then order (unique: it holds their sequence). A merge sort with the
 * comparison inlined: glibc's qsort, calling by_addr_order through a pointer for each of the
 * n log n comparisons, took a third of a large file's parse (cc1, libLLVM). Sorts with qsort
 * when the buffer of n candidates (which qsort would take too) cannot be had. */
static void sort_cands(struct cand *v, size_t n)
{
    struct cand *tmp = n > SORT_RUN ? malloc(n * sizeof(*tmp)) : NULL;
    if (n > SORT_RUN && !tmp) {
        qsort(v, n, sizeof(*v), by_addr_order);
        return;
    }
    for (size_t i = 0; i < n; i += SORT_RUN)
        insertion_sort(v + i, n - i < SORT_RUN ? n - i : SORT_RUN);
    struct cand *src = v, *dst = tmp;
    for (size_t w = SORT_RUN; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = cand_before(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < hi)
                dst[k++] = src[j++];
        }
        struct cand *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof(*v));
    free(tmp);
}

/* Sorted candidates -> one symbol per address with an extent: its size, or up to the next
 * symbol (and the end of its section) when it has none. Symbols inside the previous one
 * (local labels) are dropped so the enclosing function names the address. The symbols are
 * written over the candidates (16 bytes over 24: never over one not yet read); returns how
 * many. */
static size_t build(struct cand *v, size_t n)
{
    unsigned char *out = (unsigned char *)v;
    size_t k = 0;
    uint64_t prev_addr = 0, prev_end = 0;
    for (size_t i = 0; i < n; i++) {
        struct cand x;
        memcpy(&x, &v[i], sizeof(x));
        if (k && (x.addr == prev_addr || x.addr < prev_end))
            continue;
        uint64_t end;
        if (!((x.order >> SEQ_BITS) & RANK_NO_SIZE)) {
            end = x.end;
        } else {
            size_t j = i + 1;
            while (j < n && v[j].addr == x.addr)
                j++;
            end = j < n ? v[j].addr : x.end;
            if (end > x.end)
                end = x.end;
            if (end <= x.addr)
                end = x.addr + 1;
        }
        uint64_t len = end - x.addr;
        if (len > UINT32_MAX)
            len = UINT32_MAX;
        if (len == 0)
            len = 1; /* a symbol at the very top of the address space */
        struct pfr_sym_elf_sym o = {x.addr, (uint32_t)len, x.name};
        memcpy(out + k * sizeof(o), &o, sizeof(o));
        k++;
        prev_addr = x.addr;
        prev_end = x.addr + len;
    }
    return k;
}

/* The name behind a reference, "@plt" appended for a stub, into buf. */
static int read_ref(const struct pfr_sym_elf_strtab *tabs, size_t ntabs, const struct src *s,
                    uint32_t ref, char *buf, size_t cap)
{
    const struct pfr_sym_elf_strtab *t = NULL;
    for (size_t k = 0; k < ntabs && !t; k++)
        if (ref >= tabs[k].base && ref - tabs[k].base < tabs[k].size)
            t = &tabs[k];
    if (!t)
        return -EINVAL;
    uint64_t at = ref - t->base, rem = t->size - at;
    size_t suffix = t->plt ? 4 : 0, room = cap > suffix ? cap - suffix : 0, got = 0, step = 128;
    while (got < rem && got < room) {
        size_t want = step;
        if (want > rem - got)
            want = (size_t)(rem - got);
        if (want > room - got)
            want = room - got;
        if (!src_read(s, t->off + at + got, buf + got, want))
            return -EIO;
        const char *z = memchr(buf + got, '\0', want);
        if (z) {
            size_t len = (size_t)(z - buf);
            if (suffix)
                memcpy(buf + len, "@plt", 5);
            return (int)(len + suffix);
        }
        got += want;
        step = step < 16384 ? step * 4 : step;
    }
    return got >= rem ? -EIO : -ENAMETOOLONG; /* no NUL to the table's end: not as parsed */
}

static int read_syms(Elf *e, const struct src *src, struct pfr_sym_elf_syms *out, size_t max_bytes,
                     struct pfr_sym_budget *b, char *err, size_t errlen)
{
    size_t nsec = 0;
    struct sec *secs = section_table(e, &nsec);
    if (!secs)
        return 0; /* no section headers: no symbols, frames fall back to module+offset */
    struct collect c = {.src = src, .out = out, .max_bytes = max_bytes, .b = b};
    /* candidates (duplicates of .symtab in .dynsym, aliases) are transient: up to twice the
     * bound in them; what is kept is checked after */
    c.max = max_bytes / sizeof(struct cand) * 2;
    if (c.max >= (1u << SEQ_BITS))
        c.max = (1u << SEQ_BITS) - 1;
    int rc = 0;
    /* .symtab first: it is the superset when present; .dynsym fills in for stripped files */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        Elf_Scn *scn = NULL;
        unsigned count = 0;
        while (rc == 0 && (scn = elf_nextscn(e, scn)) != NULL && count++ < MAX_SECTIONS) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh))
                continue;
            if (sh.sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
                rc = read_table(e, &sh, (uint32_t)pass, secs, nsec, &c);
        }
    }
    free(secs);
    if (rc == 0)
        rc = read_plt(e, &c);
    for (size_t i = 0; i < c.nnt; i++) {
        free(c.nt[i].nonzero);
        win_free(&c.nt[i].w);
    }
    if (rc == 0) {
        if (c.n)
            sort_cands(c.v, c.n);
        out->n = build(c.v, c.n);
        if (out->n > max_bytes / sizeof(struct pfr_sym_elf_sym))
            rc = -EFBIG;
    }
    if (rc == 0) {
        out->v = realloc(c.v, (out->n ? out->n : 1) * sizeof(*out->v));
        if (!out->v)
            out->v = (struct pfr_sym_elf_sym *)c.v; /* shrinking failed: keep the larger block */
        c.v = NULL;
    }
    free(c.v);
    if (rc) {
        if (rc == -EFBIG) {
            pfr_sym_refuse(b, PFR_REFUSED_TOO_MANY_SYMBOLS, rc);
            snprintf(err, errlen, "symbol table larger than %zu bytes", max_bytes);
        } else if (rc == -ETIME) {
            snprintf(err, errlen, "symbol tables not read within the time budget");
        }
        pfr_sym_elf_syms_free(out);
    }
    return rc;
}

static bool src_init(Elf *e, struct src *s)
{
    const char *ident = elf_getident(e, NULL);
    int cls = gelf_getclass(e);
    if (!ident || (cls != ELFCLASS32 && cls != ELFCLASS64))
        return false;
    s->is64 = cls == ELFCLASS64;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    s->swap = ident[EI_DATA] == ELFDATA2MSB;
#else
    s->swap = ident[EI_DATA] == ELFDATA2LSB;
#endif
    return true;
}

int pfr_sym_elf_read_syms(Elf *e, struct pfr_sym_elf_syms *out, size_t max_bytes,
                          struct pfr_sym_budget *b, char *err, size_t errlen)
{
    size_t size = 0;
    struct src s = {.fd = -1};
    if (!src_init(e, &s))
        return 0;
    s.img = (const unsigned char *)elf_rawfile(e, &size);
    s.size = size;
    if (!s.img)
        return 0;
    int rc = read_syms(e, &s, out, max_bytes, b, err, errlen);
    if (rc)
        return rc;
    /* copy the names kept; the references become offsets in names */
    char *buf = malloc(PFR_ELF_MAX_NAME);
    if (!buf) {
        pfr_sym_elf_syms_free(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < out->n; i++) {
        int len = read_ref(out->tabs, out->ntabs, &s, out->v[i].name, buf, PFR_ELF_MAX_NAME);
        uint32_t off = len > 0 ? pfr_sym_strpool_add(&out->names, buf, (size_t)len) : 0;
        if (off == PFR_STR_NONE) {
            free(buf);
            pfr_sym_elf_syms_free(out);
            return -ENOMEM;
        }
        out->v[i].name = off;
    }
    free(buf);
    out->ntabs = 0;
    pfr_sym_strpool_shrink(&out->names);
    return 0;
}

int pfr_sym_elf_read_syms_fd(Elf *e, int fd, struct pfr_sym_elf_syms *out, size_t max_bytes,
                             struct pfr_sym_budget *b, char *err, size_t errlen)
{
    struct stat st;
    struct src s = {.fd = fd};
    if (!src_init(e, &s))
        return 0;
    if (fstat(fd, &st) != 0) {
        int rc = -errno;
        snprintf(err, errlen, "fstat: %s", strerror(-rc));
        return rc;
    }
    s.size = (uint64_t)st.st_size;
    int rc = read_syms(e, &s, out, max_bytes, b, err, errlen);
    if (rc)
        return rc;
    out->lazy = true;
    out->dev = (uint64_t)st.st_dev;
    out->ino = (uint64_t)st.st_ino;
    out->size = (uint64_t)st.st_size;
    out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return 0;
}

int pfr_sym_elf_read_name(struct pfr_sym_elf_syms *s, int fd, const struct pfr_sym_elf_sym *sym,
                          char *buf, size_t cap)
{
    if (!s->lazy) {
        const char *nm = pfr_sym_strpool_get(&s->names, sym->name);
        size_t len = strlen(nm);
        if (len + 1 > cap)
            return -ENAMETOOLONG;
        memcpy(buf, nm, len + 1);
        return (int)len;
    }
    if (s->stale)
        return -ESTALE;
    /* the file as parsed: a name is read only from the same bytes (a file replaced by rename
     * keeps its old inode behind fd; one truncated or rewritten in place does not) */
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -EIO;
    if ((uint64_t)st.st_dev != s->dev || (uint64_t)st.st_ino != s->ino ||
        (uint64_t)st.st_size != s->size ||
        (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != s->mtime_ns) {
        s->stale = true;
        return -ESTALE;
    }
    struct src src = {.fd = fd, .size = s->size};
    return read_ref(s->tabs, s->ntabs, &src, sym->name, buf, cap);
}

size_t pfr_sym_elf_syms_estimate(Elf *e)
{
    size_t total = 0;
    Elf_Scn *scn = NULL;
    unsigned count = 0;
    size_t entsz = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT);
    while ((scn = elf_nextscn(e, scn)) != NULL && count++ < MAX_SECTIONS) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
            continue;
        size_t n = entsz ? sh.sh_size / entsz : 0;
        size_t add = n * sizeof(struct pfr_sym_elf_sym);
        total = total + add < total ? SIZE_MAX : total + add;
    }
    return total;
}

const struct pfr_sym_elf_sym *pfr_sym_elf_find(const struct pfr_sym_elf_syms *s, uint64_t vaddr)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].addr <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct pfr_sym_elf_sym *x = &s->v[lo - 1];
    return vaddr - x->addr < x->len ? x : NULL;
}

bool pfr_sym_elf_off_to_vaddr(const struct pfr_sym_elf_info *i, uint64_t off, uint64_t *vaddr)
{
    for (size_t k = 0; k < i->nsegs; k++) {
        const struct pfr_sym_elf_seg *g = &i->segs[k];
        if (off >= g->offset && off - g->offset < g->filesz) {
            *vaddr = off - g->offset + g->vaddr;
            return true;
        }
    }
    return false;
}

size_t pfr_sym_elf_syms_bytes(const struct pfr_sym_elf_syms *s)
{
    return s->n * sizeof(struct pfr_sym_elf_sym) + pfr_sym_strpool_bytes(&s->names);
}

void pfr_sym_elf_syms_free(struct pfr_sym_elf_syms *s)
{
    free(s->v);
    pfr_sym_strpool_free(&s->names);
    memset(s, 0, sizeof(*s));
}

void pfr_sym_elf_id_hex(const struct pfr_sym_elf_info *i, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    for (size_t k = 0; k < i->id_len && w + 2 < len; k++) {
        buf[w++] = hex[i->id[k] >> 4];
        buf[w++] = hex[i->id[k] & 15];
    }
    if (len)
        buf[w < len ? w : len - 1] = '\0';
}

/* ---- the headers, before libelf reads them ---- */

struct hdr {
    int fd;
    uint64_t size;
    bool is64, swap;
};

static bool hdr_read(const struct hdr *h, uint64_t off, void *buf, size_t len)
{
    if (off > h->size || len > h->size - off)
        return false;
    return pfr_sym_pread_full(h->fd, buf, len, off);
}

static uint64_t hdr_field(const struct hdr *h, const unsigned char *p, size_t len)
{
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++)
        v |= (uint64_t)p[h->swap ? len - 1 - i : i] << (8 * i);
    return v;
}

#define FIELD(h, p, T32, T64, f)                                                                   \
    ((h)->is64 ? hdr_field(h, (p) + offsetof(T64, f), sizeof(((T64 *)0)->f))                       \
               : hdr_field(h, (p) + offsetof(T32, f), sizeof(((T32 *)0)->f)))

static int precheck_fail(struct pfr_sym_budget *b, int reason, char *err, size_t errlen,
                         const char *what)
{
    snprintf(err, errlen, "%s", what);
    return pfr_sym_refuse(b, reason, reason == PFR_REFUSED_TOO_BIG ? -EFBIG : -EBADMSG);
}

int pfr_sym_elf_precheck(int fd, struct pfr_sym_budget *b, char *err, size_t errlen)
{
    struct stat st;
    unsigned char eh[sizeof(Elf64_Ehdr)], sh0[sizeof(Elf64_Shdr)], shs[sizeof(Elf64_Shdr)];
    if (fstat(fd, &st) != 0)
        return -errno;
    struct hdr h = {.fd = fd, .size = (uint64_t)st.st_size};
    if (!hdr_read(&h, 0, eh, EI_NIDENT) || memcmp(eh, ELFMAG, SELFMAG) != 0 ||
        (eh[EI_CLASS] != ELFCLASS32 && eh[EI_CLASS] != ELFCLASS64))
        return precheck_fail(NULL, PFR_REFUSED_NONE, err, errlen, "not an ELF file"), -ENOEXEC;
    h.is64 = eh[EI_CLASS] == ELFCLASS64;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    h.swap = eh[EI_DATA] == ELFDATA2MSB;
#else
    h.swap = eh[EI_DATA] == ELFDATA2LSB;
#endif
    size_t ehsz = h.is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    size_t shsz = h.is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
    if (!hdr_read(&h, 0, eh, ehsz))
        return precheck_fail(NULL, PFR_REFUSED_NONE, err, errlen, "not an ELF file"), -ENOEXEC;
    uint64_t shoff = FIELD(&h, eh, Elf32_Ehdr, Elf64_Ehdr, e_shoff);
    uint64_t shnum = FIELD(&h, eh, Elf32_Ehdr, Elf64_Ehdr, e_shnum);
    uint64_t phnum = FIELD(&h, eh, Elf32_Ehdr, Elf64_Ehdr, e_phnum);
    uint64_t shstrndx = FIELD(&h, eh, Elf32_Ehdr, Elf64_Ehdr, e_shstrndx);
    if (shoff == 0)
        shnum = 0;
    else if (!hdr_read(&h, shoff, sh0, shsz))
        return precheck_fail(b, PFR_REFUSED_BAD_FILE, err, errlen,
                             "section headers outside the file");
    /* extended numbering: the real counts are in section header 0 */
    if (shoff && shnum == 0)
        shnum = FIELD(&h, sh0, Elf32_Shdr, Elf64_Shdr, sh_size);
    if (shoff && phnum == PN_XNUM)
        phnum = FIELD(&h, sh0, Elf32_Shdr, Elf64_Shdr, sh_info);
    if (shoff && shstrndx == SHN_XINDEX)
        shstrndx = FIELD(&h, sh0, Elf32_Shdr, Elf64_Shdr, sh_link);
    if (shnum > PFR_SYM_MAX_SECTIONS || phnum > MAX_PHDRS)
        return precheck_fail(b, PFR_REFUSED_TOO_BIG, err, errlen,
                             "too many section or program headers");
    if (shoff && (shoff > h.size || shnum * shsz > h.size - shoff))
        return precheck_fail(b, PFR_REFUSED_BAD_FILE, err, errlen,
                             "section headers outside the file");
    if (shnum == 0 || shstrndx == SHN_UNDEF || shstrndx >= shnum)
        return 0;
    if (!hdr_read(&h, shoff + shstrndx * shsz, shs, shsz))
        return precheck_fail(b, PFR_REFUSED_BAD_FILE, err, errlen,
                             "section headers outside the file");
    if (FIELD(&h, shs, Elf32_Shdr, Elf64_Shdr, sh_size) > PFR_SYM_MAX_SHSTRTAB)
        return precheck_fail(b, PFR_REFUSED_TOO_BIG, err, errlen, "section names over their limit");
    return 0;
}
