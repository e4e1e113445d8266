/*
 * unwind_table: an ELF file's call-frame information as the sampler's unwind rows (x86-64).
 *
 * libdw does all the CFI interpretation; this file only finds where each FDE starts (the CIE's
 * 'R' pointer encoding), walks each FDE row by row with dwarf_cfi_addrframe(), and maps each
 * row's rules onto the few the sampler can follow. The input is any file mapped executable by
 * any process on the host, so every length and offset is checked, and the work per file is
 * bounded (MAX_FDE_ROWS, MAX_REPLAY, MAX_CFI_*, and the caller's pfr_unwind_limits: sizes and
 * counts checked before they are paid, CPU time as it goes) whatever the file says.
 *
 * Memory, for files as large as ClickHouse's library (680k FDEs, 35 MB of .eh_frame): the FDEs
 * are kept in 16 bytes each and sorted in place; libdw walks them CFI_CHUNK at a time, each
 * chunk with a Dwarf_CFI of its own over a search table of the builder's (libdw's caches go
 * with it); .eh_frame is copied a window at a time (unwind_image.h); and a table that passes
 * the caller's cap of rows stops there, its rows only counted when it has many FDEs.
 *
 * A row's rule, from libdw's (but for SIGNAL and END, the return address must be at CFA - 8
 * and the caller's rsp the CFA, or the row is NONE):
 *   CFA = rsp/rbp + off, 0 <= off <= PFR_UW_OFF_MAX   CFA_RSP / CFA_RBP
 *   ld's lazy PLT expression                          PLT, off and the threshold K as arg
 *   an FDE of an 'S' CIE (glibc's __restore_rt)       SIGNAL, whatever its rules
 *   return address undefined (_start, clone)          END
 *   CFA = *(rbp + off) (gcc's DRAP prologue)          CFA_DEREF_RBP: off signed (20-bit two's
 *                                                     complement, gcc's is -8) and arg the slot
 *                                                     of the caller's rbp from rbp, not from the
 *                                                     CFA (gcc saves it at [rbp]: arg 0)
 * and arg, elsewhere, is the caller's rbp slot from the CFA: rbp saved at CFA + 8 * arg, or 0
 * when rbp is same-value or undefined. Any other rule is NONE, counted in stats.unsupported.
 */
#include "unwind_table.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfr_clock.h"
#include "pfr_vec.h"
#include "unwind_image.h"

/* x86-64 DWARF register numbers */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA  16

#define MAX_XSEGS 16u
#define MAX_PHDRS PFR_UW_MAX_PHDRS
#define MAX_SCNS  PFR_UW_MAX_SCNS
#define MAX_NOTES PFR_UW_MAX_NOTES
/* Rows walked in one FDE: libdw replays an FDE's instructions from its start for every row;
 * real functions have at most a few hundred rows (libLLVM-14's largest: 573). */
#define MAX_FDE_ROWS 4096u
/* Instruction bytes libdw may replay for the whole file (each row counts its FDE's and CIE's
 * instructions whole), 1 to 3 ns a byte: bounds what a forged file can cost to ~1 s. Real files
 * stay far below it (libc 1.5 M, python3.11 3.4 M, libLLVM-14 63 M); past it, the rest of the file
 * is NONE rows. */
#define MAX_REPLAY (512u << 20)
/* What libdw would allocate for a forged file, checked before it runs the instructions: it sizes
 * a frame by the largest register number named (up to 2 GiB; x86-64's end at 125) and copies it
 * for each DW_CFA_remember_state not yet restored. */
#define MAX_CFI_REG   255u
#define MAX_CFI_DEPTH 64u
/* libdw keeps every FDE and CIE it looks up (~80 bytes each) until dwarf_cfi_end(): 47 MiB for
 * ClickHouse's 600k FDEs. .eh_frame's FDEs are walked CFI_CHUNK at a time, each chunk with a
 * Dwarf_CFI of its own: a new one costs a few microseconds, and libdw's search of its cache,
 * done for every row, is the faster the smaller the cache (64: 20 % less CPU than 4096). */
#ifndef CFI_CHUNK /* (the fuzz target sets a small one, to cross chunks in small files) */
#define CFI_CHUNK 64u
#endif
/* A file with more FDEs than the cap of rows over this has its rows counted before they are
 * kept (real files: 6 to 8 rows an FDE, so a table this dense is past the cap). */
#define COUNT_FIRST_FDE_ROWS 4u
/* .eh_frame pages kept copied before they are given back (unwind_image.h), by the FDE scan
 * and between chunks. */
#ifndef SCAN_HELD_MAX
#define SCAN_HELD_MAX 256u
#endif

/* The CPU time budget and share are looked at every TICK_EVERY entries or FDEs (a few
 * microseconds of work each), the share in slices of SLICE_NS of CPU: a build that takes a
 * share of 50 % runs 10 ms, sleeps 10 ms. */
#define TICK_EVERY 64u
#define SLICE_NS   (10 * 1000000ll)
/* CIEs a file may have per FDE it may have: ld merges equal CIEs (a handful in .eh_frame); an
 * unlinked .debug_frame has one per compilation unit. */
#define CIES_PER_FDES 16u

#ifndef NT_GO_BUILD_ID
#define NT_GO_BUILD_ID 4
#endif

struct xseg {
    uint64_t lo, hi; /* [p_vaddr, p_vaddr + p_memsz) of an executable PT_LOAD */
};

/* 16 bytes: ClickHouse's library has 680k FDEs. */
struct fde_span {
    uint64_t start; /* file virtual address of the FDE's code */
    uint32_t len;   /* bytes of code it covers, clipped to its segment */
    uint32_t off;   /* section offset of the FDE (builder.offs_ok) */
};

static uint64_t fde_end(const struct fde_span *f)
{
    return f->start + f->len;
}

struct cie_info {
    Dwarf_Off off; /* section offset of the CIE */
    int enc;       /* DW_EH_PE_* of its FDEs' addresses, -1 an augmentation not understood */
    bool sized;    /* 'z': FDEs have augmentation data, with its length */
    bool safe;     /* its instructions pass program_safe() */
    uint64_t len;  /* bytes of its initial instructions */
};

typedef struct builder {
    Elf *elf;
    const uint8_t *img; /* the image libelf reads, size img_size */
    size_t img_size;
    pfr_uw_image *im; /* its .eh_frame window, NULL: all of it is there */
    size_t max_rows;  /* 0: no cap */
    const pfr_unwind_limits *lim;
    uint64_t inflate;     /* declared sizes of the sections libdw would inflate, added up */
    int64_t cpu0, slice0; /* the thread's CPU time at the start, and at the last nap */
    unsigned ticks;
    pfr_unwind_table *out;
    char *err;
    size_t errlen;
    struct xseg segs[MAX_XSEGS];
    size_t nsegs;
    /* the CFI section being read */
    Elf_Data *data;
    uint64_t sec_addr; /* sh_addr, for pcrel pointers */
    bool eh_frame;
    struct cie_info *cies; /* in section order (offsets increase) */
    size_t ncies, cies_cap;
    struct fde_span *fdes;
    size_t nfdes, fdes_cap;
    bool offs_ok; /* every FDE's offset fits fde_span.off */
    uint64_t top; /* the end of the last FDE's code */
    size_t rows_cap;
    bool counting;                  /* rows counted, not kept: only the last two */
    struct pfr_unwind_row last2[2]; /* those, when counting */
    uint64_t replayed;              /* instruction bytes libdw may have replayed so far */
    Dwarf_CFI *cfi;                 /* libdw's, over .eh_frame or .debug_frame */
    Dwarf *dw;                      /* the handle owning cfi, over .debug_frame */
    /* .eh_frame only: libdw's own ELF file and search table; NULL when it reads .eh_frame itself */
    Elf *syn;     /* over PFR_UW_IMAGE_PREFIX bytes before the image, and the image */
    uint8_t *tab; /* its .eh_frame_hdr */
} builder;

__attribute__((format(printf, 3, 4))) static int fail(builder *b, int rc, const char *fmt, ...)
{
    if (b->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err, b->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static bool cancelled(const pfr_unwind_limits *l)
{
    return l->cancel && atomic_load_explicit(l->cancel, memory_order_relaxed);
}

/* The build's own memory that grows with the file: its CIEs, its FDE list and `rows` rows. */
static uint64_t grown_bytes(const builder *b, size_t rows)
{
    return (uint64_t)b->ncies * sizeof(struct cie_info) +
           (uint64_t)b->nfdes * sizeof(struct fde_span) +
           (uint64_t)rows * sizeof(struct pfr_unwind_row);
}

/* Whether that memory, with `rows` rows, stays within lim->max_bytes. */
static bool fits(const builder *b, size_t rows)
{
    return b->lim->max_bytes == 0 || grown_bytes(b, rows) <= b->lim->max_bytes;
}

/* -ENOBUFS if it would not: checked before it grows. */
static int check_room(builder *b, size_t rows)
{
    if (fits(b, rows))
        return 0;
    return fail(b, -ENOBUFS,
                "%zu FDEs and %zu rows pass the %llu bytes the memory budget leaves the build",
                b->nfdes, rows, (unsigned long long)b->lim->max_bytes);
}

/* Every TICK_EVERY calls: the caller's other work (lim->yield), the build cancelled, or refused
 * past its CPU time budget, and a nap when it has used more than its share of a core since the
 * last one. */
static int tick(builder *b)
{
    if (++b->ticks % TICK_EVERY)
        return 0;
    const pfr_unwind_limits *l = b->lim;
    if (cancelled(l))
        return fail(b, -ECANCELED, "cancelled");
    int64_t now = pfr_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (l->yield && l->yield(l->yield_ctx)) {
        /* the caller's work took the thread's CPU, not this build */
        int64_t after = pfr_clock_ns(CLOCK_THREAD_CPUTIME_ID);
        b->cpu0 += after - now;
        b->slice0 += after - now;
        now = after;
        if (cancelled(l))
            return fail(b, -ECANCELED, "cancelled");
    }
    if (l->max_cpu_ns && now - b->cpu0 > (int64_t)l->max_cpu_ns)
        return fail(b, -ETIME, "past its CPU time budget (%.1f s)", (double)l->max_cpu_ns / 1e9);
    unsigned share = l->cpu_share;
    if (share == 0 || share >= 100 || now - b->slice0 < SLICE_NS)
        return 0;
    int64_t nap = (now - b->slice0) * (100 - share) / share;
    struct timespec ts = {nap / 1000000000, nap % 1000000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    b->slice0 = pfr_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    return 0;
}

/* ---- the ELF file: kind, executable segments, Go ---- */

static int check_elf(builder *b)
{
    if (elf_kind(b->elf) != ELF_K_ELF)
        return fail(b, -ENOEXEC, "not an ELF file");
    size_t idlen = 0;
    const char *id = elf_getident(b->elf, &idlen);
    if (!id || idlen < EI_NIDENT || id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB)
        return fail(b, -ENOEXEC, "not a 64-bit little-endian ELF file");
    GElf_Ehdr eh;
    if (!gelf_getehdr(b->elf, &eh))
        return fail(b, -ENOEXEC, "unreadable ELF header: %s", elf_errmsg(-1));
    if (eh.e_machine != EM_X86_64)
        return fail(b, -ENOEXEC, "not an x86-64 ELF file (e_machine %u)", eh.e_machine);
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
        return fail(b, -ENOEXEC, "not an executable or shared object (e_type %u)", eh.e_type);
    return 0;
}

static bool note_is_go(Elf_Data *d)
{
    if (!d || !d->d_buf || (d->d_type != ELF_T_NHDR && d->d_type != ELF_T_NHDR8))
        return false;
    GElf_Nhdr nh;
    size_t off = 0, name_off, desc_off, next;
    while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
        if (nh.n_type == NT_GO_BUILD_ID && nh.n_namesz == 3 &&
            memcmp((const char *)d->d_buf + name_off, "Go", 3) == 0)
            return true;
        off = next;
    }
    return false;
}

/* The executable segments (one delta p_vaddr - p_offset for all) and Go's PT_NOTE. */
static int read_phdrs(builder *b, bool *is_go)
{
    size_t n;
    if (elf_getphdrnum(b->elf, &n) != 0)
        return fail(b, -ENOEXEC, "unreadable program headers: %s", elf_errmsg(-1));
    if (n > MAX_PHDRS)
        return fail(b, -ENOEXEC, "%zu program headers", n);
    bool have_delta = false;
    unsigned notes = 0;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(b->elf, (int)i, &ph))
            return fail(b, -ENOEXEC, "unreadable program header %zu", i);
        if (ph.p_type == PT_NOTE && notes++ < MAX_NOTES && ph.p_filesz > 0 && !*is_go) {
            Elf_Data *d = elf_getdata_rawchunk(b->elf, (int64_t)ph.p_offset, ph.p_filesz,
                                               ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
            *is_go = note_is_go(d);
        }
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0)
            continue;
        if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
            return fail(b, -ENOEXEC, "executable segment %zu wraps around", i);
        uint64_t delta = ph.p_vaddr - ph.p_offset;
        if (have_delta && delta != b->out->delta)
            return fail(b, -ENOTSUP, "executable segments with different p_vaddr - p_offset");
        if (b->nsegs == MAX_XSEGS)
            return fail(b, -ENOTSUP, "more than %u executable segments", MAX_XSEGS);
        b->out->delta = delta;
        have_delta = true;
        b->segs[b->nsegs++] = (struct xseg){ph.p_vaddr, ph.p_vaddr + ph.p_memsz};
    }
    if (!have_delta)
        return fail(b, -ENOEXEC, "no executable segment");
    return 0;
}

/* Make libdw find FDEs by reading .eh_frame in order, as collect_fdes() does, rather than by
 * the .eh_frame_hdr table: a forged table could lead it to an FDE that was never checked (the
 * image is ours, and libdw reads no table when the count's encoding is DW_EH_PE_omit). */
static void drop_search_table(Elf_Scn *scn)
{
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (d && d->d_buf && d->d_size >= 4 && ((uint8_t *)d->d_buf)[0] == 1)
        ((uint8_t *)d->d_buf)[2] = DW_EH_PE_omit;
}

static bool read_encoded(const uint8_t **p, const uint8_t *end, int fmt, uint64_t *v);

/* The FDEs .eh_frame_hdr says .eh_frame has: a file saying more than the limit is refused
 * before its FDEs are read (one that lies is stopped at the limit as it is read). */
static int check_hdr_count(builder *b, Elf_Scn *scn)
{
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (!d || !d->d_buf || d->d_size < 4 || ((const uint8_t *)d->d_buf)[0] != 1)
        return 0;
    const uint8_t *h = d->d_buf, *p = h + 4, *end = h + d->d_size;
    uint64_t ptr, count;
    if (!read_encoded(&p, end, h[1], &ptr) || !read_encoded(&p, end, h[2], &count) ||
        count <= b->lim->max_fdes)
        return 0;
    return fail(b, -EOVERFLOW, ".eh_frame_hdr counts %llu FDEs (the limit: %llu)",
                (unsigned long long)count, (unsigned long long)b->lim->max_fdes);
}

/* What libdw would inflate of a section (dwarf_begin_elf() inflates every compressed section it
 * knows, each whole): the declared size of an SHF_COMPRESSED section or of a .zdebug one
 * ("ZLIB" and a big-endian size), 0 for one not compressed. Sections not named .debug_* or
 * .zdebug_* are counted too: what libdw knows changes with its version. */
static uint64_t inflated_size(Elf_Scn *scn, const GElf_Shdr *sh, const char *name)
{
    if (sh->sh_flags & SHF_COMPRESSED) {
        GElf_Chdr ch;
        return gelf_getchdr(scn, &ch) ? ch.ch_size : 0; /* (libelf cannot inflate it either) */
    }
    if (strncmp(name, ".zdebug", 7) != 0)
        return 0;
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (!d || !d->d_buf || d->d_size < 12 || memcmp(d->d_buf, "ZLIB", 4) != 0)
        return 0;
    uint64_t v = 0;
    for (int i = 4; i < 12; i++)
        v = v << 8 | ((const uint8_t *)d->d_buf)[i];
    return v;
}

/* The sections the builder needs (by name), and the marks of a Go program. */
static int read_sections(builder *b, Elf_Scn **eh_frame, Elf_Scn **debug_frame, bool *is_go)
{
    size_t shstrndx;
    *eh_frame = *debug_frame = NULL;
    if (elf_getshdrstrndx(b->elf, &shstrndx) != 0)
        return 0; /* no section names: no sections we can find */
    Elf_Scn *scn = NULL;
    unsigned count = 0, seen_hdr = 0;
    while ((scn = elf_nextscn(b->elf, scn)) != NULL) {
        if (++count > MAX_SCNS)
            return fail(b, -ENOEXEC, "more than %u sections", MAX_SCNS);
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            return fail(b, -ENOEXEC, "unreadable section header: %s", elf_errmsg(-1));
        const char *name = elf_strptr(b->elf, shstrndx, sh.sh_name);
        if (!name)
            continue;
        if (strcmp(name, ".gopclntab") == 0 || strcmp(name, ".go.buildinfo") == 0 ||
            strcmp(name, ".data.rel.ro.gopclntab") == 0)
            *is_go = true;
        if (sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
            continue;
        uint64_t inflated = inflated_size(scn, &sh, name);
        b->inflate = inflated > UINT64_MAX - b->inflate ? UINT64_MAX : b->inflate + inflated;
        if (sh.sh_type == SHT_NOTE && !*is_go && strcmp(name, ".note.go.buildid") == 0)
            *is_go = note_is_go(elf_getdata(scn, NULL));
        else if (strcmp(name, ".eh_frame") == 0) {
            if (*eh_frame) /* libdw and we must read the same one: no linker writes two */
                return fail(b, -ENOEXEC, "two .eh_frame sections");
            if (sh.sh_size > b->lim->max_eh_frame_bytes)
                return fail(b, -EFBIG, "an .eh_frame of %llu bytes (the limit: %llu)",
                            (unsigned long long)sh.sh_size,
                            (unsigned long long)b->lim->max_eh_frame_bytes);
            *eh_frame = scn;
        } else if (strcmp(name, ".eh_frame_hdr") == 0) {
            if (seen_hdr++)
                return fail(b, -ENOEXEC, "two .eh_frame_hdr sections");
            int rc = check_hdr_count(b, scn);
            if (rc < 0)
                return rc;
            drop_search_table(scn);
        } else if (!*debug_frame && strcmp(name, ".debug_frame") == 0) {
            *debug_frame = scn;
        }
    }
    return 0;
}

/* ---- FDE enumeration: only each FDE's initial location and range are decoded here ---- */

/* A ULEB128 at *p: the value of its bytes within end (what libdw takes from a cut one),
 * UINT64_MAX past 56 bits. false when no byte is within end. */
static bool read_uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t x = 0;
    unsigned shift = 0;
    if (q >= end)
        return false;
    while (q < end) {
        uint8_t byte = *q++;
        x = shift < 56 ? x | (uint64_t)(byte & 0x7f) << shift : UINT64_MAX;
        shift += 7;
        if (!(byte & 0x80))
            break;
    }
    *p = q;
    *v = x;
    return true;
}

/* Read a value of DW_EH_PE format fmt (low nibble) at *p, within end. false: truncated or not
 * a format. */
static bool read_encoded(const uint8_t **p, const uint8_t *end, int fmt, uint64_t *v)
{
    const uint8_t *q = *p;
    size_t len;
    switch (fmt & 0x0f) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8:
        len = 8;
        break;
    case DW_EH_PE_udata4:
    case DW_EH_PE_sdata4:
        len = 4;
        break;
    case DW_EH_PE_udata2:
    case DW_EH_PE_sdata2:
        len = 2;
        break;
    case DW_EH_PE_uleb128:
    case DW_EH_PE_sleb128: /* no producer uses them for addresses: sized, not sign-extended */
        for (const uint8_t *r = q; r < end; r++)
            if (!(*r & 0x80)) {
                *p = r + 1;
                return read_uleb(&q, r + 1, v);
            }
        return false;
    default:
        return false;
    }
    if ((size_t)(end - q) < len)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++)
        x |= (uint64_t)q[i] << (8 * i);
    if ((fmt & 0x0f) == DW_EH_PE_sdata4)
        x = (uint64_t)(int64_t)(int32_t)(uint32_t)x;
    else if ((fmt & 0x0f) == DW_EH_PE_sdata2)
        x = (uint64_t)(int64_t)(int16_t)(uint16_t)x;
    *v = x;
    *p = q + len;
    return true;
}

/* Whether libdw can run a CIE's or FDE's instructions without the allocations a forged file
 * could ask of it (MAX_CFI_REG, MAX_CFI_DEPTH), nor reading a block past them. Operands are
 * only sized here, as libdw reads them: nothing is interpreted. A program cut short, or an
 * opcode libdw does not know either, ends the check: libdw stops there too. enc sizes
 * DW_CFA_set_loc's operand. */
static bool program_safe(const uint8_t *p, const uint8_t *end, int enc)
{
    unsigned depth = 0;
    while (p < end) {
        uint8_t op = *p++;
        uint64_t v;
        int regs = 0; /* register operands first */
        int then = 0; /* then 1: a LEB128, 2: a block */
        size_t fixed = 0;
        switch (op >> 6) {
        case 1: /* advance_loc */
        case 3: /* restore: the register is in the opcode, < 64 */
            continue;
        case 2: /* offset: register in the opcode, then a LEB128 */
            then = 1;
            break;
        default:
            switch (op) {
            case DW_CFA_nop:
            case DW_CFA_GNU_window_save:
                continue;
            case DW_CFA_remember_state:
                if (++depth > MAX_CFI_DEPTH)
                    return false;
                continue;
            case DW_CFA_restore_state:
                depth -= depth > 0;
                continue;
            case DW_CFA_set_loc:
                if (!read_encoded(&p, end, enc, &v))
                    return true;
                continue;
            case DW_CFA_advance_loc1:
                fixed = 1;
                break;
            case DW_CFA_advance_loc2:
                fixed = 2;
                break;
            case DW_CFA_advance_loc4:
                fixed = 4;
                break;
            case DW_CFA_MIPS_advance_loc8:
                fixed = 8;
                break;
            case DW_CFA_offset_extended:
            case DW_CFA_offset_extended_sf:
            case DW_CFA_val_offset:
            case DW_CFA_val_offset_sf:
            case DW_CFA_def_cfa:
            case DW_CFA_def_cfa_sf:
            case DW_CFA_GNU_negative_offset_extended:
                regs = 1, then = 1;
                break;
            case DW_CFA_restore_extended:
            case DW_CFA_undefined:
            case DW_CFA_same_value:
            case DW_CFA_def_cfa_register:
                regs = 1;
                break;
            case DW_CFA_register:
                regs = 2;
                break;
            case DW_CFA_def_cfa_offset:
            case DW_CFA_def_cfa_offset_sf:
            case DW_CFA_GNU_args_size:
                then = 1;
                break;
            case DW_CFA_def_cfa_expression:
                then = 2;
                break;
            case DW_CFA_expression:
            case DW_CFA_val_expression:
                regs = 1, then = 2;
                break;
            default:
                return true; /* libdw rejects it and stops */
            }
        }
        if (fixed > (size_t)(end - p))
            return true;
        p += fixed;
        for (int i = 0; i < regs; i++) {
            if (!read_uleb(&p, end, &v))
                return true; /* libdw reads one byte past: a register < 128 */
            if (v > MAX_CFI_REG)
                return false;
        }
        if (then && !read_uleb(&p, end, &v))
            return true;
        if (then == 2) {
            if (v > (uint64_t)(end - p))
                return true; /* libdw checks a block's length */
            p += v;
        }
    }
    return true;
}

/* A CIE as libdw reads it (cie.c): its FDEs' address encoding, from the 'z' augmentation's
 * letters L, P, R and S; -1 for any other augmentation (no toolchain writes one), which makes
 * the file refused, since where its FDEs' instructions start would be a guess. */
static struct cie_info read_cie(const builder *b, Dwarf_Off off, const Dwarf_CIE *cie)
{
    struct cie_info ci = {.off = off, .enc = DW_EH_PE_absptr};
    const uint8_t *buf = b->data->d_buf, *lim = buf + b->data->d_size;
    const uint8_t *ins = cie->initial_instructions, *ins_end = cie->initial_instructions_end;
    if (!ins || ins < buf || ins_end < ins || ins_end > lim) {
        ci.enc = -1;
        return ci;
    }
    ci.len = (uint64_t)(ins_end - ins);
    const char *aug = cie->augmentation;
    if (aug[0] != '\0' && aug[0] != 'z')
        ci.enc = -1;
    const uint8_t *p = cie->augmentation_data;
    const uint8_t *end = p ? p + cie->augmentation_data_size : NULL;
    if (aug[0] == 'z' &&
        (!p || p < buf || p > lim || cie->augmentation_data_size > (size_t)(lim - p)))
        ci.enc = -1;
    for (const char *a = aug; ci.enc >= 0 && *a; a++) {
        uint64_t ignored;
        switch (*a) {
        case 'z':
            ci.sized = a == aug;
            ci.enc = ci.sized ? ci.enc : -1;
            break;
        case 'R':
            ci.enc = p < end ? *p++ : -1;
            break;
        case 'L': /* the LSDA's encoding */
            if (p++ >= end)
                ci.enc = -1;
            break;
        case 'P':
            if (p >= end || (*p & 0x70) == DW_EH_PE_aligned) {
                ci.enc = -1;
                break;
            }
            p++;
            if (!read_encoded(&p, end, p[-1], &ignored))
                ci.enc = -1;
            break;
        case 'S': /* signal frame: libdw tells dwarf_frame_info's signalp */
            break;
        default:
            ci.enc = -1;
        }
    }
    ci.safe = ci.enc >= 0 && program_safe(ins, ins_end, ci.enc);
    return ci;
}

static int add_cie(builder *b, Dwarf_Off off, const Dwarf_CIE *cie)
{
    if (b->ncies >= b->lim->max_fdes / CIES_PER_FDES + CIES_PER_FDES)
        return fail(b, -EOVERFLOW, "more than %zu CIEs", b->ncies);
    int rc = check_room(b, 0);
    if (rc < 0)
        return rc;
    if (PFR_VEC_RESERVE(b->cies, b->cies_cap, b->ncies + 1))
        return fail(b, -ENOMEM, "out of memory");
    b->cies[b->ncies++] = read_cie(b, off, cie);
    return 0;
}

static int need_entry(builder *b, uint64_t off);

/* The CIE at section offset off: seen already (binary search, offsets increase), or read there
 * now (a CIE placed after its FDEs). 1, or 0 if there is none (libdw cannot use the FDE
 * either), or a negative errno (the file cannot be read again). */
static int find_cie(builder *b, const unsigned char *ident, Dwarf_Off off, struct cie_info *ci)
{
    size_t lo = 0, hi = b->ncies;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->cies[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < b->ncies && b->cies[lo].off == off) {
        *ci = b->cies[lo];
        return 1;
    }
    Dwarf_CFI_Entry e;
    Dwarf_Off next;
    int rc = need_entry(b, off);
    if (rc < 0)
        return rc;
    if (dwarf_next_cfi(ident, b->data, b->eh_frame, off, &next, &e) != 0 || !dwarf_cfi_cie_p(&e))
        return 0;
    *ci = read_cie(b, off, &e.cie);
    return 1;
}

/* Record the FDE at section offset off if it starts in an executable segment, clipped to it. */
static int add_fde(builder *b, uint64_t off, uint64_t start, uint64_t range)
{
    if (range == 0 || start + range < start)
        return 0;
    for (size_t i = 0; i < b->nsegs; i++) {
        if (start < b->segs[i].lo || start >= b->segs[i].hi)
            continue;
        uint64_t end = start + range < b->segs[i].hi ? start + range : b->segs[i].hi;
        int rc = check_room(b, 0);
        if (rc < 0)
            return rc;
        if (PFR_VEC_RESERVE(b->fdes, b->fdes_cap, b->nfdes + 1))
            return fail(b, -ENOMEM, "out of memory");
        /* a longer one makes the code span 4 GiB or more: refused by build_rows(), from top */
        uint32_t len = end - start < UINT32_MAX ? (uint32_t)(end - start) : UINT32_MAX;
        b->fdes[b->nfdes++] = (struct fde_span){start, len, (uint32_t)off};
        b->offs_ok &= off <= UINT32_MAX;
        if (end > b->top)
            b->top = end;
        return 0;
    }
    return 0; /* outside the code (a discarded function's tombstone, garbage): no rows */
}

/* An FDE's initial location and range as written, and where its instructions start, read as
 * libdw reads them (fde.c). false if libdw cannot read them either. */
static bool fde_fields(const builder *b, const struct cie_info *ci, const Dwarf_FDE *fde,
                       uint64_t *start, uint64_t *range, const uint8_t **ins)
{
    const uint8_t *buf = b->data->d_buf, *lim = buf + b->data->d_size;
    const uint8_t *p = fde->start, *end = fde->end;
    uint64_t auglen;
    if (!p || p < buf || end < p || end > lim || !read_encoded(&p, end, ci->enc, start) ||
        !read_encoded(&p, end, ci->enc & 0x0f, range))
        return false;
    if (ci->sized && (!read_uleb(&p, end, &auglen) || auglen > (uint64_t)(end - p)))
        return false;
    *ins = ci->sized ? p + auglen : p;
    return true;
}

/* An FDE, read as libdw reads it. Every FDE is checked, used or not: libdw may pick any of
 * them for an address. */
static int decode_fde(builder *b, const unsigned char *ident, Dwarf_Off off, const Dwarf_FDE *fde)
{
    /* libdw keeps every FDE of .debug_frame it reads (.eh_frame's are walked a chunk at a time) */
    uint64_t max = b->eh_frame ? b->lim->max_fdes : b->lim->max_fdes / 4;
    if (++b->out->stats.fdes > max)
        return fail(b, -EOVERFLOW, "more than %llu FDEs in %s (the limit)", (unsigned long long)max,
                    b->eh_frame ? ".eh_frame" : ".debug_frame");
    struct cie_info ci;
    int found = find_cie(b, ident, fde->CIE_pointer, &ci);
    if (found <= 0)
        return found;
    if (ci.enc < 0)
        return fail(b, -ENOEXEC, "a CIE (FDE at %#llx) with an augmentation not understood",
                    (unsigned long long)off);
    if (!ci.safe)
        return fail(b, -ENOEXEC,
                    "the CIE of the FDE at %#llx names a register past %u or nests states past %u",
                    (unsigned long long)off, MAX_CFI_REG, MAX_CFI_DEPTH);
    uint64_t start, range;
    const uint8_t *ins;
    if (!fde_fields(b, &ci, fde, &start, &range, &ins))
        return 0; /* libdw fails on it as well */
    if (!program_safe(ins, fde->end, ci.enc))
        return fail(b, -ENOEXEC,
                    "the FDE at %#llx names a register past %u or nests states past %u",
                    (unsigned long long)off, MAX_CFI_REG, MAX_CFI_DEPTH);
    if (ci.enc & DW_EH_PE_indirect)
        return 0;
    switch (ci.enc & 0x70) {
    case DW_EH_PE_absptr:
        break;
    case DW_EH_PE_pcrel:
        start +=
            b->sec_addr + (uint64_t)((const uint8_t *)fde->start - (const uint8_t *)b->data->d_buf);
        break;
    default:
        return 0; /* textrel, datarel, funcrel, aligned: not used for x86-64 FDEs */
    }
    return add_fde(b, off, start, range);
}

/* Whether the section being read lies in the image (libelf may hand back a copy). */
static bool data_in_image(const builder *b)
{
    const uint8_t *d = b->data->d_buf;
    return d >= b->img && (size_t)(d - b->img) <= b->img_size &&
           b->data->d_size <= b->img_size - (size_t)(d - b->img);
}

static int collect_fdes(builder *b, Elf_Scn *scn, bool eh_frame)
{
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh))
        return fail(b, -ENOEXEC, "unreadable section header: %s", elf_errmsg(-1));
    /* .eh_frame as libdw reads it (raw); .debug_frame as libdw's Dwarf handle does */
    b->data = eh_frame ? elf_rawdata(scn, NULL) : elf_getdata(scn, NULL);
    if (!b->data || !b->data->d_buf)
        return fail(b, -ENOEXEC, "unreadable %s: %s", eh_frame ? ".eh_frame" : ".debug_frame",
                    elf_errmsg(-1));
    b->sec_addr = sh.sh_addr;
    b->eh_frame = eh_frame;
    b->ncies = b->nfdes = 0;
    b->offs_ok = true;
    b->top = 0;
    if (eh_frame && !data_in_image(b) && pfr_uw_image_need_all(b->im) < 0)
        return fail(b, -EIO, "cannot read .eh_frame"); /* (a copy: the window cannot tell) */
    const unsigned char *ident = (const unsigned char *)elf_getident(b->elf, NULL);
    Dwarf_Off off = 0, next;
    Dwarf_CFI_Entry e;
    for (;;) {
        if (pfr_uw_image_held(b->im) > SCAN_HELD_MAX)
            pfr_uw_image_drop(b->im); /* nothing points into it between two entries */
        int rc = eh_frame ? need_entry(b, off) : 0;
        if (rc == 0)
            rc = tick(b);
        if (rc < 0)
            return rc;
        next = (Dwarf_Off)-1; /* not set by an error before the entry's length is read */
        rc = dwarf_next_cfi(ident, b->data, eh_frame, off, &next, &e);
        if (rc > 0)
            break;
        if (rc == 0) {
            rc = dwarf_cfi_cie_p(&e) ? add_cie(b, off, &e.cie) : decode_fde(b, ident, off, &e.fde);
            if (rc < 0)
                return rc;
        }
        /* a bad entry whose length is known is skipped; otherwise the walk ends */
        if (next == (Dwarf_Off)-1 || next <= off)
            break;
        off = next;
    }
    return 0;
}

/* FDE order: by start, then end, then section offset (FDEs of the same code keep the order
 * they were read in). */
static bool fde_before(const struct fde_span *x, const struct fde_span *y)
{
    if (x->start != y->start)
        return x->start < y->start;
    if (x->len != y->len)
        return x->len < y->len;
    return x->off < y->off;
}

static void sift_down(struct fde_span *a, size_t i, size_t n)
{
    for (size_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && fde_before(&a[c], &a[c + 1]))
            c++;
        if (!fde_before(&a[i], &a[c]))
            return;
        struct fde_span t = a[i];
        a[i] = a[c];
        a[c] = t;
    }
}

static int cmp_fde(const void *x, const void *y)
{
    return fde_before(x, y) ? -1 : fde_before(y, x);
}

/* qsort's merge sort takes a copy of the array: 11 MiB for ClickHouse's FDEs. Past this, a heap
 * sort in place (O(n log n) whatever a forged file's order, slower); the order is total, so
 * both give the same. */
#define SORT_COPY_MAX (256u * 1024u)

static void sort_fdes(struct fde_span *a, size_t n)
{
    size_t i = 1;
    while (i < n && !fde_before(&a[i], &a[i - 1]))
        i++;
    if (i >= n)
        return; /* in order already, as FDEs often are */
    if (n <= SORT_COPY_MAX / sizeof(*a)) {
        qsort(a, n, sizeof(*a), cmp_fde);
        return;
    }
    for (i = n / 2; i-- > 0;)
        sift_down(a, i, n);
    for (i = n; i-- > 1;) {
        struct fde_span t = a[0];
        a[0] = a[i];
        a[i] = t;
        sift_down(a, 0, i);
    }
}

/* ---- rows ---- */

static int64_t sword(Dwarf_Word w)
{
    return (int64_t)w;
}

/* The CFA-relative slot (CFA + 8 * slot) of a register saved by DW_CFA_offset: libdw hands
 * back "DW_OP_call_frame_cfa; DW_OP_plus_uconst k" (k two's complement), or the first op
 * alone when k is 0. false for any other rule. */
static bool cfa_slot(const Dwarf_Op *ops, size_t n, int64_t *slot)
{
    if (n == 0 || n > 2 || !ops || ops[0].atom != DW_OP_call_frame_cfa)
        return false;
    int64_t k = n == 2 ? sword(ops[1].number) : 0;
    if (n == 2 && ops[1].atom != DW_OP_plus_uconst)
        return false;
    if (k % 8 != 0)
        return false;
    *slot = k / 8;
    return true;
}

/* Base register and offset of "DW_OP_bregN off" or "DW_OP_bregx N off". */
static bool breg(const Dwarf_Op *op, int *reg, int64_t *off)
{
    if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
        *reg = op->atom - DW_OP_breg0;
        *off = sword(op->number);
        return true;
    }
    if (op->atom == DW_OP_bregx && op->number < 64) {
        *reg = (int)op->number;
        *off = sword(op->number2);
        return true;
    }
    return false;
}

/* gcc's and ld's lazy PLT: CFA = rsp + off + ((rip & 15) >= K ? 8 : 0), i.e.
 * breg7 off; breg16 0; lit15; and; litK; ge; lit3; shl; plus. */
static bool plt_expr(const Dwarf_Op *ops, size_t n, int64_t *off, int *k)
{
    static const uint8_t tail[] = {DW_OP_lit15, DW_OP_and, 0,         DW_OP_ge,
                                   DW_OP_lit3,  DW_OP_shl, DW_OP_plus};
    int reg;
    int64_t ripoff;
    if (n != 9 || !breg(&ops[0], &reg, off) || reg != REG_RSP || !breg(&ops[1], &reg, &ripoff) ||
        reg != REG_RA || ripoff != 0)
        return false;
    for (size_t i = 0; i < sizeof(tail); i++)
        if (i != 2 && ops[2 + i].atom != tail[i])
            return false;
    if (ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit31)
        return false;
    *k = ops[4].atom - DW_OP_lit0;
    return true;
}

#define NONE_RULE PFR_UW_RULE(PFR_UW_NONE, 0, 0)

/* The rule of one libdw row; *unsupported set when a rule we cannot follow made it NONE. */
static uint32_t translate(Dwarf_Frame *f, bool signalp, bool *unsupported)
{
    Dwarf_Op mem[3], *ops;
    size_t n;
    *unsupported = true;
    if (signalp) {
        *unsupported = false;
        return PFR_UW_RULE(PFR_UW_SIGNAL, 0, 0);
    }
    /* the return address: undefined ends the stack (nops 0, ops = our mem; a NULL ops with
     * nops 0 is "same value"), else it must be at CFA - 8 */
    if (dwarf_frame_register(f, REG_RA, mem, &ops, &n) != 0)
        return NONE_RULE;
    if (n == 0 && ops != NULL) {
        *unsupported = false;
        return PFR_UW_RULE(PFR_UW_END, 0, 0);
    }
    int64_t slot;
    if (!cfa_slot(ops, n, &slot) || slot != -1)
        return NONE_RULE;
    /* the caller's rsp must be the CFA: libdw gives "call_frame_cfa; stack_value" */
    if (dwarf_frame_register(f, REG_RSP, mem, &ops, &n) != 0 || n != 2 || !ops ||
        ops[0].atom != DW_OP_call_frame_cfa || ops[1].atom != DW_OP_stack_value)
        return NONE_RULE;

    Dwarf_Op *rops;
    size_t rn;
    if (dwarf_frame_register(f, REG_RBP, mem, &rops, &rn) != 0)
        return NONE_RULE;
    /* rbp: same value (nops 0, ops NULL) or undefined (nops 0): arg 0; saved at CFA + 8k: k */
    bool rbp_kept = rn == 0;
    int64_t rslot = 0;
    bool rbp_cfa = !rbp_kept && cfa_slot(rops, rn, &rslot) && rslot != 0 &&
                   rslot >= PFR_UW_ARG_MIN && rslot <= PFR_UW_ARG_MAX;

    if (dwarf_frame_cfa(f, &ops, &n) != 0 || n == 0)
        return NONE_RULE;
    int reg, k;
    int64_t off;
    if (n == 1 && breg(&ops[0], &reg, &off) && (reg == REG_RSP || reg == REG_RBP)) {
        if (off < 0 || off > PFR_UW_OFF_MAX || !(rbp_kept || rbp_cfa))
            return NONE_RULE;
        *unsupported = false;
        return PFR_UW_RULE(reg == REG_RSP ? PFR_UW_CFA_RSP : PFR_UW_CFA_RBP, (int)rslot,
                           (uint32_t)off);
    }
    if (n == 2 && breg(&ops[0], &reg, &off) && reg == REG_RBP && ops[1].atom == DW_OP_deref) {
        /* gcc's DRAP prologue: CFA = *(rbp - 8), rbp saved at [rbp] (DW_CFA_expression
         * "breg6 0", which libdw hands back behind a DW_OP_call_frame_cfa). Here off is
         * signed (20-bit two's complement) and arg is the caller rbp's slot from rbp. */
        const Dwarf_Op *e = rops;
        size_t en = rn;
        if (en > 0 && e[0].atom == DW_OP_call_frame_cfa) {
            e++;
            en--;
        }
        int r2;
        int64_t roff;
        if (en != 1 || !breg(&e[0], &r2, &roff) || r2 != REG_RBP || roff % 8 != 0 ||
            roff / 8 < PFR_UW_ARG_MIN || roff / 8 > PFR_UW_ARG_MAX)
            return NONE_RULE;
        if (off < -(int64_t)(PFR_UW_OFF_MAX / 2) - 1 || off > (int64_t)(PFR_UW_OFF_MAX / 2))
            return NONE_RULE;
        *unsupported = false;
        return PFR_UW_RULE(PFR_UW_CFA_DEREF_RBP, (int)(roff / 8), (uint32_t)off & PFR_UW_OFF_MAX);
    }
    if (plt_expr(ops, n, &off, &k)) {
        if (off < 0 || off > PFR_UW_OFF_MAX || !rbp_kept)
            return NONE_RULE;
        *unsupported = false;
        return PFR_UW_RULE(PFR_UW_PLT, k, (uint32_t)off);
    }
    return NONE_RULE;
}

/* Row i: the table's, or when only counting, one of the last two. */
static struct pfr_unwind_row *row(builder *b, size_t i)
{
    return b->counting ? &b->last2[i & 1] : &b->out->rows[i];
}

/* Append a row at vaddr; a rule equal to the last row's extends it instead. Past max_rows the
 * table could never be loaded: the build stops there. */
static int push_row(builder *b, uint64_t vaddr, uint32_t rule)
{
    pfr_unwind_table *t = b->out;
    uint32_t pc = (uint32_t)(vaddr - t->base);
    struct pfr_unwind_row *last = t->nrows ? row(b, t->nrows - 1) : NULL;
    if (last && last->rule == rule)
        return 0;
    if (last && last->pc == pc) {
        /* an empty row (cannot happen with increasing addresses; kept safe) */
        last->rule = rule;
        if (t->nrows > 1 && row(b, t->nrows - 2)->rule == rule)
            t->nrows--;
        return 0;
    }
    if (b->max_rows && t->nrows == b->max_rows)
        return fail(b, -E2BIG, "more than %zu rows (the cap), at %#llx", b->max_rows,
                    (unsigned long long)vaddr);
    if (!b->counting) {
        int rc = check_room(b, t->nrows + 1);
        if (rc < 0)
            return rc;
        if (PFR_VEC_RESERVE(t->rows, b->rows_cap, t->nrows + 1))
            return fail(b, -ENOMEM, "out of memory");
    }
    *row(b, t->nrows++) = (struct pfr_unwind_row){pc, rule};
    return 0;
}

/* The rows of [lo, end), part of an FDE, from libdw, one row after the other. Each costs libdw
 * replay bytes of instructions. */
static int walk_fde(builder *b, const struct fde_span *fd, uint64_t lo, uint64_t replay)
{
    uint64_t addr = lo, end = fde_end(fd);
    for (unsigned i = 0; addr < end; i++) {
        Dwarf_Frame *f = NULL;
        if (i >= MAX_FDE_ROWS || b->replayed > MAX_REPLAY ||
            dwarf_cfi_addrframe(b->cfi, addr, &f) != 0)
            break;
        b->replayed += replay;
        Dwarf_Addr s, e;
        bool signalp = false;
        int ra = dwarf_frame_info(f, &s, &e, &signalp);
        if (ra < 0 || s > addr || e <= addr) {
            free(f);
            break;
        }
        bool unsupported = true; /* a CIE whose return address is not rip's: unsupported */
        uint32_t rule = ra == REG_RA ? translate(f, signalp, &unsupported) : NONE_RULE;
        free(f);
        b->out->stats.rows_in++;
        if (unsupported)
            b->out->stats.unsupported++;
        int rc = push_row(b, addr, rule);
        if (rc < 0)
            return rc;
        addr = e;
    }
    if (addr < end) {
        /* libdw failed here, or the bounds above: the rest of the FDE has no rule */
        b->out->stats.unsupported++;
        return push_row(b, addr, NONE_RULE);
    }
    return 0;
}

/* ---- our search table: libdw finds each FDE by its offset, one chunk at a time ----
 *
 * Without a search table libdw finds an FDE by reading .eh_frame from the start, keeping every
 * entry it reads: a new Dwarf_CFI per chunk would read the section again each time. With the
 * file's own table it could reach FDEs never checked (and lld puts .eh_frame_hdr after
 * .eh_frame, where libdw does not look). So libdw reads a small ELF file of the builder's own,
 * in the zeroed bytes before the image: an .eh_frame_hdr holding a table of the chunk's FDEs,
 * then the file's .eh_frame, the same bytes at the same address. One entry per FDE walked, at
 * the address its rows start from, pointing at the FDE the rows come from: only checked FDEs
 * are ever reached, and an address finds exactly the FDE walked for it. */

#define TAB_HEAD  16u /* version, 3 encodings, eh_frame_ptr (udata8), fde_count (udata4) */
#define SYN_SHDRS sizeof(Elf64_Ehdr)
#define SYN_NAMES (SYN_SHDRS + 4 * sizeof(Elf64_Shdr))
#define SYN_TAB   512u
_Static_assert(SYN_TAB + TAB_HEAD + CFI_CHUNK * 16 <= PFR_UW_IMAGE_PREFIX, "a whole table fits");

static const char syn_names[] = "\0.shstrtab\0.eh_frame_hdr\0.eh_frame";

/* The builder's ELF file over the image's .eh_frame (b->data), for libdw: b->syn. */
static int make_syn(builder *b)
{
    uint8_t *z = (uint8_t *)b->img - PFR_UW_IMAGE_PREFIX;
    const uint8_t *eh = b->data->d_buf;
    Elf64_Ehdr h = {.e_type = ET_DYN,
                    .e_machine = EM_X86_64,
                    .e_version = EV_CURRENT,
                    .e_shoff = SYN_SHDRS,
                    .e_ehsize = sizeof(Elf64_Ehdr),
                    .e_shentsize = sizeof(Elf64_Shdr),
                    .e_shnum = 4,
                    .e_shstrndx = 1};
    static const uint8_t ident[EI_NIDENT] = {ELFMAG0,    ELFMAG1,     ELFMAG2,   ELFMAG3,
                                             ELFCLASS64, ELFDATA2LSB, EV_CURRENT};
    memcpy(h.e_ident, ident, EI_NIDENT);
    Elf64_Shdr sh[4] = {
        {0},
        {.sh_name = 1, .sh_type = SHT_STRTAB, .sh_offset = SYN_NAMES, .sh_size = sizeof(syn_names)},
        {.sh_name = 11,
         .sh_type = SHT_PROGBITS,
         .sh_flags = SHF_ALLOC,
         .sh_offset = SYN_TAB,
         .sh_size = TAB_HEAD + CFI_CHUNK * 16},
        {.sh_name = 25,
         .sh_type = SHT_PROGBITS,
         .sh_flags = SHF_ALLOC,
         .sh_addr = b->sec_addr,
         .sh_offset = PFR_UW_IMAGE_PREFIX + (uint64_t)(eh - b->img),
         .sh_size = b->data->d_size},
    };
    memcpy(z, &h, sizeof(h));
    memcpy(z + SYN_SHDRS, sh, sizeof(sh));
    memcpy(z + SYN_NAMES, syn_names, sizeof(syn_names));
    b->tab = z + SYN_TAB;
    b->syn = elf_memory((char *)z, PFR_UW_IMAGE_PREFIX + b->img_size);
    if (!b->syn)
        return fail(b, -ENOMEM, "cannot read the builder's own ELF image: %s", elf_errmsg(-1));
    return 0;
}

static uint8_t *put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

/* Start the chunk of FDEs from i: a new Dwarf_CFI over a table of the next CFI_CHUNK FDEs walked
 * (those not inside an earlier one, from covered on). *end is the first FDE past the chunk. */
static int next_chunk(builder *b, size_t i, uint64_t covered, size_t *end)
{
    if (b->cfi)
        dwarf_cfi_end(b->cfi);
    b->cfi = NULL;
    if (pfr_uw_image_held(b->im) > SCAN_HELD_MAX)
        pfr_uw_image_drop(b->im); /* nothing points into .eh_frame now */
    uint8_t *e = b->tab + TAB_HEAD;
    size_t n = 0;
    for (; i < b->nfdes && n < CFI_CHUNK; i++) {
        const struct fde_span *fd = &b->fdes[i];
        if (fde_end(fd) <= covered)
            continue;
        e = put_le(e, fd->start > covered ? fd->start : covered, 8);
        e = put_le(e, b->sec_addr + fd->off, 8);
        n++;
        covered = fde_end(fd);
    }
    *end = i;
    /* version 1, .eh_frame's address and the count as udata8 and udata4, absolute udata8 entries */
    uint8_t *h = b->tab;
    *h++ = 1;
    *h++ = DW_EH_PE_udata8;
    *h++ = DW_EH_PE_udata4;
    *h++ = DW_EH_PE_udata8;
    h = put_le(h, b->sec_addr, 8);
    put_le(h, n, 4);
    if (!(b->cfi = dwarf_getcfi_elf(b->syn)))
        return fail(b, -ENOEXEC, "unusable .eh_frame: %s", dwarf_errmsg(-1));
    return 0;
}

/* The CFI entry at section offset off (and the bytes after it libdw may read), copied into the
 * image's window. */
static int need_entry(builder *b, uint64_t off)
{
    const uint8_t *buf = b->data->d_buf;
    uint64_t size = b->data->d_size;
    if (!b->im || off >= size)
        return 0;
    int rc = pfr_uw_image_need(b->im, buf + off, 12); /* the length, 4 or 4 + 8 bytes */
    if (rc < 0)
        return fail(b, rc, "cannot read the file again: %s",
                    rc == -ESTALE ? "it changed" : strerror(-rc));
    uint64_t len = size - off;
    uint32_t l32;
    if (len >= 4) {
        memcpy(&l32, buf + off, 4);
        uint64_t l64 = l32;
        unsigned head = 4;
        if (l32 == 0xffffffffu && len >= 12) {
            memcpy(&l64, buf + off + 4, 8);
            head = 12;
        }
        if (l64 <= len - head)
            len = head + l64;
    }
    rc = pfr_uw_image_need(b->im, buf + off, len);
    if (rc < 0)
        return fail(b, rc, "cannot read the file again: %s",
                    rc == -ESTALE ? "it changed" : strerror(-rc));
    return 0;
}

/* An FDE before libdw walks it: copied into the window with its CIE, and what each of its rows
 * may cost libdw (the instructions of both, replayed from the start for every row). */
static int prepare_fde(builder *b, const struct fde_span *fd, uint64_t *replay)
{
    *replay = MAX_REPLAY + 1ull; /* not readable now (it was): one row, then no more */
    const unsigned char *ident = (const unsigned char *)elf_getident(b->elf, NULL);
    Dwarf_CFI_Entry e;
    Dwarf_Off next;
    int rc = need_entry(b, fd->off);
    if (rc < 0 || dwarf_next_cfi(ident, b->data, b->eh_frame, fd->off, &next, &e) != 0 ||
        dwarf_cfi_cie_p(&e))
        return rc;
    struct cie_info ci;
    rc = need_entry(b, e.fde.CIE_pointer);
    if (rc == 0)
        rc = find_cie(b, ident, e.fde.CIE_pointer, &ci);
    if (rc <= 0)
        return rc;
    uint64_t start, range;
    const uint8_t *ins;
    if (fde_fields(b, &ci, &e.fde, &start, &range, &ins))
        *replay = (uint64_t)((const uint8_t *)e.fde.end - ins) + ci.len;
    return 0;
}

/* The rows a table will likely have: about 7 an FDE in real files (libc 7.6, python3.11 6.3,
 * ClickHouse 7.0), never more than the cap. */
static size_t likely_rows(const builder *b)
{
    size_t want = b->nfdes < SIZE_MAX / 8 - 2 ? b->nfdes * 8 + 2 : SIZE_MAX / 8;
    return b->max_rows && want > b->max_rows ? b->max_rows : want;
}

/* Room for `want` rows, reserved once. Pages not written are never backed. */
static void reserve_rows(builder *b, size_t want)
{
    (void)PFR_VEC_RESERVE(b->out->rows, b->rows_cap, want); /* else it grows as it goes */
}

/* The rows of every FDE, in order of address: gaps between FDEs are NONE rows, an FDE inside
 * an earlier one is skipped, and the end of the last FDE is a NONE row. */
static int walk_all(builder *b)
{
    uint64_t covered = b->out->base; /* rows describe [base, covered) */
    int rc = 0;
    for (size_t i = 0, end = b->nfdes; rc == 0 && i < b->nfdes;) {
        if (b->syn)
            rc = next_chunk(b, i, covered, &end);
        for (; rc == 0 && i < end; i++) {
            const struct fde_span *fd = &b->fdes[i];
            if (fde_end(fd) <= covered)
                continue; /* inside an earlier FDE: the first one wins */
            uint64_t replay;
            rc = tick(b);
            if (rc == 0 && fd->start > covered)
                rc = push_row(b, covered, NONE_RULE); /* a gap between FDEs */
            if (rc == 0)
                rc = prepare_fde(b, fd, &replay);
            if (rc == 0)
                rc = walk_fde(b, fd, fd->start > covered ? fd->start : covered, replay);
            covered = fde_end(fd);
        }
    }
    return rc == 0 ? push_row(b, covered, NONE_RULE) : rc;
}

static int build_rows(builder *b, bool eh_frame)
{
    if (!b->offs_ok)
        return fail(b, -EFBIG, "call-frame information of 4 GiB or more");
    sort_fdes(b->fdes, b->nfdes);
    uint64_t base = b->fdes[0].start, top = b->top;
    if (top - base > UINT32_MAX)
        return fail(b, -EFBIG, "code spans %#llx bytes (4 GiB or more)",
                    (unsigned long long)(top - base));
    b->out->base = base;
    int rc = eh_frame && data_in_image(b) ? make_syn(b) : 0;
    if (rc < 0)
        return rc;
    if (!b->syn && pfr_uw_image_need_all(b->im) < 0) /* libdw reads .eh_frame on its own */
        return fail(b, -EIO, "cannot read .eh_frame");
    /* A table likely past the cap (real files have 6 to 8 rows an FDE), or whose rows would
     * likely pass the memory the build may take, is counted first, without keeping its rows:
     * refused, it never costs them; fitting after all, it is walked again. */
    size_t want = likely_rows(b);
    if ((b->max_rows && b->nfdes > b->max_rows / COUNT_FIRST_FDE_ROWS) || !fits(b, want)) {
        b->counting = true;
        rc = walk_all(b);
        b->counting = false;
        if (rc < 0)
            return rc;
        want = b->out->nrows;
        if ((rc = check_room(b, want)) < 0)
            return rc;
        b->out->nrows = 0;
        b->out->stats.rows_in = b->out->stats.unsupported = 0;
        b->replayed = 0;
    }
    reserve_rows(b, want);
    rc = walk_all(b);
    if (rc == 0 && b->out->nrows < 2)
        rc = fail(b, -ENOENT, "no call-frame rule the sampler can follow");
    return rc;
}

/* ---- the whole build ---- */

static int build(builder *b, unsigned flags)
{
    int rc = check_elf(b);
    bool is_go = false;
    Elf_Scn *eh = NULL, *dbg = NULL;
    if (rc == 0)
        rc = read_phdrs(b, &is_go);
    if (rc == 0)
        rc = read_sections(b, &eh, &dbg, &is_go);
    if (rc < 0)
        return rc;
    /* Go's own code keeps frame pointers and has no .eh_frame; the C code a cgo program links
     * has one. So a Go program gets the rows of its .eh_frame (Go's code falls in the gaps,
     * walked by frame pointer) but not of its .debug_frame, unless asked. */
    bool go_eh_only = is_go && !(flags & PFR_UNWIND_BUILD_GO);
    if (go_eh_only && !eh)
        return fail(b, -ENOTSUP, "a Go program without C code (its code keeps frame pointers)");

    if (eh) {
        rc = collect_fdes(b, eh, true);
        if (rc == 0 && b->nfdes > 0 && !(b->cfi = dwarf_getcfi_elf(b->elf)))
            rc = fail(b, -ENOEXEC, "unusable .eh_frame: %s", dwarf_errmsg(-1));
    }
    if (rc == 0 && b->nfdes == 0 && go_eh_only)
        return fail(b, -ENOTSUP, "a Go program without C code (its code keeps frame pointers)");
    if (rc == 0 && b->nfdes == 0 && dbg) {
        /* no .eh_frame (or none for the code): .debug_frame, through a Dwarf handle, which
         * also decompresses the section in place, and every other compressed one it knows */
        GElf_Shdr sh = {0};
        uint64_t held = gelf_getshdr(dbg, &sh) ? sh.sh_size : 0;
        held = b->inflate > UINT64_MAX - held ? UINT64_MAX : held + b->inflate;
        if (held > b->lim->max_held_bytes)
            return fail(b, -EFBIG,
                        "a .debug_frame of %llu bytes with %llu more to inflate (the limit: %llu)",
                        (unsigned long long)sh.sh_size, (unsigned long long)b->inflate,
                        (unsigned long long)b->lim->max_held_bytes);
        b->out->stats.fdes = 0;
        b->dw = dwarf_begin_elf(b->elf, DWARF_C_READ, NULL);
        b->cfi = b->dw ? dwarf_getcfi(b->dw) : NULL;
        if (!b->cfi)
            rc = fail(b, -ENOEXEC, "unusable .debug_frame: %s", dwarf_errmsg(-1));
        else
            rc = collect_fdes(b, dbg, false);
        b->out->stats.debug_frame = 1;
        eh = NULL;
    }
    if (rc == 0 && b->nfdes == 0)
        rc = fail(b, -ENOENT, "no call-frame information for the file's code");
    if (rc == 0)
        rc = build_rows(b, eh != NULL);
    return rc;
}

static int build_elf(builder *b, unsigned flags)
{
    int rc = b->elf ? build(b, flags) : fail(b, -ENOEXEC, "not an ELF file: %s", elf_errmsg(-1));
    if (b->dw)
        dwarf_end(b->dw); /* and the CFI it owns */
    else if (b->cfi)
        dwarf_cfi_end(b->cfi);
    if (b->syn)
        elf_end(b->syn);
    free(b->cies);
    free(b->fdes);
    pfr_unwind_table *out = b->out;
    if (rc < 0) {
        pfr_unwind_table_free(out);
        return rc;
    }
    if (out->nrows && out->nrows < b->rows_cap) {
        /* give back what was reserved and not used */
        struct pfr_unwind_row *r = realloc(out->rows, out->nrows * sizeof(*r));
        if (r)
            out->rows = r;
    }
    return 0;
}

/* ---- the entry points ---- */

void pfr_unwind_limits_default(pfr_unwind_limits *lim)
{
    *lim = (pfr_unwind_limits){.max_rows = PFR_UNWIND_MAX_ROWS_DEFAULT,
                               .max_fdes = PFR_UNWIND_MAX_FDES_DEFAULT,
                               .max_held_bytes = PFR_UNWIND_MAX_HELD_DEFAULT,
                               .max_eh_frame_bytes = PFR_UNWIND_MAX_EH_FRAME_DEFAULT,
                               .max_cpu_ns = PFR_UNWIND_MAX_CPU_NS_DEFAULT};
}

int pfr_unwind_refusal(int rc)
{
    switch (rc) {
    case -EFBIG:
        return PFR_UW_REFUSED_TOO_BIG;
    case -EOVERFLOW:
        return PFR_UW_REFUSED_TOO_MANY_FDES;
    case -E2BIG:
        return PFR_UW_REFUSED_TOO_MANY_ROWS;
    case -ETIME:
        return PFR_UW_REFUSED_TIME_BUDGET;
    case -ENOEXEC:
        return PFR_UW_REFUSED_BAD_FILE;
    default:
        return -1;
    }
}

const char *pfr_unwind_refusal_name(int refusal)
{
    static const char *const names[PFR_UW_REFUSALS] = {
        [PFR_UW_REFUSED_TOO_BIG] = "too_big",
        [PFR_UW_REFUSED_TOO_MANY_FDES] = "too_many_fdes",
        [PFR_UW_REFUSED_TOO_MANY_ROWS] = "too_many_rows",
        [PFR_UW_REFUSED_TIME_BUDGET] = "time_budget",
        [PFR_UW_REFUSED_BAD_FILE] = "bad_file",
    };
    return refusal >= 0 && refusal < PFR_UW_REFUSALS ? names[refusal] : "";
}

static void start(pfr_unwind_table *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (errlen)
        err[0] = '\0';
    elf_version(EV_CURRENT);
}

/* Build from an image (unwind_image.h: why libelf never reads the file itself); im is its
 * window, NULL when all of it is there. cpu0: the thread's CPU time when the build began. */
static int build_image(uint8_t *img, size_t size, pfr_uw_image *im, unsigned flags,
                       const pfr_unwind_limits *lim, int64_t cpu0, pfr_unwind_table *out, char *err,
                       size_t errlen)
{
    Elf *elf = elf_memory((char *)img, size);
    builder b = {.elf = elf,
                 .img = img,
                 .img_size = size,
                 .im = im,
                 .max_rows = lim->max_rows,
                 .lim = lim,
                 .cpu0 = cpu0,
                 .slice0 = cpu0,
                 .out = out,
                 .err = err,
                 .errlen = errlen};
    int rc = build_elf(&b, flags);
    if (elf)
        elf_end(elf);
    if (rc == 0) /* (b.cpu0 moved past the caller's work in its pauses) */
        out->stats.cpu_ns = (uint64_t)(pfr_clock_ns(CLOCK_THREAD_CPUTIME_ID) - b.cpu0);
    return rc;
}

int pfr_unwind_table_build_limited(int fd, unsigned flags, const pfr_unwind_limits *lim,
                                   pfr_unwind_table *out, char *err, size_t errlen)
{
    int64_t cpu0 = pfr_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    pfr_unwind_limits dflt;
    if (!lim) {
        pfr_unwind_limits_default(&dflt);
        lim = &dflt;
    }
    start(out, err, errlen);
    builder b = {.out = out, .err = err, .errlen = errlen};
    struct stat st;
    if (fstat(fd, &st) != 0)
        return fail(&b, -errno, "cannot stat the file: %s", strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size <= 0)
        return fail(&b, -ENOEXEC, "not an ELF file: not a regular file, or empty");
    if ((uint64_t)st.st_size > SIZE_MAX - PFR_UW_IMAGE_PREFIX - PFR_UW_IMAGE_PAD)
        return fail(&b, -EFBIG, "a file of %llu bytes", (unsigned long long)st.st_size);
    pfr_uw_image im;
    int rc = pfr_uw_image_load(&im, fd, (uint64_t)st.st_size, lim->max_held_bytes,
                               lim->max_eh_frame_bytes);
    if (rc == -ENOMEM)
        rc = fail(&b, rc, "cannot map %llu bytes", (unsigned long long)st.st_size);
    else if (rc == -EFBIG)
        rc = fail(
            &b, rc, "its headers and sections pass %llu bytes, or .eh_frame %llu (the limits)",
            (unsigned long long)lim->max_held_bytes, (unsigned long long)lim->max_eh_frame_bytes);
    else if (rc < 0)
        rc = fail(&b, rc, "cannot read the file: %s", strerror(-rc));
    else
        rc = build_image(im.p, (size_t)im.size, &im, flags, lim, cpu0, out, err, errlen);
    pfr_uw_image_free(&im);
    return rc;
}

int pfr_unwind_table_build_capped(int fd, unsigned flags, size_t max_rows, pfr_unwind_table *out,
                                  char *err, size_t errlen)
{
    pfr_unwind_limits lim;
    pfr_unwind_limits_default(&lim);
    if (max_rows)
        lim.max_rows = max_rows;
    return pfr_unwind_table_build_limited(fd, flags, &lim, out, err, errlen);
}

int pfr_unwind_table_build(int fd, unsigned flags, pfr_unwind_table *out, char *err, size_t errlen)
{
    return pfr_unwind_table_build_limited(fd, flags, NULL, out, err, errlen);
}

int pfr_unwind_table_build_mem_limited(const void *data, size_t size, unsigned flags,
                                       const pfr_unwind_limits *lim, pfr_unwind_table *out,
                                       char *err, size_t errlen)
{
    int64_t cpu0 = pfr_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    pfr_unwind_limits dflt;
    if (!lim) {
        pfr_unwind_limits_default(&dflt);
        lim = &dflt;
    }
    start(out, err, errlen);
    builder b = {.out = out, .err = err, .errlen = errlen};
    if (size > SIZE_MAX - PFR_UW_IMAGE_PREFIX - PFR_UW_IMAGE_PAD)
        return fail(&b, -EFBIG, "an image of %zu bytes", size);
    /* libelf takes a writable image: a copy, with the same zeroed pad as from a descriptor */
    uint8_t *buf = calloc(1, PFR_UW_IMAGE_PREFIX + size + PFR_UW_IMAGE_PAD);
    if (!buf)
        return fail(&b, -ENOMEM, "out of memory");
    if (size)
        memcpy(buf + PFR_UW_IMAGE_PREFIX, data, size);
    int rc = build_image(buf + PFR_UW_IMAGE_PREFIX, size, NULL, flags, lim, cpu0, out, err, errlen);
    free(buf);
    return rc;
}

int pfr_unwind_table_build_mem(const void *data, size_t size, unsigned flags, pfr_unwind_table *out,
                               char *err, size_t errlen)
{
    return pfr_unwind_table_build_mem_limited(data, size, flags, NULL, out, err, errlen);
}

void pfr_unwind_table_free(pfr_unwind_table *t)
{
    if (!t)
        return;
    free(t->rows);
    memset(t, 0, sizeof(*t));
}

const struct pfr_unwind_row *pfr_unwind_table_find(const pfr_unwind_table *t, uint64_t vaddr)
{
    if (!t || t->nrows == 0 || vaddr < t->base)
        return NULL;
    uint64_t rel = vaddr - t->base;
    if (rel > UINT32_MAX)
        rel = UINT32_MAX;
    /* the last row with pc <= rel: lo ends at the first row past rel */
    size_t lo = 0, hi = t->nrows;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->rows[mid].pc <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &t->rows[lo - 1] : NULL;
}
