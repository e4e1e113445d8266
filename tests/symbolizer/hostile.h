/* Hostile ELF files for the symbolizer's limits: sections whose declared sizes or counts lie or
 * are huge (written sparse: the file is big, its disk use is not), compression bombs, and a
 * measure of a parse's peak memory in a child process. */
#ifndef PFR_SYM_HOSTILE_H
#define PFR_SYM_HOSTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hg_sec {
    const char *name;
    uint32_t type;
    uint64_t flags, addr, entsize;
    uint32_t link; /* a section index: 1 is .text, the i-th of secs is i + 2 */
    uint32_t info;
    const void *data; /* len bytes written at the section's start */
    size_t len;
    uint64_t size; /* declared sh_size (0: len); past len the file is a hole */
    bool lie;      /* the declared size is not laid out: it runs past the end of the file */
};

/* The file's layout: ELF64 x86-64 ET_DYN; one PT_LOAD (R+X) of .text alone, at offset and
 * address 0x1000 (section 1, 0x1000 bytes of int3); then secs in order, each at a page-aligned
 * offset past the previous one's declared end; .shstrtab; the section headers. */
#define HG_TEXT      0x1000u
#define HG_TEXT_SIZE 0x1000u

struct hg_opts {
    uint64_t shnum_ext;     /* != 0: e_shnum 0 and this count in section 0 (the table a hole) */
    uint64_t shstrtab_size; /* != 0: .shstrtab declared this big (the rest a hole) */
};

/* Writes the file; 0 or -errno. */
int pfr_hg_write(const char *path, const struct hg_sec *secs, size_t n, const struct hg_opts *o);

/* Removes the files of dir, then dir. */
void pfr_hg_rm_dir(const char *dir);

/* A zlib stream of n zero bytes (malloc'ed, *len bytes): a bomb of ratio ~1000. */
void *pfr_hg_zeros_z(uint64_t n, size_t *len);
/* An ELF compression header (ELFCOMPRESS_ZLIB, ch_size) followed by z: a SHF_COMPRESSED
 * section's bytes (malloc'ed). */
void *pfr_hg_chdr(uint64_t ch_size, const void *z, size_t zlen, size_t *len);

/* Minimal DWARF 4: one compile unit over [lo, hi) with its line program at offset 0 of
 * .debug_line; abbrev and info into bufs (static, valid until the next call). */
void pfr_hg_dwarf_unit(uint64_t lo, uint64_t hi, const void **abbrev, size_t *alen,
                       const void **info, size_t *ilen);
/* A line program of rows rows (one special opcode each, a byte per row) from address lo:
 * malloc'ed, *len bytes. */
void *pfr_hg_line_program(uint64_t lo, uint64_t rows, size_t *len);

/* A parse measured in a child: fn(arg, out, outlen) runs there and may write up to outlen bytes
 * of results to out; returns fn's value. *peak_kb: how much VmHWM rose over VmRSS before fn,
 * *ns: its wall time. The child is killed after timeout_s. 0 or -1 (it crashed, timed out). */
int pfr_hg_measure(int (*fn)(void *arg, void *out, size_t outlen), void *arg, void *out,
                   size_t outlen, int timeout_s, int *ret, long *peak_kb, int64_t *ns);

#ifdef PFR_SYMBOLIZER_H
struct hg_file_result {
    pfr_sym_stats st;
    unsigned named, lined; /* frames named (a function name), frames with a line */
    long peak_kb;          /* as pfr_hg_measure says */
    int64_t ns;
};

/* In a child (pfr_hg_measure): map path (read + exec) and symbolize n addresses spread over
 * its first executable segment with a new symbolizer of opts (NULL: defaults). 0, or -1 when
 * the child crashed, timed out or could not map the file. */
int pfr_hg_measure_file(const char *path, const pfr_sym_opts *opts, unsigned n, int timeout_s,
                        struct hg_file_result *r);
#endif

#endif
