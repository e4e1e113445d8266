/* The interpreter's symbols from its ELF file, through the file guard (py_elf.h). */
#include "py_elf.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfr_fsguard.h"

#define MAX_FILES  64           /* interpreter files remembered */
#define MAX_LOADS  16           /* PT_LOAD segments remembered per file */
#define MAX_FILE   (1ull << 30) /* a larger "interpreter" is not read */
#define MAX_SYMTAB (64u << 20)  /* bytes of one symbol table read */
#define MAX_PHDRS  64

typedef struct load {
    uint64_t offset, vaddr, filesz;
} load;

/* What one file gave: its symbols and segments, or why not (rc). */
typedef struct elf_file {
    uint64_t dev, ino, last_used;
    int rc; /* 0 or -ENOENT (no _PyRuntime): both final for this file */
    pfr_py_elf_syms syms;
    load loads[MAX_LOADS];
    unsigned nloads;
} elf_file;

struct pfr_py_elf {
    char proc_root[64];
    struct pfr_fsguard *guard;
    bool guard_set;
    elf_file files[MAX_FILES];
    size_t nfiles;
    uint64_t tick;
    pfr_py_elf_stats st;
};

int pfr_py_elf_new(const char *proc_root, pfr_py_elf **out)
{
    pfr_py_elf *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    snprintf(c->proc_root, sizeof(c->proc_root), "%s", proc_root ? proc_root : "/proc");
    *out = c;
    return 0;
}

void pfr_py_elf_free(pfr_py_elf *c)
{
    free(c);
}

void pfr_py_elf_set_guard(pfr_py_elf *c, struct pfr_fsguard *guard)
{
    c->guard = guard;
    c->guard_set = true;
}

void pfr_py_elf_stats_get(const pfr_py_elf *c, pfr_py_elf_stats *out)
{
    *out = c->st;
}

/* ---- opening ---- */

/* A file on a remote file system: the guard's worker copies it (its map_files link, else its
 * path under the process's root; the worker checks device and inode itself). */
static int open_remote(pfr_py_elf *c, pid_t pid, const char *mpath, const struct pfr_sym_map *m)
{
    char path[PATH_MAX + 96];
    snprintf(path, sizeof(path), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, c->proc_root, (int)pid,
             m->start, m->end);
    int fd = pfr_fsguard_copy(c->guard, path, m->dev, m->ino);
    if ((fd == -EPERM || fd == -ENOENT || fd == -EACCES) && !m->deleted && mpath[0] == '/') {
        snprintf(path, sizeof(path), "%s/%d/root%s", c->proc_root, (int)pid, mpath);
        fd = pfr_fsguard_copy(c->guard, path, m->dev, m->ino);
    }
    if (fd >= 0)
        c->st.remote_copies++;
    return fd;
}

/* The file mapped at m, local: through the process's root, else its map_files link (a root
 * the path does not lead to from here: the maps of a process in another mount namespace name
 * its files as the reader's root would reach them). -ENXIO when neither opens. */
static int open_local(pfr_py_elf *c, pid_t pid, const char *mpath, const struct pfr_sym_map *m)
{
    char path[PATH_MAX + 96];
    const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int n = snprintf(path, sizeof(path), "%s/%d/root%s", c->proc_root, (int)pid, mpath);
    int fd = -1;
    struct stat st;
    if (!m->deleted && mpath[0] == '/' && n > 0 && (size_t)n < sizeof(path))
        fd = open(path, flags);
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_ino != m->ino || st.st_dev != m->dev)) {
        close(fd); /* another file at that path in its root: the mapped one by its link */
        fd = -1;
    }
    if (fd < 0) {
        snprintf(path, sizeof(path), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, c->proc_root, (int)pid,
                 m->start, m->end);
        fd = open(path, flags);
    }
    return fd >= 0 ? fd : errno == ENOENT ? -ENXIO : -errno;
}

/* A descriptor of the file mapped at m (or of its copy), within the size bound. */
static int open_file(pfr_py_elf *c, pid_t pid, const char *mpath, const struct pfr_sym_map *m)
{
    if (!c->guard_set)
        return -EAGAIN;
    bool remote = c->guard && !pfr_fsguard_local(c->guard, pid, m->dev);
    int fd = remote ? open_remote(c, pid, mpath, m) : open_local(c, pid, mpath, m);
    if (fd < 0)
        return fd;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || (!remote && (st.st_ino != m->ino || st.st_dev != m->dev)))
        rc = -ESTALE; /* the file the process maps, not another one now at its path */
    else if ((uint64_t)st.st_size > MAX_FILE)
        rc = -EFBIG;
    if (rc) {
        if (rc == -EFBIG)
            c->st.refused++;
        close(fd);
        return rc;
    }
    return fd;
}

/* ---- reading ---- */

static void take_sym(const char *name, uint64_t value, uint64_t size, pfr_py_elf_syms *s)
{
    if (!strcmp(name, "_PyRuntime"))
        s->runtime = value;
    else if (!strcmp(name, "PyCode_Type"))
        s->code_type = value;
    else if (!strcmp(name, "PyUnicode_Type"))
        s->str_type = value;
    else if (!strcmp(name, "PyBytes_Type"))
        s->bytes_type = value;
    else if (!strcmp(name, "Py_Version"))
        s->version = value;
    else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
        s->eval = value;
        s->eval_size = size;
    }
}

/* The symbols of the tables of the given type; -EFBIG for a table over the bound (not read). */
static int find_syms(Elf *e, uint32_t type, pfr_py_elf_syms *s)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || sh.sh_entsize == 0)
            continue;
        if (sh.sh_size > MAX_SYMTAB)
            return -EFBIG;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d)
            continue;
        size_t n = d->d_size / sh.sh_entsize;
        for (size_t i = 0; i < n; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
                continue;
            const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
            if (name && (name[0] == '_' || name[0] == 'P'))
                take_sym(name, sym.st_value, sym.st_size, s);
        }
    }
    return 0;
}

static bool syms_complete(const pfr_py_elf_syms *s)
{
    return s->runtime && s->code_type && s->str_type && s->bytes_type;
}

/* Parse the file behind fd into f (rc set): its PT_LOAD segments and symbols. */
static void parse(int fd, elf_file *f, uint64_t *refused)
{
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    size_t nph;
    f->rc = -ENOEXEC;
    if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
        elf_getphdrnum(e, &nph) != 0)
        goto out;
    for (size_t i = 0; i < nph && i < MAX_PHDRS && f->nloads < MAX_LOADS; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
            f->loads[f->nloads++] = (load){ph.p_offset, ph.p_vaddr, ph.p_filesz};
    }
    memset(&f->syms, 0, sizeof(f->syms));
    int rc = find_syms(e, SHT_DYNSYM, &f->syms);
    if (rc == 0 && !syms_complete(&f->syms))
        rc = find_syms(e, SHT_SYMTAB, &f->syms);
    if (rc == -EFBIG)
        (*refused)++;
    f->rc = rc ? rc : syms_complete(&f->syms) ? 0 : -ENOENT;
out:
    if (e)
        elf_end(e);
}

/* The load bias of the file f mapped at m. */
static int bias_of(const elf_file *f, const struct pfr_sym_map *m, uint64_t *bias)
{
    for (unsigned i = 0; i < f->nloads; i++) {
        const load *l = &f->loads[i];
        if (m->pgoff >= (l->offset & ~0xfffull) && m->pgoff < l->offset + l->filesz) {
            *bias = m->start - m->pgoff - (l->vaddr - l->offset);
            return 0;
        }
    }
    return -ENOENT;
}

static elf_file *cached(pfr_py_elf *c, const struct pfr_sym_map *m)
{
    for (size_t i = 0; i < c->nfiles; i++)
        if (c->files[i].dev == m->dev && c->files[i].ino == m->ino)
            return &c->files[i];
    return NULL;
}

/* A slot for a new file: a free one, else the least recently used. */
static elf_file *slot(pfr_py_elf *c)
{
    if (c->nfiles < MAX_FILES)
        return &c->files[c->nfiles++];
    elf_file *old = &c->files[0];
    for (size_t i = 1; i < MAX_FILES; i++)
        if (c->files[i].last_used < old->last_used)
            old = &c->files[i];
    return old;
}

int pfr_py_elf_symbols(pfr_py_elf *c, pid_t pid, const struct pfr_sym_maps *maps,
                       const struct pfr_sym_map *m, pfr_py_elf_syms *s, uint64_t *bias)
{
    elf_file *f = cached(c, m);
    if (f) {
        c->st.cache_hits++;
    } else {
        int fd = open_file(c, pid, pfr_sym_map_path(maps, m), m);
        if (fd < 0)
            return fd; /* nothing final is known: asked again at the next look */
        elf_file nf = {.dev = m->dev, .ino = m->ino};
        parse(fd, &nf, &c->st.refused);
        close(fd);
        c->st.files_read++;
        f = slot(c);
        *f = nf;
    }
    f->last_used = ++c->tick;
    if (f->rc)
        return f->rc;
    *s = f->syms;
    return bias_of(f, m, bias);
}
