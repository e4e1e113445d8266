/*
 * sym_maps: /proc/PID/maps parser. Keeps only executable mappings (the only ones a sampled
 * instruction pointer or return address can fall in), sorted by address for binary search.
 * Input is treated as hostile: every field is validated, and line length, line count and kept
 * mappings are bounded; a malformed file is rejected whole with a reason.
 */
#ifndef PFR_SYM_MAPS_H
#define PFR_SYM_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sym_strpool.h"

#define PFR_MAPS_MAX_LINE  8192      /* PATH_MAX plus the fixed fields and " (deleted)" */
#define PFR_MAPS_MAX_LINES (1 << 20) /* well above vm.max_map_count's usual 65530 */
#define PFR_MAPS_MAX_EXEC  (1 << 16)

enum pfr_sym_map_kind {
    PFR_MAP_FILE,    /* a path: open it through /proc/PID/root or map_files */
    PFR_MAP_ANON,    /* no path: JIT code and the like */
    PFR_MAP_VDSO,    /* [vdso] */
    PFR_MAP_SPECIAL, /* other [bracketed] names: [vsyscall], [heap], ... */
};

struct pfr_sym_map {
    uint64_t start, end, pgoff;
    uint64_t dev; /* makedev(major, minor) as stat() reports it */
    uint64_t ino;
    uint32_t path; /* offset in pfr_sym_maps.paths, without " (deleted)" */
    uint8_t kind;  /* enum pfr_sym_map_kind */
    bool deleted;
};

struct pfr_sym_maps {
    struct pfr_sym_map *v; /* owned */
    size_t n, cap;
    struct pfr_sym_strpool paths;
};

/* One parsed line; path points into the line. Returns 0 or -EINVAL with a reason. */
struct pfr_sym_maps_line {
    uint64_t start, end, pgoff, dev, ino;
    char perms[4];
    const char *path;
    size_t path_len;
};
int pfr_sym_maps_parse_line(const char *line, size_t len, struct pfr_sym_maps_line *out, char *err,
                            size_t errlen);

/* Read and parse a maps file into out (which must be zeroed). On error out is emptied. */
int pfr_sym_maps_read(const char *path, struct pfr_sym_maps *out, char *err, size_t errlen);
int pfr_sym_maps_parse_mem(const char *data, size_t len, struct pfr_sym_maps *out, char *err,
                           size_t errlen);
/* The same from the kernel's PROCMAP_QUERY ioctl on the maps file at path: only executable
 * mappings are asked for, so no text is made and parsed for the others. -ENOTTY on kernels
 * before 6.11 (read the text then); without [vsyscall], which the ioctl does not list. */
int pfr_sym_maps_query(const char *path, struct pfr_sym_maps *out, char *err, size_t errlen);

/* The same from mappings listed elsewhere (the kernel's list at a process's exit): only the
 * executable ones, by address and not overlapping, else -EINVAL with a reason. */
int pfr_sym_maps_from_lines(const struct pfr_sym_maps_line *v, size_t n, struct pfr_sym_maps *out,
                            char *err, size_t errlen);

/* The mapping containing addr, or NULL. */
const struct pfr_sym_map *pfr_sym_maps_find(const struct pfr_sym_maps *m, uint64_t addr);
static inline const char *pfr_sym_map_path(const struct pfr_sym_maps *m,
                                           const struct pfr_sym_map *e)
{
    return pfr_sym_strpool_get(&m->paths, e->path);
}
size_t pfr_sym_maps_bytes(const struct pfr_sym_maps *m);
void pfr_sym_maps_free(struct pfr_sym_maps *m);

#endif
