/* Is this executable a Go program linking net/http/pprof? (see scrape_elf.h) */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scrape_elf.h"
#include "scrape_internal.h"

#define BLOCK        65536
#define MAX_SECTIONS 4096
#define MAX_SHSTRTAB (1u << 20)
#define MAX_TABLE    (256ull << 20) /* largest .strtab/.symtab/.gopclntab scanned */
#define MAX_HITS     16

static const char buildinfo_magic[] = "\xff Go buildinf:";

static ssize_t fd_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
    int fd = (int)(intptr_t)ctx;
    for (;;) {
        ssize_t r = pread(fd, buf, len, (off_t)off);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            return -errno;
    }
}

struct sc_file pfr_scrape_fd_file(int fd, uint64_t size)
{
    struct sc_file f = {.ctx = (void *)(intptr_t)fd, .pread = fd_pread, .size = size};
    return f;
}

static bool in_file(const struct sc_file *f, uint64_t off, uint64_t size)
{
    return off <= f->size && size <= f->size - off;
}

static int read_exact(const struct sc_file *f, void *buf, size_t len, uint64_t off, unsigned *reads)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = f->pread(f->ctx, (char *)buf + got, len - got, off + got);
        (*reads)++;
        if (r < 0)
            return (int)r;
        if (r == 0)
            return -EBADMSG; /* shorter than it said */
        got += (size_t)r;
    }
    return 0;
}

/* Offsets (in the section) of needle followed by NUL, and preceded by NUL or the section start
 * when lead is set, in the section [off, off+size), read in BLOCK-sized pieces. */
static int stream_find(const struct sc_file *f, uint64_t off, uint64_t size, const char *needle,
                       bool lead, uint64_t *hits, size_t *nhits, unsigned *reads)
{
    size_t nl = strlen(needle), keep = nl + 1;
    unsigned char *buf = malloc(BLOCK + keep);
    if (!buf)
        return -ENOMEM;
    uint64_t pos = 0, base = 0; /* base: section offset of buf[0] */
    size_t have = 0;            /* bytes carried over from the previous block */
    *nhits = 0;
    int rc = 0;
    while (pos < size && *nhits < MAX_HITS) {
        size_t want = size - pos < BLOCK ? (size_t)(size - pos) : BLOCK;
        rc = read_exact(f, buf + have, want, off + pos, reads);
        if (rc)
            break;
        size_t total = have + want;
        for (unsigned char *p = buf; (size_t)(p - buf) < total; p++) {
            p = memmem(p, total - (size_t)(p - buf), needle, nl);
            if (!p)
                break;
            size_t i = (size_t)(p - buf), e = i + nl;
            if (e >= total)
                break; /* its end is in the next block: found again there */
            if (e < have || buf[e] != 0)
                continue; /* seen in the previous block, or a longer name */
            if (lead && !(base + i == 0 || (i > 0 && buf[i - 1] == 0)))
                continue;
            if (*nhits < MAX_HITS)
                hits[(*nhits)++] = base + i;
        }
        if (total > keep) {
            memmove(buf, buf + total - keep, keep);
            base += total - keep;
            have = keep;
        } else {
            have = total;
        }
        pos += want;
    }
    free(buf);
    return rc;
}

/* Is there a defined function symbol whose name is at one of the strtab offsets in hits? */
static int symtab_has(const struct sc_file *f, const Elf64_Shdr *sym, const uint64_t *hits,
                      size_t nhits, bool *found, unsigned *reads)
{
    const size_t per = BLOCK / sizeof(Elf64_Sym);
    unsigned char *buf = malloc(per * sizeof(Elf64_Sym));
    if (!buf)
        return -ENOMEM;
    uint64_t count = sym->sh_size / sizeof(Elf64_Sym);
    int rc = 0;
    *found = false;
    for (uint64_t first = 0; first < count && !*found; first += per) {
        size_t n = count - first < per ? (size_t)(count - first) : per;
        rc = read_exact(f, buf, n * sizeof(Elf64_Sym), sym->sh_offset + first * sizeof(Elf64_Sym),
                        reads);
        if (rc)
            break;
        for (size_t i = 0; i < n && !*found; i++) {
            Elf64_Sym s;
            memcpy(&s, buf + i * sizeof(s), sizeof(s));
            if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF)
                continue;
            for (size_t h = 0; h < nhits; h++)
                if (s.st_name == hits[h])
                    *found = true;
        }
    }
    free(buf);
    return rc;
}

static int bad(char *err, size_t errlen, const char *why)
{
    pfr_scrape_errf(err, errlen, "malformed ELF: %s", why);
    return -EBADMSG;
}

/* Section headers, validated against the file. *shdrs is malloc'ed. */
static int read_sections(const struct sc_file *f, const Elf64_Ehdr *eh, Elf64_Shdr **shdrs,
                         size_t *nsec, size_t *shstrndx, unsigned *reads, char *err, size_t errlen)
{
    *shdrs = NULL;
    *nsec = 0;
    if (eh->e_shoff == 0)
        return 0;
    if (eh->e_shentsize != sizeof(Elf64_Shdr))
        return bad(err, errlen, "section header size");
    if (!in_file(f, eh->e_shoff, sizeof(Elf64_Shdr)))
        return bad(err, errlen, "section headers beyond the end of the file");
    uint64_t n = eh->e_shnum;
    uint64_t str = eh->e_shstrndx;
    if (n == 0 || str == SHN_XINDEX) {
        Elf64_Shdr first;
        int rc = read_exact(f, &first, sizeof(first), eh->e_shoff, reads);
        if (rc)
            return rc;
        if (n == 0)
            n = first.sh_size;
        if (str == SHN_XINDEX)
            str = first.sh_link;
    }
    if (n == 0 || n > MAX_SECTIONS)
        return bad(err, errlen, "section count");
    if (!in_file(f, eh->e_shoff, n * sizeof(Elf64_Shdr)))
        return bad(err, errlen, "section headers beyond the end of the file");
    Elf64_Shdr *s = malloc(n * sizeof(*s));
    if (!s)
        return -ENOMEM;
    int rc = read_exact(f, s, n * sizeof(*s), eh->e_shoff, reads);
    if (rc) {
        free(s);
        return rc;
    }
    *shdrs = s;
    *nsec = (size_t)n;
    *shstrndx = (size_t)str;
    return 0;
}

static bool section_ok(const struct sc_file *f, const Elf64_Shdr *s)
{
    return s->sh_type != SHT_NOBITS && in_file(f, s->sh_offset, s->sh_size);
}

int pfr_scrape_elf_inspect(const struct sc_file *f, struct sc_elf_info *out, char *err,
                           size_t errlen)
{
    memset(out, 0, sizeof(*out));
    Elf64_Ehdr eh;
    if (f->size < sizeof(eh))
        return -ENOEXEC;
    int rc = read_exact(f, &eh, sizeof(eh), 0, &out->reads);
    if (rc)
        return rc;
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB)
        return -ENOEXEC;

    Elf64_Shdr *sh = NULL;
    size_t nsec = 0, shstrndx = 0;
    char *names = NULL;
    rc = read_sections(f, &eh, &sh, &nsec, &shstrndx, &out->reads, err, errlen);
    if (rc || nsec == 0)
        goto out;
    if (shstrndx >= nsec || !section_ok(f, &sh[shstrndx]) || sh[shstrndx].sh_size > MAX_SHSTRTAB) {
        rc = bad(err, errlen, "section name table");
        goto out;
    }
    size_t nsize = (size_t)sh[shstrndx].sh_size;
    names = malloc(nsize + 1);
    if (!names) {
        rc = -ENOMEM;
        goto out;
    }
    rc = read_exact(f, names, nsize, sh[shstrndx].sh_offset, &out->reads);
    if (rc)
        goto out;
    names[nsize] = '\0';

    ssize_t symtab = -1, pclntab = -1;
    for (size_t i = 0; i < nsec; i++) {
        if (sh[i].sh_name >= nsize)
            continue;
        const char *name = names + sh[i].sh_name;
        if (strcmp(name, ".go.buildinfo") == 0 && section_ok(f, &sh[i]) &&
            sh[i].sh_size >= sizeof(buildinfo_magic) - 1) {
            char magic[sizeof(buildinfo_magic) - 1];
            rc = read_exact(f, magic, sizeof(magic), sh[i].sh_offset, &out->reads);
            if (rc)
                goto out;
            out->is_go |= memcmp(magic, buildinfo_magic, sizeof(magic)) == 0;
        } else if (strcmp(name, ".symtab") == 0 && sh[i].sh_type == SHT_SYMTAB) {
            symtab = (ssize_t)i;
        } else if (strcmp(name, ".gopclntab") == 0 && section_ok(f, &sh[i])) {
            pclntab = (ssize_t)i;
        }
    }
    out->has_pclntab = pclntab >= 0;
    if (!out->is_go)
        goto out;

    uint64_t hits[MAX_HITS];
    size_t nhits = 0;
    if (symtab >= 0) {
        const Elf64_Shdr *sym = &sh[symtab];
        if (!section_ok(f, sym) || sym->sh_entsize != sizeof(Elf64_Sym) ||
            sym->sh_size > MAX_TABLE || sym->sh_link >= nsec) {
            rc = bad(err, errlen, ".symtab");
            goto out;
        }
        const Elf64_Shdr *str = &sh[sym->sh_link];
        if (str->sh_type != SHT_STRTAB || !section_ok(f, str) || str->sh_size > MAX_TABLE) {
            rc = bad(err, errlen, ".strtab");
            goto out;
        }
        out->has_symtab = true;
        rc = stream_find(f, str->sh_offset, str->sh_size, SC_PPROF_SYMBOL, false, hits, &nhits,
                         &out->reads);
        if (!rc && nhits)
            rc = symtab_has(f, sym, hits, nhits, &out->pprof, &out->reads);
    } else if (pclntab >= 0) {
        const Elf64_Shdr *p = &sh[pclntab];
        if (p->sh_size > MAX_TABLE) {
            rc = bad(err, errlen, ".gopclntab too large");
            goto out;
        }
        rc = stream_find(f, p->sh_offset, p->sh_size, SC_PPROF_SYMBOL, true, hits, &nhits,
                         &out->reads);
        out->pprof = !rc && nhits > 0;
        out->from_pclntab = out->pprof;
    }
out:
    free(sh);
    free(names);
    return rc;
}
