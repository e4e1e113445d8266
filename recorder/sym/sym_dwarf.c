#include "sym_dwarf.h"
#include "sym_dwline.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_COST 48 /* bytes libdw keeps per line-table row, roughly */
/* bytes libdw holds per row while building a table: 1.29 GB for 12.6 M rows (measured) */
#define LINE_PEAK      112
#define MAX_NEST       16 /* namespaces and classes holding function definitions */
#define MAX_DIE_VISITS 100000

struct range {
    uint64_t lo, hi;
    uint32_t idx; /* unit (in the unit index) or function (in its unit) */
};

struct func {
    Dwarf_Die die;
};

struct unit {
    Dwarf_Die die;
    struct range *fr; /* function ranges, sorted; built on first use */
    struct func *fn;
    size_t nfr, nfn;
    int state; /* 0 not built, 1 built, -1 failed */
    int lines_counted;
};

struct pfr_sym_dwarf {
    Elf *elf;
    Dwarf *dbg;
    struct unit *units;
    size_t nunits;
    struct range *ur; /* unit ranges, sorted */
    size_t nur;
    size_t bytes, max_bytes;
    const unsigned char *line; /* .debug_line as libdw holds it (inflated), to size a unit's */
    size_t line_size;
    bool swap;        /* the file's byte order is not the host's */
    uint32_t refused; /* line tables not read: over max_bytes (since the last take) */
};

struct vec {
    void *v;
    size_t n, cap, elsz;
};

static void *vec_push(struct vec *v)
{
    if (v->n == v->cap) {
        size_t ncap = v->cap ? v->cap * 2 : 64;
        void *nv = realloc(v->v, ncap * v->elsz);
        if (!nv)
            return NULL;
        v->v = nv;
        v->cap = ncap;
    }
    return (char *)v->v + v->elsz * v->n++;
}

static int by_lo(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi > y->hi ? -1 : x->hi < y->hi; /* wider first */
}

static const struct range *find_range(const struct range *r, size_t n, uint64_t pc)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* ranges may nest or overlap a little (hostile or odd producers); look back a few */
    for (size_t k = lo, steps = 0; k > 0 && steps < 8; k--, steps++)
        if (pc < r[k - 1].hi)
            return &r[k - 1];
    return NULL;
}

static int add_ranges(struct vec *rv, Dwarf_Die *die, uint32_t idx)
{
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    int added = 0;
    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        if (hi <= lo)
            continue;
        struct range *r = vec_push(rv);
        if (!r)
            return -ENOMEM;
        *r = (struct range){lo, hi, idx};
        added++;
    }
    return added;
}

/* The uncompressed size from a SHF_COMPRESSED section's header, reading only that header
 * (gelf_getchdr would read the whole compressed section). */
static size_t compressed_size(Elf *e, const GElf_Shdr *sh)
{
    bool is64 = gelf_getclass(e) == ELFCLASS64;
    size_t hsz = is64 ? sizeof(Elf64_Chdr) : sizeof(Elf32_Chdr);
    if (sh->sh_size < hsz)
        return sh->sh_size;
    Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)sh->sh_offset, hsz, ELF_T_CHDR);
    if (!d || !d->d_buf || d->d_size < hsz)
        return SIZE_MAX; /* unreadable: libelf could not inflate it, so count it over any cap */
    if (is64) {
        Elf64_Chdr ch;
        memcpy(&ch, d->d_buf, sizeof(ch));
        return ch.ch_size;
    }
    Elf32_Chdr ch;
    memcpy(&ch, d->d_buf, sizeof(ch));
    return ch.ch_size;
}

/* The size a .zdebug section declares: "ZLIB" then the inflated size, big-endian. */
static size_t zdebug_size(Elf *e, const GElf_Shdr *sh)
{
    if (sh->sh_size < 12)
        return sh->sh_size;
    Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)sh->sh_offset, 12, ELF_T_BYTE);
    if (!d || !d->d_buf || d->d_size < 12 || memcmp(d->d_buf, "ZLIB", 4) != 0)
        return sh->sh_size; /* libelf will not inflate it either */
    const unsigned char *p = (const unsigned char *)d->d_buf + 4;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n = n << 8 | p[i];
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/* Sections libdw reads: .debug_*, .zdebug_* (GNU-compressed), and the LTO ones it takes in
 * their place (.gnu.debuglto_.debug_*). */
static bool is_debug_name(const char *name)
{
    return strncmp(name, ".debug", 6) == 0 || strncmp(name, ".zdebug", 7) == 0 ||
           strncmp(name, ".gnu.debuglto_", 14) == 0;
}

static size_t debug_bytes(Elf *e)
{
    size_t shstrndx, total = 0;
    if (elf_getshdrstrndx(e, &shstrndx) != 0)
        return 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
            continue;
        const char *name = elf_strptr(e, shstrndx, sh.sh_name);
        if (!name)
            continue;
        size_t size = sh.sh_size;
        if (!is_debug_name(name))
            continue;
        if (sh.sh_flags & SHF_COMPRESSED)
            size = compressed_size(e, &sh);
        else if (strncmp(name, ".zdebug", 7) == 0)
            size = zdebug_size(e, &sh);
        /* the declared size is what libelf allocates to inflate into (it fails on a stream
         * that inflates to anything else), so it bounds the inflated bytes */
        total = total + size < total ? SIZE_MAX : total + size;
    }
    return total;
}

size_t pfr_sym_dwarf_size(int fd)
{
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t n = e && elf_kind(e) == ELF_K_ELF ? debug_bytes(e) : 0;
    if (e)
        elf_end(e);
    return n;
}

static int build_unit_index(struct pfr_sym_dwarf *d, struct pfr_sym_budget *b)
{
    struct vec units = {NULL, 0, 0, sizeof(struct unit)};
    struct vec ranges = {NULL, 0, 0, sizeof(struct range)};
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    uint8_t type;
    int rc = 0;
    size_t seen = 0;
    while (dwarf_get_units(d->dbg, cu, &cu, NULL, &type, &cudie, NULL) == 0) {
        if (++seen % 256 == 0 && pfr_sym_budget_over(b)) {
            rc = -ETIME;
            break;
        }
        if (type != DW_UT_compile && type != DW_UT_partial && type != DW_UT_skeleton)
            continue;
        if (units.n >= UINT32_MAX)
            break;
        int added = add_ranges(&ranges, &cudie, (uint32_t)units.n);
        if (added < 0) {
            rc = added;
            break;
        }
        if (added == 0)
            continue; /* types only */
        struct unit *u = vec_push(&units);
        if (!u) {
            rc = -ENOMEM;
            break;
        }
        *u = (struct unit){.die = cudie};
    }
    if (rc) {
        free(units.v);
        free(ranges.v);
        return rc;
    }
    if (ranges.n)
        qsort(ranges.v, ranges.n, sizeof(struct range), by_lo);
    d->units = units.v;
    d->nunits = units.n;
    d->ur = ranges.v;
    d->nur = ranges.n;
    d->bytes += units.cap * sizeof(struct unit) + ranges.cap * sizeof(struct range);
    return 0;
}

/* .debug_line as libdw read it (inflated in place: no copy), for sizing line programs. */
static void find_line_section(struct pfr_sym_dwarf *d)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(d->elf, &shstrndx) != 0)
        return;
    const char *ident = elf_getident(d->elf, NULL);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    d->swap = ident && ident[EI_DATA] == ELFDATA2MSB;
#else
    d->swap = ident && ident[EI_DATA] == ELFDATA2LSB;
#endif
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(d->elf, scn)) != NULL) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(d->elf, shstrndx, sh.sh_name)) ||
            (strcmp(name, ".debug_line") != 0 && strcmp(name, ".zdebug_line") != 0 &&
             strcmp(name, ".gnu.debuglto_.debug_line") != 0))
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (data && data->d_buf) {
            d->line = data->d_buf;
            d->line_size = data->d_size;
        }
        return;
    }
}

int pfr_sym_dwarf_open(int fd, size_t max_bytes, struct pfr_sym_budget *b,
                       struct pfr_sym_dwarf **out, char *err, size_t errlen)
{
    *out = NULL;
    struct pfr_sym_dwarf *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->elf = elf_begin(fd, ELF_C_READ, NULL);
    int rc = 0;
    if (!d->elf || elf_kind(d->elf) != ELF_K_ELF) {
        snprintf(err, errlen, "not an ELF file");
        rc = -EINVAL;
        goto fail;
    }
    d->bytes = debug_bytes(d->elf);
    if (d->bytes == 0) {
        rc = -ENODATA;
        goto fail;
    }
    if (d->bytes > max_bytes) {
        snprintf(err, errlen, "debug sections take %zu bytes, over %zu", d->bytes, max_bytes);
        rc = pfr_sym_refuse(b, PFR_REFUSED_TOO_BIG, -EFBIG);
        goto fail;
    }
    d->max_bytes = max_bytes;
    d->dbg = dwarf_begin_elf(d->elf, DWARF_C_READ, NULL);
    if (!d->dbg) {
        snprintf(err, errlen, "no usable DWARF: %s", dwarf_errmsg(-1));
        rc = -ENODATA;
        goto fail;
    }
    /* libdw has read every debug section; the descriptor is not needed any more */
    elf_cntl(d->elf, ELF_C_FDDONE);
    find_line_section(d);
    rc = build_unit_index(d, b);
    if (rc == -ETIME)
        snprintf(err, errlen, "DWARF units not indexed within the time budget");
    if (rc)
        goto fail;
    *out = d;
    return 0;
fail:
    pfr_sym_dwarf_close(d);
    return rc;
}

static bool is_container(int tag)
{
    return tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
           tag == DW_TAG_union_type || tag == DW_TAG_module;
}

static int collect_funcs(Dwarf_Die *parent, int depth, struct vec *fr, struct vec *fn,
                         size_t *visits)
{
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0)
        return 0;
    do {
        if (++*visits > MAX_DIE_VISITS)
            return 0;
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram) {
            if (fn->n >= UINT32_MAX)
                return 0;
            int added = add_ranges(fr, &child, (uint32_t)fn->n);
            if (added < 0)
                return added;
            if (added > 0) {
                struct func *f = vec_push(fn);
                if (!f)
                    return -ENOMEM;
                f->die = child;
            }
        } else if (is_container(tag) && depth < MAX_NEST) {
            int rc = collect_funcs(&child, depth + 1, fr, fn, visits);
            if (rc)
                return rc;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

static struct unit *unit_for(struct pfr_sym_dwarf *d, uint64_t pc)
{
    const struct range *r = find_range(d->ur, d->nur, pc);
    if (!r || r->idx >= d->nunits)
        return NULL;
    struct unit *u = &d->units[r->idx];
    if (u->state == 0) {
        struct vec fr = {NULL, 0, 0, sizeof(struct range)};
        struct vec fn = {NULL, 0, 0, sizeof(struct func)};
        size_t visits = 0;
        if (collect_funcs(&u->die, 0, &fr, &fn, &visits) != 0) {
            free(fr.v);
            free(fn.v);
            u->state = -1;
            return u;
        }
        if (fr.n)
            qsort(fr.v, fr.n, sizeof(struct range), by_lo);
        u->fr = fr.v;
        u->nfr = fr.n;
        u->fn = fn.v;
        u->nfn = fn.n;
        u->state = 1;
        d->bytes += fr.cap * sizeof(struct range) + fn.cap * sizeof(struct func);
    }
    return u;
}

static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *s = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a))
        s = dwarf_formstring(&a);
    if (!s && dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
        s = dwarf_formstring(&a);
    if (!s && dwarf_attr_integrate(die, DW_AT_name, &a))
        s = dwarf_formstring(&a);
    return s;
}

static void call_site(Dwarf_Die *cudie, Dwarf_Die *inl, const char **file, int64_t *line)
{
    Dwarf_Attribute a;
    Dwarf_Word idx, ln;
    Dwarf_Files *files;
    size_t nfiles;
    *file = NULL;
    *line = 0;
    if (dwarf_attr(inl, DW_AT_call_file, &a) && dwarf_formudata(&a, &idx) == 0 &&
        dwarf_getsrcfiles(cudie, &files, &nfiles) == 0 && idx < nfiles)
        *file = dwarf_filesrc(files, idx, NULL, NULL);
    if (dwarf_attr(inl, DW_AT_call_line, &a) && dwarf_formudata(&a, &ln) == 0 && ln <= INT64_MAX)
        *line = (int64_t)ln;
}

static bool is_scope(int tag)
{
    return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
           tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

/* The inlined_subroutine DIEs holding pc under fn, outermost first. */
static int inline_chain(Dwarf_Die *fn, uint64_t pc, Dwarf_Die *chain, int max)
{
    Dwarf_Die cur = *fn, child;
    int depth = 0;
    size_t visits = 0;
    while (depth < max && dwarf_child(&cur, &child) == 0) {
        bool found = false;
        do {
            if (++visits > MAX_DIE_VISITS)
                return depth;
            int tag = dwarf_tag(&child);
            if (is_scope(tag) && dwarf_haspc(&child, pc) == 1) {
                found = true;
                if (tag == DW_TAG_inlined_subroutine)
                    chain[depth++] = child;
                break;
            }
        } while (dwarf_siblingof(&child, &child) == 0);
        if (!found)
            break;
        cur = child;
    }
    return depth;
}

/* What a unit's line table would cost libdw to build (LINE_PEAK a row), or SIZE_MAX when its
 * program is malformed or over the room (counting stops there). 0 without a table. */
static size_t line_peak(const struct pfr_sym_dwarf *d, struct unit *u, size_t room)
{
    Dwarf_Attribute a;
    Dwarf_Word off;
    if (!dwarf_attr(&u->die, DW_AT_stmt_list, &a))
        return 0;
    if (dwarf_formudata(&a, &off) != 0)
        return SIZE_MAX;
    uint64_t rows = pfr_sym_dwline_rows(d->line, d->line_size, off, d->swap, room / LINE_PEAK);
    return rows == PFR_DWLINE_BAD || rows > SIZE_MAX / LINE_PEAK ? SIZE_MAX
                                                                 : (size_t)rows * LINE_PEAK;
}

/* Whether the unit's line table may be built: its cost fits the room left under the cap. A
 * unit refused keeps its function names, without file:line. */
static bool lines_allowed(struct pfr_sym_dwarf *d, struct unit *u)
{
    if (u->lines_counted)
        return u->lines_counted > 0;
    size_t room = d->max_bytes > d->bytes ? d->max_bytes - d->bytes : 0;
    size_t peak = line_peak(d, u, room);
    if (peak > room) {
        u->lines_counted = -1;
        d->refused++;
        return false;
    }
    return true;
}

static void count_lines(struct pfr_sym_dwarf *d, struct unit *u)
{
    Dwarf_Lines *lines;
    size_t n;
    if (u->lines_counted)
        return;
    u->lines_counted = 1;
    if (dwarf_getsrclines(&u->die, &lines, &n) == 0)
        d->bytes += n * LINE_COST;
}

int pfr_sym_dwarf_lookup(struct pfr_sym_dwarf *d, uint64_t pc, struct pfr_sym_dwarf_frame *out,
                         size_t cap)
{
    if (!d || cap == 0)
        return 0;
    struct unit *u = unit_for(d, pc);
    if (!u)
        return 0;
    struct pfr_sym_dwarf_frame leaf = {NULL, NULL, 0};
    bool lines = lines_allowed(d, u);
    Dwarf_Line *l = lines ? dwarf_getsrc_die(&u->die, pc) : NULL;
    if (lines)
        count_lines(d, u);
    int lineno;
    if (l) {
        leaf.file = dwarf_linesrc(l, NULL, NULL);
        if (dwarf_lineno(l, &lineno) == 0)
            leaf.line = lineno;
    }
    const struct range *fr = u->state == 1 ? find_range(u->fr, u->nfr, pc) : NULL;
    if (!fr || fr->idx >= u->nfn) {
        out[0] = leaf;
        return 1;
    }
    Dwarf_Die *fn = &u->fn[fr->idx].die;
    Dwarf_Die chain[PFR_DWARF_MAX_INLINE];
    int max = cap - 1 < PFR_DWARF_MAX_INLINE ? (int)cap - 1 : PFR_DWARF_MAX_INLINE;
    int depth = inline_chain(fn, pc, chain, max);
    /* innermost frame: the deepest inlined function, at the line of pc */
    leaf.name = die_name(depth ? &chain[depth - 1] : fn);
    out[0] = leaf;
    /* each inlined call is a frame of its caller, at the call site */
    for (int k = depth - 1; k >= 0; k--) {
        struct pfr_sym_dwarf_frame *f = &out[depth - k];
        f->name = die_name(k ? &chain[k - 1] : fn);
        if (lines)
            call_site(&u->die, &chain[k], &f->file, &f->line);
        else
            f->file = NULL, f->line = 0;
    }
    return depth + 1;
}

uint32_t pfr_sym_dwarf_take_refused(struct pfr_sym_dwarf *d)
{
    uint32_t n = d ? d->refused : 0;
    if (d)
        d->refused = 0;
    return n;
}

size_t pfr_sym_dwarf_bytes(const struct pfr_sym_dwarf *d)
{
    return d ? d->bytes + sizeof(*d) : 0;
}

void pfr_sym_dwarf_close(struct pfr_sym_dwarf *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->nunits; i++) {
        free(d->units[i].fr);
        free(d->units[i].fn);
    }
    free(d->units);
    free(d->ur);
    if (d->dbg)
        dwarf_end(d->dbg);
    if (d->elf)
        elf_end(d->elf);
    free(d);
}
