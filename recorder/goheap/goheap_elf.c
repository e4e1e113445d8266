#include "goheap_elf.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfr_clock.h"

#define BLOCK        65536u
#define MAX_SECTIONS 4096u /* Go binaries have ~30; far more means garbage */
#define MAX_PHDRS    256u
#define MAX_SHSTRTAB (1u << 20)
#define MAX_CANDS    8u

static const char NAME_MBUCKETS[] = "runtime.mbuckets";
static const char NAME_RATE[] = "runtime.MemProfileRate";
static const char BUILDINFO_MAGIC[] = "\xff Go buildinf:";

typedef struct reader {
    const pfr_goheap_file *f;
    pfr_goheap_elfinfo *out;
    char *err;
    size_t errlen;
} reader;

__attribute__((format(printf, 3, 4))) static int fail(reader *r, int rc, const char *fmt, ...)
{
    if (r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Read exactly len bytes at off, within the file's size. */
static int read_at(reader *r, void *buf, size_t len, uint64_t off)
{
    if (off > r->f->size || len > r->f->size - off)
        return -EBADMSG;
    size_t done = 0;
    while (done < len) {
        r->out->reads++;
        ssize_t n = r->f->pread(r->f->ctx, (uint8_t *)buf + done, len - done, off + done);
        if (n < 0)
            return (int)n;
        if (n == 0)
            return -EBADMSG;
        done += (size_t)n;
    }
    return 0;
}

/* -ETIME once the file's deadline has passed (checked once a block). */
static int check_time(reader *r)
{
    if (r->f->deadline_ns && pfr_clock_mono_ns() > r->f->deadline_ns)
        return fail(r, -ETIME, "not inspected within the time budget");
    return 0;
}

static bool in_file(const reader *r, uint64_t off, uint64_t size)
{
    return off <= r->f->size && size <= r->f->size - off;
}

/* The name of section sh from the section-name table (NULL if out of range). */
static const char *sec_name(const char *shstr, size_t shstr_len, const Elf64_Shdr *sh)
{
    if (sh->sh_name >= shstr_len || !memchr(shstr + sh->sh_name, '\0', shstr_len - sh->sh_name))
        return NULL;
    return shstr + sh->sh_name;
}

/* Go 1.18+ writes the version inline after a 32-byte header: flags bit 1, then a uvarint length
 * and the bytes. Older layouts point into the data instead; we leave the version empty then. */
static void parse_buildinfo(reader *r, const Elf64_Shdr *sh)
{
    uint8_t buf[32 + 10 + sizeof(r->out->go_version)];
    size_t len = sh->sh_size < sizeof(buf) ? (size_t)sh->sh_size : sizeof(buf);
    if (sh->sh_type == SHT_NOBITS || len < 33 || read_at(r, buf, len, sh->sh_offset) < 0)
        return;
    if (memcmp(buf, BUILDINFO_MAGIC, 14) != 0 || !(buf[15] & 2))
        return;
    uint64_t n = 0;
    size_t i = 32;
    for (unsigned shift = 0; i < len && shift < 64; shift += 7) {
        uint8_t c = buf[i++];
        n |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            break;
    }
    if (n == 0 || n >= sizeof(r->out->go_version) || n > len - i)
        return;
    for (size_t k = 0; k < n; k++) {
        char c = (char)buf[i + k];
        r->out->go_version[k] = (c >= 0x21 && c < 0x7f) ? c : '?';
    }
    r->out->go_version[n] = '\0';
}

typedef struct cands {
    uint64_t off[2][MAX_CANDS];
    unsigned n[2];
} cands;

/* Pass 1: offsets in the string table where either name (with its NUL) starts. */
static int scan_strtab(reader *r, const Elf64_Shdr *st, uint8_t *blk, cands *c)
{
    const char *names[2] = {NAME_MBUCKETS, NAME_RATE};
    const size_t overlap = sizeof(NAME_RATE); /* longest name + NUL */
    uint64_t pos = 0;
    while (pos < st->sh_size) {
        size_t len = st->sh_size - pos < BLOCK ? (size_t)(st->sh_size - pos) : BLOCK;
        int rc = check_time(r);
        if (rc == 0)
            rc = read_at(r, blk, len, st->sh_offset + pos);
        if (rc < 0)
            return rc;
        bool last = pos + len >= st->sh_size;
        /* a match starting in the overlap is found again by the next block */
        size_t limit = last ? len : len - overlap + 1;
        for (int k = 0; k < 2; k++) {
            size_t nl = strlen(names[k]) + 1;
            const uint8_t *p = blk;
            while (c->n[k] < MAX_CANDS && (size_t)(p - blk) < limit) {
                p = memmem(p, len - (size_t)(p - blk), names[k], nl);
                if (!p || (size_t)(p - blk) >= limit)
                    break;
                c->off[k][c->n[k]++] = pos + (uint64_t)(p - blk);
                p++;
            }
        }
        if (last)
            break;
        pos += len - overlap + 1;
    }
    return 0;
}

static bool is_cand(const cands *c, int k, uint64_t off)
{
    for (unsigned i = 0; i < c->n[k]; i++)
        if (c->off[k][i] == off)
            return true;
    return false;
}

/* A data symbol must lie inside a loaded segment, or it is no address to read. */
static bool addr_loaded(const Elf64_Phdr *ph, unsigned nph, uint64_t addr)
{
    for (unsigned i = 0; i < nph; i++)
        if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr && ph[i].p_memsz >= 8 &&
            addr - ph[i].p_vaddr <= ph[i].p_memsz - 8)
            return true;
    return false;
}

/* Pass 2: the symbols whose names start at a candidate offset. */
static int scan_symtab(reader *r, const Elf64_Shdr *sy, uint8_t *blk, const cands *c,
                       const Elf64_Phdr *ph, unsigned nph)
{
    const size_t per = BLOCK / sizeof(Elf64_Sym);
    uint64_t count = sy->sh_size / sizeof(Elf64_Sym);
    for (uint64_t i = 0; i < count;) {
        size_t n = count - i < per ? (size_t)(count - i) : per;
        int rc = check_time(r);
        if (rc == 0)
            rc = read_at(r, blk, n * sizeof(Elf64_Sym), sy->sh_offset + i * sizeof(Elf64_Sym));
        if (rc < 0)
            return rc;
        for (size_t k = 0; k < n; k++) {
            Elf64_Sym s;
            memcpy(&s, blk + k * sizeof(s), sizeof(s));
            if (ELF64_ST_TYPE(s.st_info) != STT_OBJECT || s.st_shndx == SHN_UNDEF ||
                !addr_loaded(ph, nph, s.st_value))
                continue;
            if (!r->out->mbuckets && is_cand(c, 0, s.st_name))
                r->out->mbuckets = s.st_value;
            else if (!r->out->mem_profile_rate && is_cand(c, 1, s.st_name))
                r->out->mem_profile_rate = s.st_value;
        }
        if (r->out->mbuckets && r->out->mem_profile_rate)
            break;
        i += n;
    }
    return 0;
}

static int read_phdrs(reader *r, const Elf64_Ehdr *eh, Elf64_Phdr *ph, unsigned *nph)
{
    *nph = 0;
    if (eh->e_phnum == 0)
        return 0;
    if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum > MAX_PHDRS)
        return fail(r, -EBADMSG, "bad program header table (%u entries of %u bytes)", eh->e_phnum,
                    eh->e_phentsize);
    int rc = read_at(r, ph, (size_t)eh->e_phnum * sizeof(Elf64_Phdr), eh->e_phoff);
    if (rc < 0)
        return rc == -EBADMSG ? fail(r, rc, "program headers beyond the end of the file") : rc;
    *nph = eh->e_phnum;
    bool first = true;
    for (unsigned i = 0; i < *nph; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        if (first) {
            r->out->load_vaddr = ph[i].p_vaddr;
            r->out->load_offset = ph[i].p_offset;
            first = false;
        }
        if ((ph[i].p_flags & PF_X) && !r->out->text_memsz) {
            r->out->text_vaddr = ph[i].p_vaddr;
            r->out->text_memsz = ph[i].p_memsz;
            r->out->text_offset = ph[i].p_offset;
        }
    }
    return 0;
}

static int find_symbols(reader *r, const Elf64_Shdr *sh, unsigned nsh, const Elf64_Shdr *symtab,
                        const Elf64_Phdr *ph, unsigned nph)
{
    if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_link >= nsh ||
        !in_file(r, symtab->sh_offset, symtab->sh_size))
        return fail(r, -EBADMSG, ".symtab header is inconsistent");
    const Elf64_Shdr *strtab = &sh[symtab->sh_link];
    if (strtab->sh_type != SHT_STRTAB || !in_file(r, strtab->sh_offset, strtab->sh_size))
        return fail(r, -EBADMSG, ".symtab's string table is inconsistent");
    if (symtab->sh_size > PFR_GOHEAP_MAX_TABLE) {
        r->out->refused = PFR_REFUSED_TOO_MANY_SYMBOLS;
        return fail(r, -EFBIG, ".symtab of %" PRIu64 " bytes, over %llu", symtab->sh_size,
                    PFR_GOHEAP_MAX_TABLE);
    }
    if (strtab->sh_size > PFR_GOHEAP_MAX_TABLE) {
        r->out->refused = PFR_REFUSED_TOO_BIG;
        return fail(r, -EFBIG, ".strtab of %" PRIu64 " bytes, over %llu", strtab->sh_size,
                    PFR_GOHEAP_MAX_TABLE);
    }
    uint8_t *blk = malloc(BLOCK);
    if (!blk)
        return -ENOMEM;
    cands c = {0};
    int rc = scan_strtab(r, strtab, blk, &c);
    if (rc == 0 && (c.n[0] || c.n[1]))
        rc = scan_symtab(r, symtab, blk, &c, ph, nph);
    free(blk);
    if (rc == -EBADMSG)
        return fail(r, rc, "symbol table beyond the end of the file");
    return rc;
}

static int inspect(const pfr_goheap_file *f, pfr_goheap_elfinfo *out, char *err, size_t errlen)
{
    if (errlen)
        err[0] = '\0';
    reader r = {f, out, err, errlen};
    Elf64_Ehdr eh;
    int rc = read_at(&r, &eh, sizeof(eh), 0);
    if (rc == -EBADMSG || (rc == 0 && memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0))
        return fail(&r, -ENOEXEC, "not an ELF file");
    if (rc < 0)
        return rc;
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_machine != EM_X86_64)
        return fail(&r, -ENOEXEC, "not a 64-bit little-endian x86-64 ELF");
    out->e_type = eh.e_type;
    if (eh.e_shnum == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > MAX_SECTIONS ||
        eh.e_shstrndx >= eh.e_shnum)
        return fail(&r, -EBADMSG, "bad section header table (%u entries of %u bytes)", eh.e_shnum,
                    eh.e_shentsize);
    Elf64_Phdr ph[MAX_PHDRS];
    unsigned nph;
    rc = read_phdrs(&r, &eh, ph, &nph);
    if (rc < 0)
        return rc;

    unsigned nsh = eh.e_shnum;
    Elf64_Shdr *sh = malloc(nsh * sizeof(*sh));
    char *shstr = NULL;
    if (!sh)
        return -ENOMEM;
    rc = read_at(&r, sh, nsh * sizeof(*sh), eh.e_shoff);
    if (rc < 0) {
        rc = rc == -EBADMSG ? fail(&r, rc, "section headers beyond the end of the file") : rc;
        goto out;
    }
    const Elf64_Shdr *names = &sh[eh.e_shstrndx];
    if (names->sh_size > MAX_SHSTRTAB || !in_file(&r, names->sh_offset, names->sh_size)) {
        rc = fail(&r, -EBADMSG, "bad section name table");
        goto out;
    }
    size_t shstr_len = (size_t)names->sh_size;
    shstr = malloc(shstr_len + 1);
    if (!shstr) {
        rc = -ENOMEM;
        goto out;
    }
    rc = read_at(&r, shstr, shstr_len, names->sh_offset);
    if (rc < 0)
        goto out;
    shstr[shstr_len] = '\0';

    const Elf64_Shdr *symtab = NULL;
    for (unsigned i = 0; i < nsh; i++) {
        const char *nm = sec_name(shstr, shstr_len, &sh[i]);
        if (!nm)
            continue;
        if (strcmp(nm, ".go.buildinfo") == 0 && !out->is_go) {
            out->is_go = true;
            parse_buildinfo(&r, &sh[i]);
        } else if (sh[i].sh_type == SHT_SYMTAB && !symtab) {
            symtab = &sh[i];
        }
    }
    out->has_symtab = symtab != NULL;
    if (out->is_go && symtab)
        rc = find_symbols(&r, sh, nsh, symtab, ph, nph);
out:
    free(shstr);
    free(sh);
    return rc;
}

int pfr_goheap_elf_inspect(const pfr_goheap_file *f, pfr_goheap_elfinfo *out, char *err,
                           size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int rc = inspect(f, out, err, errlen);
    if (rc == -EBADMSG)
        out->refused = PFR_REFUSED_BAD_FILE;
    else if (rc == -ETIME)
        out->refused = PFR_REFUSED_TIME_BUDGET;
    return rc;
}

static ssize_t fd_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
    ssize_t n = pread((int)(intptr_t)ctx, buf, len, (off_t)off);
    return n < 0 ? -errno : n;
}

pfr_goheap_file pfr_goheap_fd_file(int fd, uint64_t size)
{
    pfr_goheap_file f = {.ctx = (void *)(intptr_t)fd, .pread = fd_pread, .size = size};
    return f;
}
