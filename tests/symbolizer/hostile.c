#include "symbolizer.h"

#include "hostile.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define PAGE 4096u

static uint64_t align(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
        if (n <= 0)
            return -errno;
        done += (size_t)n;
    }
    return 0;
}

int pfr_hg_write(const char *path, const struct hg_sec *secs, size_t n, const struct hg_opts *o)
{
    size_t nsh = n + 3; /* null, .text, secs, .shstrtab */
    Elf64_Shdr *sh = calloc(nsh, sizeof(*sh));
    char *names = calloc(1, 16 + n * 64 + 16);
    if (!sh || !names) {
        free(sh);
        free(names);
        return -ENOMEM;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : 0;
    size_t nl = 1;
#define NAME(s) (strcpy(names + nl, s), nl += strlen(s) + 1, (uint32_t)(nl - strlen(s) - 1))
    unsigned char text[HG_TEXT_SIZE];
    memset(text, 0xcc, sizeof(text));
    sh[1] = (Elf64_Shdr){.sh_name = NAME(".text"),
                         .sh_type = SHT_PROGBITS,
                         .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
                         .sh_addr = HG_TEXT,
                         .sh_offset = HG_TEXT,
                         .sh_size = HG_TEXT_SIZE,
                         .sh_addralign = 16};
    if (rc == 0)
        rc = pwrite_all(fd, text, sizeof(text), HG_TEXT);
    uint64_t off = HG_TEXT + HG_TEXT_SIZE;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct hg_sec *s = &secs[i];
        uint64_t size = s->size ? s->size : s->len;
        sh[i + 2] = (Elf64_Shdr){.sh_name = NAME(s->name),
                                 .sh_type = s->type,
                                 .sh_flags = s->flags,
                                 .sh_addr = s->addr,
                                 .sh_offset = off,
                                 .sh_size = size,
                                 .sh_link = s->link,
                                 .sh_info = s->info,
                                 .sh_addralign = 8,
                                 .sh_entsize = s->entsize};
        if (s->len)
            rc = pwrite_all(fd, s->data, s->len, off);
        off = align(off + (s->lie ? s->len : size), PAGE);
    }
    uint32_t shname = NAME(".shstrtab");
#undef NAME
    uint64_t shstr_size = o && o->shstrtab_size ? o->shstrtab_size : nl;
    sh[nsh - 1] = (Elf64_Shdr){.sh_name = shname,
                               .sh_type = SHT_STRTAB,
                               .sh_offset = off,
                               .sh_size = shstr_size,
                               .sh_addralign = 1};
    if (rc == 0)
        rc = pwrite_all(fd, names, nl, off);
    uint64_t shoff = align(off + shstr_size, 64);
    Elf64_Ehdr eh = {.e_type = ET_DYN,
                     .e_machine = EM_X86_64,
                     .e_version = EV_CURRENT,
                     .e_phoff = sizeof(Elf64_Ehdr),
                     .e_shoff = shoff,
                     .e_ehsize = sizeof(Elf64_Ehdr),
                     .e_phentsize = sizeof(Elf64_Phdr),
                     .e_phnum = 1,
                     .e_shentsize = sizeof(Elf64_Shdr),
                     .e_shnum = (uint16_t)nsh,
                     .e_shstrndx = (uint16_t)(nsh - 1)};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    uint64_t end = shoff + nsh * sizeof(Elf64_Shdr);
    if (o && o->shnum_ext) { /* extended numbering: the rest of the table is a hole */
        eh.e_shnum = 0;
        sh[0].sh_size = o->shnum_ext;
        end = shoff + o->shnum_ext * sizeof(Elf64_Shdr);
    }
    Elf64_Phdr ph = {.p_type = PT_LOAD,
                     .p_flags = PF_R | PF_X,
                     .p_offset = HG_TEXT,
                     .p_vaddr = HG_TEXT,
                     .p_filesz = HG_TEXT_SIZE,
                     .p_memsz = HG_TEXT_SIZE,
                     .p_align = PAGE};
    if (rc == 0)
        rc = pwrite_all(fd, &eh, sizeof(eh), 0);
    if (rc == 0)
        rc = pwrite_all(fd, &ph, sizeof(ph), sizeof(eh));
    if (rc == 0)
        rc = pwrite_all(fd, sh, nsh * sizeof(*sh), shoff);
    if (rc == 0 && ftruncate(fd, (off_t)end) != 0)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    free(sh);
    free(names);
    return rc;
}

void pfr_hg_rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[4096];
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

void *pfr_hg_zeros_z(uint64_t n, size_t *len)
{
    static unsigned char zeros[1 << 16];
    size_t cap = (size_t)(n / 500) + 4096;
    unsigned char *out = malloc(cap);
    z_stream z = {0};
    if (!out || deflateInit(&z, 9) != Z_OK) {
        free(out);
        return NULL;
    }
    z.next_out = out;
    z.avail_out = (uInt)cap;
    for (uint64_t left = n; left > 0 || z.avail_in == 0;) {
        size_t chunk = left < sizeof(zeros) ? (size_t)left : sizeof(zeros);
        z.next_in = zeros;
        z.avail_in = (uInt)chunk;
        left -= chunk;
        if (deflate(&z, left ? Z_NO_FLUSH : Z_FINISH) == Z_STREAM_END || z.avail_out == 0)
            break;
    }
    *len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

void *pfr_hg_chdr(uint64_t ch_size, const void *z, size_t zlen, size_t *len)
{
    Elf64_Chdr ch = {.ch_type = ELFCOMPRESS_ZLIB, .ch_size = ch_size, .ch_addralign = 1};
    unsigned char *out = malloc(sizeof(ch) + zlen);
    if (!out)
        return NULL;
    memcpy(out, &ch, sizeof(ch));
    memcpy(out + sizeof(ch), z, zlen);
    *len = sizeof(ch) + zlen;
    return out;
}

void pfr_hg_dwarf_unit(uint64_t lo, uint64_t hi, const void **abbrev, size_t *alen,
                       const void **info, size_t *ilen)
{
    /* abbrev 1: compile_unit, no children: name (string), stmt_list (sec_offset), low_pc
     * (addr), high_pc (data8: a length) */
    static const unsigned char ab[] = {1,    0x11, 0,    0x03, 0x08, 0x10, 0x17,
                                       0x11, 0x01, 0x12, 0x07, 0,    0,    0};
    static unsigned char in[64];
    size_t n = 4;
    in[n++] = 4, in[n++] = 0;         /* version 4 */
    memset(in + n, 0, 4), n += 4;     /* abbrev offset */
    in[n++] = 8;                      /* address size */
    in[n++] = 1;                      /* abbrev 1 */
    memcpy(in + n, "h.c", 4), n += 4; /* DW_AT_name */
    memset(in + n, 0, 4), n += 4;     /* DW_AT_stmt_list: offset 0 */
    memcpy(in + n, &lo, 8), n += 8;   /* DW_AT_low_pc */
    uint64_t len = hi - lo;
    memcpy(in + n, &len, 8), n += 8; /* DW_AT_high_pc */
    uint32_t ul = (uint32_t)(n - 4);
    memcpy(in, &ul, 4);
    *abbrev = ab;
    *alen = sizeof(ab);
    *info = in;
    *ilen = n;
}

void *pfr_hg_line_program(uint64_t lo, uint64_t rows, size_t *len)
{
    /* DWARF 4 header: min_inst 1, max_ops 1, default_is_stmt 1, line_base -5, line_range 14,
     * opcode_base 13 and its 12 standard lengths; no directory; one file "h.c" */
    static const unsigned char hdr[] = {1, 1, 1, 0xfb, 14, 13,  0,   1,   1, 1, 1, 0, 0, 0,
                                        1, 0, 0, 1,    0,  'h', '.', 'c', 0, 0, 0, 0, 0};
    size_t n = 4 + 2 + 4 + sizeof(hdr) + 11 + rows + 3;
    unsigned char *p = malloc(n);
    if (!p)
        return NULL;
    size_t w = 4;
    p[w++] = 4, p[w++] = 0;
    uint32_t hl = sizeof(hdr);
    memcpy(p + w, &hl, 4), w += 4;
    memcpy(p + w, hdr, sizeof(hdr)), w += sizeof(hdr);
    p[w++] = 0, p[w++] = 9, p[w++] = 2; /* DW_LNE_set_address */
    memcpy(p + w, &lo, 8), w += 8;
    memset(p + w, 0x20, rows), w += rows; /* special opcode: a row, address + 1, line + 0 */
    p[w++] = 0, p[w++] = 1, p[w++] = 1;   /* DW_LNE_end_sequence */
    uint32_t ul = (uint32_t)(w - 4);
    memcpy(p, &ul, 4);
    *len = w;
    return p;
}

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':')
            v = strtol(line + kl + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct hg_result {
    int ret;
    long peak_kb;
    int64_t ns;
};

int pfr_hg_measure(int (*fn)(void *arg, void *out, size_t outlen), void *arg, void *out,
                   size_t outlen, int timeout_s, int *ret, long *peak_kb, int64_t *ns)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(p[0]);
        int cr = open("/proc/self/clear_refs", O_WRONLY);
        if (cr >= 0) { /* "5": VmHWM starts again from VmRSS */
            if (write(cr, "5", 1) != 1)
                _exit(3);
            close(cr);
        }
        long before = status_kb("VmRSS");
        int64_t t0 = now_ns();
        struct hg_result r = {.ret = fn(arg, out, outlen)};
        r.ns = now_ns() - t0;
        r.peak_kb = status_kb("VmHWM") - before;
        if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r) ||
            (outlen && write(p[1], out, outlen) != (ssize_t)outlen))
            _exit(2);
        _exit(0);
    }
    close(p[1]);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    struct hg_result r;
    int ok = poll(&pf, 1, timeout_s * 1000) == 1 && read(p[0], &r, sizeof(r)) == sizeof(r);
    for (size_t got = 0; ok && got < outlen;) {
        ssize_t k = read(p[0], (char *)out + got, outlen - got);
        if (k <= 0)
            ok = 0;
        else
            got += (size_t)k;
    }
    close(p[0]);
    if (!ok)
        kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    *ret = r.ret;
    *peak_kb = r.peak_kb;
    *ns = r.ns;
    return 0;
}

/* The first executable PT_LOAD of the ELF64 file at fd: its file range. */
static int exec_segment(int fd, uint64_t *off, uint64_t *len)
{
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || eh.e_phnum == 0)
        return -1;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
            return -1;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_filesz > 0) {
            *off = ph.p_offset;
            *len = ph.p_filesz;
            return 0;
        }
    }
    return -1;
}

static int symbolize_file(const char *path, const pfr_sym_opts *opts, unsigned n, pfr_sym_stats *st,
                          unsigned *named, unsigned *lined)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    uint64_t off, len;
    if (fd < 0 || fstat(fd, &sb) != 0 || exec_segment(fd, &off, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* the segment alone, as a loader would map it (its pages are never touched here) */
    uint64_t start = off / PAGE * PAGE, size = off + len - start;
    unsigned char *base = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)start);
    close(fd);
    if (base == MAP_FAILED)
        return -1;
    pfr_symbolizer *s = NULL;
    if (pfr_symbolizer_new(opts, &s) != 0 || pfr_symbolizer_add_process(s, getpid()) != 0) {
        pfr_symbolizer_free(s);
        munmap(base, size);
        return -1;
    }
    *named = *lined = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t at = off - start + (len - 1) / n * i + (n > 1 ? 0 : len / 2);
        pfr_sym_frame fr[8];
        int k = pfr_symbolize_user(s, getpid(), (uint64_t)(uintptr_t)(base + at), fr, 8);
        if (k > 0 && !strchr(fr[k - 1].function, '+') && fr[k - 1].function[0] != '[')
            (*named)++;
        if (k > 0 && fr[0].line > 0)
            (*lined)++;
    }
    pfr_symbolizer_stats(s, st);
    pfr_symbolizer_free(s);
    munmap(base, size);
    return 0;
}

struct file_job {
    const char *path;
    const pfr_sym_opts *opts;
    unsigned n;
};

static int file_run(void *arg, void *out, size_t outlen)
{
    struct file_job *j = arg;
    struct hg_file_result *r = out;
    (void)outlen;
    return symbolize_file(j->path, j->opts, j->n, &r->st, &r->named, &r->lined);
}

int pfr_hg_measure_file(const char *path, const pfr_sym_opts *opts, unsigned n, int timeout_s,
                        struct hg_file_result *r)
{
    struct file_job j = {path, opts, n};
    int ret;
    memset(r, 0, sizeof(*r));
    if (pfr_hg_measure(file_run, &j, r, sizeof(*r), timeout_s, &ret, &r->peak_kb, &r->ns) != 0)
        return -1;
    return ret == 0 ? 0 : -1;
}
