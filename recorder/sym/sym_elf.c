#include "sym_elf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SECTIONS (1u << 20)
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
        if (sh.sh_type == SHT_NOTE && has_bits) {
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

/* A candidate symbol before sorting and trimming. */
struct cand {
    uint64_t addr, size, sec_end;
    uint32_t name;
    uint32_t rank; /* lower wins among symbols at one address */
};

struct collect {
    struct cand *v;
    size_t n, cap;
    size_t max_bytes;
};

static int push_cand(struct collect *c, const struct cand *x)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 1024;
        if (ncap * sizeof(struct cand) > c->max_bytes * 2)
            return -EFBIG;
        struct cand *nv = realloc(c->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        c->v = nv;
        c->cap = ncap;
    }
    c->v[c->n++] = *x;
    return 0;
}

static uint32_t bind_rank(unsigned bind)
{
    return bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
}

static int read_table(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, uint32_t table_rank,
                      const struct sec *secs, size_t nsec, struct collect *c,
                      struct pfr_sym_strpool *names)
{
    Elf_Data *d = elf_getdata(scn, NULL);
    size_t entsz = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT);
    if (!d || !d->d_buf || entsz == 0 || d->d_type != ELF_T_SYM)
        return 0;
    size_t count = d->d_size / entsz;
    for (size_t i = 1; i < count; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)i, &sym))
            break;
        unsigned type = GELF_ST_TYPE(sym.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_value == 0 ||
            sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE || sym.st_shndx >= nsec ||
            !secs[sym.st_shndx].exec)
            continue;
        const char *nm = elf_strptr(e, sh->sh_link, sym.st_name);
        if (!nm || !*nm)
            continue;
        if (pfr_sym_strpool_bytes(names) > c->max_bytes)
            return -EFBIG;
        uint32_t off = pfr_sym_strpool_add(names, nm, strlen(nm));
        if (off == PFR_STR_NONE)
            return -ENOMEM;
        struct cand x = {sym.st_value, sym.st_size, secs[sym.st_shndx].end, off,
                         (sym.st_size ? 0 : 8) + table_rank * 4 +
                             bind_rank(GELF_ST_BIND(sym.st_info))};
        int rc = push_cand(c, &x);
        if (rc)
            return rc;
    }
    return 0;
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

static int read_plt(Elf *e, struct collect *c, struct pfr_sym_strpool *names)
{
    struct plt_layout l;
    if (!find_plt(e, &l))
        return 0;
    Elf_Data *rd = elf_getdata(l.rela, NULL);
    Elf_Scn *dynsym = elf_getscn(e, l.rela_sh.sh_link);
    GElf_Shdr dsh;
    Elf_Data *dd = dynsym ? elf_getdata(dynsym, NULL) : NULL;
    size_t relsz = gelf_fsize(e, ELF_T_RELA, 1, EV_CURRENT);
    if (!rd || !dd || !gelf_getshdr(dynsym, &dsh) || relsz == 0 || rd->d_type != ELF_T_RELA ||
        dd->d_type != ELF_T_SYM)
        return 0;
    uint64_t end = l.stubs_sh.sh_addr + l.stubs_sh.sh_size;
    size_t n = rd->d_size / relsz;
    char buf[512];
    for (size_t i = 0; i < n; i++) {
        uint64_t addr = l.first + i * l.entsize;
        GElf_Rela r;
        GElf_Sym sym;
        if (addr < l.first || addr + l.entsize > end || !gelf_getrela(rd, (int)i, &r))
            break;
        if (!gelf_getsym(dd, (int)GELF_R_SYM(r.r_info), &sym))
            continue;
        const char *nm = elf_strptr(e, dsh.sh_link, sym.st_name);
        if (!nm || !*nm)
            continue;
        int len = snprintf(buf, sizeof(buf), "%s@plt", nm);
        if (len <= 0 || (size_t)len >= sizeof(buf))
            continue;
        if (pfr_sym_strpool_bytes(names) > c->max_bytes)
            return -EFBIG;
        uint32_t off = pfr_sym_strpool_add(names, buf, (size_t)len);
        if (off == PFR_STR_NONE)
            return -ENOMEM;
        /* ranked after every real symbol: a stub never hides a function */
        struct cand x = {addr, l.entsize, end, off, 16};
        int rc = push_cand(c, &x);
        if (rc)
            return rc;
    }
    return 0;
}

static int by_addr_rank(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* Sorted candidates -> one symbol per address with an extent: its size, or up to the next
 * symbol (and the end of its section) when it has none. Symbols inside the previous one
 * (local labels) are dropped so the enclosing function names the address. */
static int build(struct collect *c, struct pfr_sym_elf_syms *out)
{
    out->v = malloc((c->n ? c->n : 1) * sizeof(*out->v));
    if (!out->v)
        return -ENOMEM;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct cand *x = &c->v[i];
        if (out->n && (x->addr == out->v[out->n - 1].addr || x->addr < prev_end))
            continue;
        uint64_t end;
        if (x->size) {
            end = x->addr + x->size < x->addr ? UINT64_MAX : x->addr + x->size;
        } else {
            size_t j = i + 1;
            while (j < c->n && c->v[j].addr == x->addr)
                j++;
            end = j < c->n ? c->v[j].addr : x->sec_end;
            if (end > x->sec_end)
                end = x->sec_end;
            if (end <= x->addr)
                end = x->addr + 1;
        }
        uint64_t len = end - x->addr;
        if (len > UINT32_MAX)
            len = UINT32_MAX;
        if (len == 0)
            len = 1; /* a symbol at the very top of the address space */
        out->v[out->n++] = (struct pfr_sym_elf_sym){x->addr, (uint32_t)len, x->name, 0};
        prev_end = x->addr + len;
    }
    struct pfr_sym_elf_sym *nv = realloc(out->v, (out->n ? out->n : 1) * sizeof(*nv));
    if (nv)
        out->v = nv;
    return 0;
}

int pfr_sym_elf_read_syms(Elf *e, struct pfr_sym_elf_syms *out, size_t max_bytes, char *err,
                          size_t errlen)
{
    size_t nsec = 0;
    struct sec *secs = section_table(e, &nsec);
    if (!secs)
        return 0; /* no section headers: no symbols, frames fall back to module+offset */
    struct collect c = {NULL, 0, 0, max_bytes};
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
                rc = read_table(e, scn, &sh, (uint32_t)pass, secs, nsec, &c, &out->names);
        }
    }
    free(secs);
    if (rc == 0)
        rc = read_plt(e, &c, &out->names);
    if (rc == 0) {
        if (c.n)
            qsort(c.v, c.n, sizeof(*c.v), by_addr_rank);
        rc = build(&c, out);
    }
    free(c.v);
    if (rc) {
        if (rc == -EFBIG)
            snprintf(err, errlen, "symbol table larger than %zu bytes", max_bytes);
        pfr_sym_elf_syms_free(out);
        return rc;
    }
    pfr_sym_strpool_shrink(&out->names);
    return 0;
}

size_t pfr_sym_elf_syms_estimate(Elf *e)
{
    size_t total = 0;
    Elf_Scn *scn = NULL;
    unsigned count = 0;
    while ((scn = elf_nextscn(e, scn)) != NULL && count++ < MAX_SECTIONS) {
        GElf_Shdr sh, str;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
            continue;
        size_t entsz = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT);
        size_t n = entsz ? sh.sh_size / entsz : 0;
        Elf_Scn *strscn = elf_getscn(e, sh.sh_link);
        size_t strsz = strscn && gelf_getshdr(strscn, &str) ? str.sh_size : 0;
        size_t add = n * sizeof(struct pfr_sym_elf_sym) + strsz;
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
