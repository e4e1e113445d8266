/*
 * The symbolizer: per-process mapping snapshots, a cache of parsed files shared across
 * processes (keyed by build-id, reached through dev:inode), the kernel's symbols, and the glue
 * that turns one address into frames. See symbolizer.h for the contract.
 *
 * Cost model: add_process reads /proc/PID/maps once and parses only files not seen before. A
 * lookup is a hash lookup of the pid, a binary search of its mappings, a hash lookup of the file,
 * then a binary search of its symbols or a memo hit; no system call once a file is cached.
 */
#include "symbolizer.h"
#include "pfr_fsguard.h"
#include "pfr_membudget.h"
#include "sym_dwarf.h"
#include "sym_elf.h"
#include "sym_file.h"
#include "sym_gopcln.h"
#include "sym_hmap.h"
#include "sym_kallsyms.h"
#include "sym_maps.h"
#include "sym_perfmap.h"
#include "sym_vdso.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pfr_clock.h"

#define DEFAULT_CACHE_BYTES (32u << 20)
#define MIN_KEPT_FDS        16   /* descriptors kept by cached files (names, DWARF): at least */
#define MAX_KEPT_FDS        4096 /* and at most; else half the soft RLIMIT_NOFILE */
#define MAX_NEGATIVE        4096 /* remembered unusable files before forgetting them all */
/* A file the memory budget refused is not opened again for this long (its frames stay
 * module+offset meanwhile): it was opened, and refused, for every frame of every interval. */
#define PUTOFF_NS      (10 * 1000000000ll)
#define MAX_FILE_PATHS 4096        /* remembered paths of mapped files before forgetting them all */
#define REFRESH_NS     2000000000L /* re-read maps on an unmapped address at most this often */
/* A perf map is read for an unnamed JIT address at most this often: less than the shortest
 * interval (1 s), so that every drain reads what was written since the one before (at 1 s, a
 * drain that came 0.98 s after the last read left a starting node's new code unnamed: 11 % of
 * its samples beside CPU hogs); a bound still, so that a map written all the time is not read
 * again for each unnamed frame. */
#define JIT_REFRESH_NS 100000000L
#define DEBUG_DIR      "/usr/lib/debug/.build-id"
/* DWARF dropped for room is read again no sooner than this: under pressure, new addresses of
 * that file go without file:line for a while rather than inflating its debug sections each time */
#define DWARF_BACKOFF_NS 30000000000LL
/* room kept for the line tables read from a file's debug sections, as a share of their size:
 * its DWARF is read only if both fit */
#define DWARF_GROWTH_SHARE 8

struct sym_proc {
    pid_t pid;
    struct pfr_sym_maps maps;
    int64_t last_read_ns;
    bool gone;
    bool refreshed;              /* re-read since its snapshot (see refresh()) */
    struct pfr_sym_perfmap *jit; /* its JIT's perf map, once code outside files was met */
    int64_t jit_read_ns;         /* when that map was last opened or read */
    bool jit_refused;            /* its map is not one to read (see sym_perfmap.h) */
};

struct seg_list {
    struct pfr_sym_file *head, *tail;
    size_t bytes;
};

struct pfr_symbolizer {
    char *proc_root;
    char *debug_dir;                 /* separate debug files, by build-id */
    struct pfr_fsguard *fsguard;     /* NULL: files opened directly */
    struct pfr_membudget *membudget; /* NULL: no budget */
    bool file_pending; /* the last file_for_map() was put off, not refused: frames of it are
                          good for this interval only */
    size_t max_bytes;
    size_t bound; /* what the cache may hold now: max_bytes, or less near the memory budget */
    size_t max_dwarf, max_dwarf_file, max_protected;
    bool no_dwarf;
    bool no_perf_maps;
    int64_t parse_budget_ns;
    size_t jit_bytes;           /* held by the perf maps of all processes */
    bool no_maps_query;         /* PROCMAP_QUERY refused once: read the maps text */
    struct pfr_sym_hmap procs;  /* pid -> struct sym_proc * */
    struct pfr_sym_hmap devino; /* dev, inode -> struct pfr_sym_file * */
    struct pfr_sym_hmap neg;    /* dev, inode of files that cannot be used */
    struct pfr_sym_hmap putoff; /* dev, inode -> when a file the budget refused is asked again */
    struct pfr_sym_hmap keys;   /* key hashes -> struct pfr_sym_file * */
    struct pfr_sym_hmap gone;   /* key hashes of evicted files (to count re-parses) */
    /* dev, inode -> offset in path_pool: where snapshots saw each mapped file, to name the
     * files of mappings listed at a process's exit (pfr_symbolizer_set_exit_maps) */
    struct pfr_sym_hmap file_paths;
    struct pfr_sym_strpool path_pool;
    /* An overlayfs (container) file is mapped from its layer's file: the kernel's exit walk
     * names that one, snapshots the overlay's (another device, mostly the same inode number). */
    struct pfr_sym_hmap by_ino;  /* inode -> device of the file last remembered with it */
    struct pfr_sym_hmap aliases; /* dev, inode of a layer's file -> the overlay's device */
    uint64_t paths_gen;          /* times file_paths was emptied */
    struct seg_list seg[2];      /* probation, protected */
    uint64_t tick;               /* one per add_process and per user address */
    uint64_t next_uid;           /* of the next file cached */
    size_t cache_bytes, dwarf_bytes;
    size_t kept_fds, max_fds, nfiles;
    struct pfr_sym_file *vdso;
    int vdso_state;
    struct pfr_sym_kallsyms ksyms;
    int ksyms_state; /* 0: not loaded, 1: loaded, -1: unreadable */
    pfr_sym_stats st;
    char unnamed[PATH_MAX + 32]; /* the "module+0xoff" of the current call */
    char err[256];
    char jit_err[256]; /* why the last perf map was refused or unreadable */
};

/* ---- the cache: two segments, DWARF dropped before symbols ----
 *
 * A segmented LRU (SLRU): a parsed file enters the probation segment; used again later (by
 * another process or another sample: a later tick) it moves to the protected segment, which may
 * hold up to 3/4 of the bound; past that its least recent file goes back to probation. A file
 * parsed again after its eviction (its key is remembered, as 2Q's ghost list) enters protected
 * directly: it was not a file seen once. Room is made in this order: DWARF of probation files,
 * DWARF of protected files, probation files, protected files, each least recent first, and in
 * each segment the files cheapest to parse again for the room they free first (evict_class()).
 * So a burst of new programs (each mapping files once) cycles through probation while the
 * libraries every process uses stay, line tables go before symbols, and a few large tables
 * passing through (a compiler's Go table, LLVM) evict each other, not the many small libraries.
 *
 * DWARF (libdw's inflated debug sections and line tables) is a separate, capped part of a file:
 * all files' DWARF together may take half of the bound, one file's at most the same, checked
 * against the debug sections' size before anything is inflated; and all DWARF goes before any
 * file's symbols (names matter more than lines). Dropping a file's DWARF keeps its memo (the
 * frames of every address already looked up), so a hot library's frames keep their lines without
 * its debug sections staying resident; DWARF is opened again only for an address the memo lacks,
 * and no sooner than DWARF_BACKOFF_NS after the drop. */

enum { SEG_PROBATION, SEG_PROTECTED, NSEG };

/* Steps of make_room(), in order. */
enum { ROOM_COLD_DWARF, ROOM_HOT_DWARF, ROOM_COLD_FILES, ROOM_HOT_FILES };

/* A file holding more than this share of the bound is large (evict_class()). */
#define LARGE_SHARE 32

/* Which files of a segment make room first (class 0, then 1, then 2), by what parsing one again
 * costs for the room its eviction frees. A small file's parse is mostly fixed costs (open, ELF
 * and section headers, notes), so it costs the most per byte; a symbol table's parse grows with
 * its symbols (read, sorted), as its bytes do; a Go table keeps only its function and file
 * tables (sym_gopcln.h), read again at a few ns a byte. Measured beside a build and a browser on a
 * loaded host: a library of 27 symbols 4.6 ms a parse (1.5 KB kept), libLLVM's 34,000 symbols 55 ms
 * (550 KB), the Go compiler's 4.3 MB table 17 ms; with the cache held at 8 MiB by the memory budget
 * and Go tools, compilers and LLVM passing through, plain LRU evicted ~250 small libraries (2.9 MB
 * in all) over and over: 600 of 700 parses a round were theirs. */
static int evict_class(const pfr_symbolizer *s, const struct pfr_sym_file *f)
{
    size_t large = s->bound / LARGE_SHARE;
    if (pfr_sym_gopcln_bytes(f->gopcln) > large)
        return 0;
    return f->bytes > large ? 1 : 2;
}

static void seg_unlink(pfr_symbolizer *s, struct pfr_sym_file *f)
{
    struct seg_list *l = &s->seg[f->seg];
    if (f->prev)
        f->prev->next = f->next;
    else
        l->head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        l->tail = f->prev;
    f->prev = f->next = NULL;
    l->bytes -= f->bytes;
}

static void seg_push(pfr_symbolizer *s, struct pfr_sym_file *f, uint8_t seg)
{
    struct seg_list *l = &s->seg[seg];
    f->seg = seg;
    f->prev = NULL;
    f->next = l->head;
    if (l->head)
        l->head->prev = f;
    l->head = f;
    if (!l->tail)
        l->tail = f;
    l->bytes += f->bytes;
}

/* Protected over its share: its least recent files go back to probation (most recent first). */
static void balance(pfr_symbolizer *s, const struct pfr_sym_file *keep)
{
    struct seg_list *p = &s->seg[SEG_PROTECTED];
    while (p->bytes > s->max_protected && p->tail && p->tail != keep) {
        struct pfr_sym_file *f = p->tail;
        seg_unlink(s, f);
        seg_push(s, f, SEG_PROBATION);
    }
}

static void touch(pfr_symbolizer *s, struct pfr_sym_file *f)
{
    if (f->pinned)
        return;
    bool again = f->last_tick != s->tick;
    f->last_tick = s->tick;
    if (f->seg == SEG_PROBATION && again) {
        seg_unlink(s, f);
        seg_push(s, f, SEG_PROTECTED);
        balance(s, f);
    } else if (s->seg[f->seg].head != f) {
        uint8_t seg = f->seg;
        seg_unlink(s, f);
        seg_push(s, f, seg);
    }
}

static void set_bytes(pfr_symbolizer *s, struct pfr_sym_file *f)
{
    size_t b = pfr_symfile_bytes(f), d = pfr_sym_dwarf_bytes(f->dwarf);
    s->cache_bytes = s->cache_bytes - f->bytes + b;
    s->dwarf_bytes = s->dwarf_bytes - f->dwarf_bytes + d;
    if (!f->pinned)
        s->seg[f->seg].bytes = s->seg[f->seg].bytes - f->bytes + b;
    f->bytes = b;
    f->dwarf_bytes = d;
}

/* Close f's DWARF. The memo stays; reopen: DWARF may be read again for an address it lacks. */
static void drop_dwarf(pfr_symbolizer *s, struct pfr_sym_file *f, bool reopen)
{
    if (!f->dwarf)
        return;
    pfr_sym_dwarf_close(f->dwarf);
    f->dwarf = NULL;
    f->dwarf_state = reopen ? 0 : -1;
    f->dwarf_retry_ns = pfr_clock_mono_ns() + DWARF_BACKOFF_NS;
    s->st.dwarf_evictions++;
    set_bytes(s, f);
}

static void remember_gone(pfr_symbolizer *s, const struct pfr_sym_file *f)
{
    if (s->gone.n >= MAX_NEGATIVE)
        pfr_sym_hmap_clear(&s->gone);
    pfr_sym_hmap_put(&s->gone, f->kh1, f->kh2, 1);
}

static void drop_file(pfr_symbolizer *s, struct pfr_sym_file *f)
{
    for (size_t i = 0; i < f->nlinks; i++)
        pfr_sym_hmap_del(&s->devino, f->links[i].dev, f->links[i].ino);
    pfr_sym_hmap_del(&s->keys, f->kh1, f->kh2);
    if (!f->pinned)
        seg_unlink(s, f);
    if (f->fd >= 0)
        s->kept_fds--;
    s->nfiles--;
    s->cache_bytes -= f->bytes;
    s->dwarf_bytes -= f->dwarf_bytes;
    pfr_symfile_free(f);
}

/* What parsing a file holds, roughly, for the memory budget: its symbol tables' entries (syms:
 * from the section headers; names are read later) and, for Go, a sixteenth of the file for its
 * table; DWARF is capped apart. Within 64 KiB .. 16 MiB. A sixteenth of every file asked 12 MiB
 * for a stripped 200 MB browser whose .dynsym keeps ~1 MiB. */
static uint64_t parse_cost(int fd, bool is_go, size_t syms)
{
    struct stat st;
    uint64_t size = fstat(fd, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
    uint64_t cost = syms + (is_go ? size / 16 : 0);
    return cost < (64u << 10) ? 64u << 10 : cost > (16u << 20) ? 16u << 20 : cost;
}

static bool over(const pfr_symbolizer *s, size_t need)
{
    return s->cache_bytes + need > s->bound;
}

/* What all DWARF may hold now: half of the bound (max_dwarf is half of the setting). With the
 * cache held near its floor by the memory budget, DWARF at half of the setting could take the
 * whole bound: beside a build and a browser it held 5.7 of 8.2 MB, 51 files were left, and
 * each DWARF load (inflating 0.4-10 MB of compressed sections) evicted symbol tables. */
static size_t dwarf_cap(const pfr_symbolizer *s)
{
    return s->bound / 2 < s->max_dwarf ? s->bound / 2 : s->max_dwarf;
}

static bool over_dwarf(const pfr_symbolizer *s, size_t need)
{
    return s->dwarf_bytes + need > dwarf_cap(s);
}

/* Until need more bytes fit (DWARF bytes when dwarf_only), drop DWARF then files, coldest
 * first (files by evict_class() first), up to step `last` (ROOM_*), never `keep` (in use by
 * the caller). */
static void make_room(pfr_symbolizer *s, const struct pfr_sym_file *keep, size_t need,
                      bool dwarf_only, int last)
{
    for (int step = ROOM_COLD_DWARF; step <= last; step++) {
        bool files = step == ROOM_COLD_FILES || step == ROOM_HOT_FILES;
        if (files && dwarf_only)
            continue;
        bool cold = step == ROOM_COLD_DWARF || step == ROOM_COLD_FILES;
        struct seg_list *l = &s->seg[cold ? SEG_PROBATION : SEG_PROTECTED];
        for (int cls = files ? 0 : 2; cls <= 2; cls++) {
            for (struct pfr_sym_file *f = l->tail, *prev; f; f = prev) {
                if (dwarf_only ? !over_dwarf(s, need) : !over(s, need))
                    return;
                prev = f->prev;
                if (f == keep || (files && evict_class(s, f) > cls))
                    continue;
                if (!files) {
                    drop_dwarf(s, f, true);
                } else {
                    remember_gone(s, f);
                    drop_file(s, f);
                    s->st.evictions++;
                }
            }
        }
    }
}

/* Every cached file with symbols keeps its descriptor (its names are read from it): under the
 * descriptor cap, evict files holding one, coldest first, as make_room() does for bytes. */
static void make_fd_room(pfr_symbolizer *s)
{
    for (int seg = SEG_PROBATION; seg < NSEG && s->kept_fds >= s->max_fds; seg++)
        for (struct pfr_sym_file *f = s->seg[seg].tail, *prev; f && s->kept_fds >= s->max_fds;
             f = prev) {
            prev = f->prev;
            if (f->fd < 0)
                continue;
            remember_gone(s, f);
            drop_file(s, f);
            s->st.evictions++;
        }
}

/* DWARF not kept now (outgrown, no room): opened again when needed, each time later, from
 * DWARF_BACKOFF_NS doubled up to ~1 h. */
static void backoff_dwarf(struct pfr_sym_file *f)
{
    if (f->dwarf_backoffs < 7)
        f->dwarf_backoffs++;
    f->dwarf_state = 0;
    f->dwarf_retry_ns = pfr_clock_mono_ns() + (DWARF_BACKOFF_NS << f->dwarf_backoffs);
}

/* After f grew (or was added): hold the caps on its DWARF and on all DWARF, then the bound by
 * evicting others; if f alone is still over the bound (its DWARF line tables and memo grow
 * with use), give up its DWARF and memo: its symbols (and Go table) always fit. */
static void reaccount(pfr_symbolizer *s, struct pfr_sym_file *f)
{
    set_bytes(s, f);
    if (f->dwarf_bytes > s->max_dwarf_file) {
        /* Line tables outgrew the cap: reopen empty when needed (the memo keeps the lines
         * found), each time later: a file whose DWARF hovers at the cap was read again every
         * back-off, at tens of ms a time, evicting the others' DWARF on the way. */
        drop_dwarf(s, f, true);
        backoff_dwarf(f);
        s->st.dwarf_outgrown++;
    }
    make_room(s, f, 0, true, ROOM_HOT_FILES);
    make_room(s, f, 0, false, ROOM_HOT_FILES);
    if (!f->pinned && f->seg == SEG_PROTECTED)
        balance(s, f);
    if (over(s, 0) && (f->dwarf || f->memo.n)) {
        drop_dwarf(s, f, false);
        f->dwarf_state = -1;
        pfr_sym_hmap_free(&f->memo);
        free(f->recs);
        f->recs = NULL;
        f->nrecs = f->caprecs = 0;
        set_bytes(s, f);
    }
}

void pfr_symbolizer_set_bound(pfr_symbolizer *s, size_t bytes)
{
    s->bound = bytes && bytes < s->max_bytes ? bytes : s->max_bytes;
    if (over_dwarf(s, 0))
        make_room(s, NULL, 0, true, ROOM_HOT_DWARF);
    if (s->cache_bytes > s->bound)
        make_room(s, NULL, 0, false, ROOM_COLD_FILES);
}

/* ---- opening a mapped file ---- */

static bool same_file(int fd, const struct pfr_sym_map *m)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == m->dev && st.st_ino == m->ino;
}

static int open_checked(const char *path, const struct pfr_sym_map *m, bool *matched)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd >= 0)
        *matched = same_file(fd, m);
    return fd;
}

/* The file behind a mapping: through the process's root (containers), then its map_files link
 * (deleted files, other mount namespaces), then the host path when the process is gone (only if
 * dev:inode still match, so a replaced file is never used for the old mapping). */
/* A file on a remote file system: never opened here, but copied by the guard's worker (its map
 * link, else its path under the process's root), which checks dev:inode itself. */
static int open_remote(pfr_symbolizer *s, pid_t pid, const struct pfr_sym_maps *maps,
                       const struct pfr_sym_map *m)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, s->proc_root, (int)pid,
             m->start, m->end);
    int fd = pfr_fsguard_copy(s->fsguard, path, m->dev, m->ino);
    const char *mpath = pfr_sym_map_path(maps, m);
    /* map_files wants CAP_SYS_ADMIN */
    if (fd == -EPERM || fd == -ENOENT || fd == -EACCES) {
        if (m->deleted || mpath[0] != '/')
            return fd;
        snprintf(path, sizeof(path), "%s/%d/root%s", s->proc_root, (int)pid, mpath);
        fd = pfr_fsguard_copy(s->fsguard, path, m->dev, m->ino);
    }
    return fd;
}

static int open_mapped(pfr_symbolizer *s, pid_t pid, const struct pfr_sym_maps *maps,
                       const struct pfr_sym_map *m)
{
    if (s->fsguard && !pfr_fsguard_local(s->fsguard, pid, m->dev))
        return open_remote(s, pid, maps, m);
    char path[PATH_MAX + 64];
    const char *mpath = pfr_sym_map_path(maps, m);
    bool matched = false;
    int loose = -1, fd;
    if (!m->deleted && mpath[0] == '/') {
        snprintf(path, sizeof(path), "%s/%d/root%s", s->proc_root, (int)pid, mpath);
        fd = open_checked(path, m, &matched);
        if (fd >= 0 && matched)
            return fd;
        loose = fd; /* older kernels report overlayfs' lower inode in maps */
    }
    snprintf(path, sizeof(path), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, s->proc_root, (int)pid,
             m->start, m->end);
    fd = open_checked(path, m, &matched);
    if (fd >= 0 && matched) {
        if (loose >= 0)
            close(loose);
        return fd;
    }
    if (fd >= 0)
        close(fd);
    if (loose >= 0)
        return loose;
    if (!m->deleted && mpath[0] == '/') {
        fd = open_checked(mpath, m, &matched);
        if (fd >= 0 && matched)
            return fd;
        if (fd >= 0)
            close(fd);
    }
    return -ENOENT;
}

/* ---- parsing a file into the cache ---- */

static void make_key(struct pfr_sym_file *f, int fd)
{
    if (f->info.id_kind != PFR_ELF_ID_NONE) {
        char hex[2 * PFR_ELF_MAX_BUILDID + 1];
        pfr_sym_elf_id_hex(&f->info, hex, sizeof(hex));
        /* a stripped copy shares the build-id of its original but not its symbols */
        snprintf(f->key, sizeof(f->key), "%c:%s:%c", f->info.id_kind == PFR_ELF_ID_GNU ? 'b' : 'g',
                 hex, f->info.has_symtab ? 's' : 'd');
    } else {
        struct stat st = {0};
        if (fstat(fd, &st) != 0)
            memset(&st, 0, sizeof(st));
        snprintf(f->key, sizeof(f->key), "i:%" PRIu64 ":%" PRIu64 ":%" PRId64 ":%" PRId64 ".%ld",
                 (uint64_t)st.st_dev, (uint64_t)st.st_ino, (int64_t)st.st_size,
                 (int64_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    }
    f->kh1 = pfr_sym_hash(f->key, strlen(f->key), 0);
    f->kh2 = pfr_sym_hash(f->key, strlen(f->key), 0x5bd1e995);
}

static int link_devino(pfr_symbolizer *s, struct pfr_sym_file *f, const struct pfr_sym_map *m)
{
    if (f->nlinks == f->caplinks) {
        size_t ncap = f->caplinks ? f->caplinks * 2 : 2;
        struct pfr_symfile_link *nl = realloc(f->links, ncap * sizeof(*nl));
        if (!nl)
            return -ENOMEM;
        f->links = nl;
        f->caplinks = ncap;
    }
    if (pfr_sym_hmap_put(&s->devino, m->dev, m->ino, (uint64_t)(uintptr_t)f) != 0)
        return -ENOMEM;
    f->links[f->nlinks++] = (struct pfr_symfile_link){m->dev, m->ino};
    return 0;
}

static void mark_unusable(pfr_symbolizer *s, const struct pfr_sym_map *m)
{
    if (s->neg.n >= MAX_NEGATIVE)
        pfr_sym_hmap_clear(&s->neg); /* forget, and retry them later: keeps the table bounded */
    pfr_sym_hmap_put(&s->neg, m->dev, m->ino, 1);
}

/* Parse the ELF open at fd; returns a new file (not yet in the cache) or NULL. */
static struct pfr_sym_file *parse_elf(pfr_symbolizer *s, Elf *e, int fd)
{
    struct pfr_sym_file *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->fd = -1;
    if (pfr_sym_elf_read_info(e, &f->info, s->err, sizeof(s->err)) != 0) {
        free(f);
        return NULL;
    }
    make_key(f, fd);
    return f;
}

static struct pfr_sym_file *find_key(pfr_symbolizer *s, const struct pfr_sym_file *probe)
{
    uint64_t v;
    if (!pfr_sym_hmap_get(&s->keys, probe->kh1, probe->kh2, &v))
        return NULL;
    struct pfr_sym_file *f = (struct pfr_sym_file *)(uintptr_t)v;
    return strcmp(f->key, probe->key) == 0 ? f : NULL;
}

static int insert_file(pfr_symbolizer *s, struct pfr_sym_file *f)
{
    if (pfr_sym_hmap_put(&s->keys, f->kh1, f->kh2, (uint64_t)(uintptr_t)f) != 0)
        return -ENOMEM;
    f->bytes = pfr_symfile_bytes(f);
    f->dwarf_bytes = pfr_sym_dwarf_bytes(f->dwarf);
    f->last_tick = s->tick;
    f->uid = ++s->next_uid;
    s->cache_bytes += f->bytes;
    s->dwarf_bytes += f->dwarf_bytes;
    s->nfiles++;
    s->st.files_parsed++;
    /* needed again after its eviction: not a file seen once (2Q's ghost list) */
    bool back = pfr_sym_hmap_get(&s->gone, f->kh1, f->kh2, NULL);
    if (back) {
        pfr_sym_hmap_del(&s->gone, f->kh1, f->kh2);
        s->st.reparses++;
    }
    if (!f->pinned) {
        seg_push(s, f, back ? SEG_PROTECTED : SEG_PROBATION);
        balance(s, f);
    }
    return 0;
}

/* A parse's budget: its deadline from now. */
static struct pfr_sym_budget parse_budget(const pfr_symbolizer *s)
{
    return (struct pfr_sym_budget){pfr_clock_mono_ns() + s->parse_budget_ns, PFR_REFUSED_NONE};
}

static void count_refusal(pfr_symbolizer *s, int reason)
{
    if (reason > PFR_REFUSED_NONE && reason < PFR_NREFUSALS)
        s->st.files_refused[reason]++;
}

static int open_debug_file(const pfr_symbolizer *s, const struct pfr_sym_file *f)
{
    if (f->info.id_kind != PFR_ELF_ID_GNU || f->info.id_len < 2)
        return -1;
    char hex[2 * PFR_ELF_MAX_BUILDID + 1], path[PATH_MAX];
    pfr_sym_elf_id_hex(&f->info, hex, sizeof(hex));
    if (snprintf(path, sizeof(path), "%s/%.2s/%s.debug", s->debug_dir, hex, hex + 2) >=
        (int)sizeof(path))
        return -1;
    return open(path, O_RDONLY | O_CLOEXEC);
}

static bool has_symtab(Elf *e)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(e, scn)) != NULL) /* counted by the precheck */
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
            return true;
    return false;
}

/* The separate debug file of f, a file without .symtab (an installed -dbg or -dbgsym package,
 * found by build-id), when it has the .symtab f lacks: open, as an ELF in *out; else -1. Its
 * table names the functions .dynsym leaves out (a library's static functions: libc's malloc
 * internals) at 16 bytes a symbol, where only its DWARF named them before: libc's is 10 MB
 * inflated, more than the whole cache near the memory budget, read again and dropped in turn. */
static int open_debug_symtab(pfr_symbolizer *s, const struct pfr_sym_file *f, Elf **out)
{
    *out = NULL;
    if (f->info.has_symtab || f->info.is_go)
        return -1;
    int dfd = open_debug_file(s, f);
    if (dfd < 0)
        return -1;
    struct pfr_sym_budget b = parse_budget(s);
    Elf *de = NULL;
    if (pfr_sym_elf_precheck(dfd, &b, s->err, sizeof(s->err)) == 0)
        de = elf_begin(dfd, ELF_C_READ, NULL);
    count_refusal(s, b.refused);
    if (de && has_symtab(de)) {
        *out = de;
        return dfd;
    }
    if (de)
        elf_end(de);
    close(dfd);
    return -1;
}

static void load_gopcln(pfr_symbolizer *s, struct pfr_sym_file *f, Elf *e, int fd)
{
    size_t used = pfr_symfile_bytes(f);
    size_t budget = s->max_bytes > used ? s->max_bytes - used : 0;
    struct pfr_sym_budget b = parse_budget(s);
    int rc = pfr_sym_gopcln_open(e, fd, budget, &b, &f->gopcln, s->err, sizeof(s->err));
    if (rc && rc != -ENODATA)
        s->st.errors++;
    count_refusal(s, b.refused);
}

/* The cached file for fd (found by key, or parsed now). fd is consumed. */
static struct pfr_sym_file *load_fd(pfr_symbolizer *s, int fd)
{
    /* headers libelf would pay for at elf_begin (a struct per section) are checked first */
    struct pfr_sym_budget b = parse_budget(s);
    if (pfr_sym_elf_precheck(fd, &b, s->err, sizeof(s->err)) < 0) {
        count_refusal(s, b.refused);
        close(fd);
        return NULL;
    }
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    struct pfr_sym_file *f = e ? parse_elf(s, e, fd) : NULL;
    if (!f) {
        if (e)
            elf_end(e);
        close(fd);
        return NULL;
    }
    struct pfr_sym_file *have = find_key(s, f);
    if (have) {
        elf_end(e);
        close(fd);
        free(f);
        return have;
    }
    /* symbols from the debug file when it has the .symtab this one lacks (open_debug_symtab) */
    Elf *de;
    int dfd = open_debug_symtab(s, f, &de);
    /* room first, from cold files only, so the cache plus the table being built stays near the
     * bound (the estimate is an upper bound: clamped, it does not empty the cache for one file;
     * what is still over goes after the parse) */
    size_t need = pfr_sym_elf_syms_estimate(dfd >= 0 ? de : e);
    if (!pfr_membudget_allow(s->membudget, PFR_MEM_SYMBOLS, parse_cost(fd, f->info.is_go, need))) {
        s->file_pending = true; /* asked again later (file_for_map) */
        if (dfd >= 0) {
            elf_end(de);
            close(dfd);
        }
        elf_end(e);
        close(fd);
        free(f);
        return NULL;
    }
    make_room(s, NULL, need < s->max_bytes / 8 ? need : s->max_bytes / 8, false, ROOM_COLD_FILES);
    make_fd_room(s);
    /* 16 bytes per symbol; the names stay in the file, read through fd when first looked up */
    int rc = -ENOENT;
    if (dfd >= 0) {
        rc = pfr_sym_elf_read_syms_fd(de, dfd, &f->syms, s->max_bytes, &b, s->err, sizeof(s->err));
        elf_end(de);
        if (rc == 0 && f->syms.n) {
            close(fd); /* its names, and its DWARF, are the debug file's */
            fd = dfd;
        } else {
            pfr_sym_elf_syms_free(&f->syms);
            close(dfd);
            b = parse_budget(s);
            rc = -ENOENT;
        }
    }
    if (rc == -ENOENT)
        rc = pfr_sym_elf_read_syms_fd(e, fd, &f->syms, s->max_bytes, &b, s->err, sizeof(s->err));
    count_refusal(s, b.refused ? b.refused : f->info.refused);
    /* Go: names of a stripped binary, lines when there is no DWARF to get them from */
    if (rc == 0 && f->info.is_go && (!f->info.has_symtab || (!f->info.has_debug && !s->no_dwarf)))
        load_gopcln(s, f, e, fd);
    elf_end(e);
    if (rc == 0 && (f->syms.n || f->gopcln || (f->info.has_debug && !s->no_dwarf))) {
        /* names, the Go table's lookups, and DWARF on first use, even after the process is
         * gone */
        f->fd = fd;
        s->kept_fds++;
    } else {
        close(fd);
    }
    if (rc == 0)
        rc = insert_file(s, f);
    if (rc) {
        if (f->fd >= 0)
            s->kept_fds--;
        pfr_symfile_free(f);
        return NULL;
    }
    return f;
}

/* Is m's file put off by the memory budget (file_pending set)? Its entry goes once due. */
static bool put_off(pfr_symbolizer *s, const struct pfr_sym_map *m)
{
    uint64_t due;
    if (!pfr_sym_hmap_get(&s->putoff, m->dev, m->ino, &due))
        return false;
    if ((int64_t)due > pfr_clock_mono_ns())
        return s->file_pending = true;
    pfr_sym_hmap_del(&s->putoff, m->dev, m->ino);
    return false;
}

static void put_off_for(pfr_symbolizer *s, const struct pfr_sym_map *m)
{
    if (s->putoff.n >= MAX_NEGATIVE)
        pfr_sym_hmap_clear(&s->putoff); /* bounded: those files are asked again at once */
    pfr_sym_hmap_put(&s->putoff, m->dev, m->ino, (uint64_t)(pfr_clock_mono_ns() + PUTOFF_NS));
}

static struct pfr_sym_file *file_for_map(pfr_symbolizer *s, pid_t pid,
                                         const struct pfr_sym_maps *maps,
                                         const struct pfr_sym_map *m)
{
    uint64_t v;
    s->file_pending = false;
    if (pfr_sym_hmap_get(&s->devino, m->dev, m->ino, &v)) {
        struct pfr_sym_file *f = (struct pfr_sym_file *)(uintptr_t)v;
        touch(s, f);
        s->st.cache_hits++;
        return f;
    }
    if (m->ino == 0 || pfr_sym_hmap_get(&s->neg, m->dev, m->ino, NULL))
        return NULL;
    if (put_off(s, m))
        return NULL;
    s->st.cache_misses++;
    int fd = open_mapped(s, pid, maps, m);
    /* a remote file being copied, or one the memory budget puts off: asked again when it is
     * met again; over the budget not even its headers are read */
    s->file_pending = fd == -EINPROGRESS || fd == -EAGAIN;
    if (fd >= 0 && !pfr_membudget_allow(s->membudget, PFR_MEM_SYMBOLS, 0)) {
        close(fd);
        s->file_pending = true;
        put_off_for(s, m);
        return NULL;
    }
    if (s->file_pending)
        return NULL;
    struct pfr_sym_file *f = fd >= 0 ? load_fd(s, fd) : NULL;
    if (!f && s->file_pending) { /* the budget refused what it would keep */
        put_off_for(s, m);
        return NULL;
    }
    if (!f || link_devino(s, f, m) != 0) {
        if (fd >= 0)
            s->st.errors++; /* opened, yet not a usable ELF */
        mark_unusable(s, m);
        return NULL;
    }
    touch(s, f);
    reaccount(s, f);
    return f;
}

static struct pfr_sym_file *vdso_file(pfr_symbolizer *s)
{
    if (s->vdso_state != 0)
        return s->vdso;
    s->vdso_state = -1;
    size_t size;
    char *img = pfr_sym_vdso_copy(&size);
    Elf *e = img ? elf_memory(img, size) : NULL;
    struct pfr_sym_file *f = e ? parse_elf(s, e, -1) : NULL;
    if (f && pfr_sym_elf_read_syms(e, &f->syms, s->max_bytes, NULL, s->err, sizeof(s->err)) == 0) {
        f->pinned = true;
        snprintf(f->key, sizeof(f->key), "vdso");
        f->kh1 = pfr_sym_hash("vdso", 4, 0);
        f->kh2 = 0;
        if (insert_file(s, f) == 0) {
            s->vdso = f;
            s->vdso_state = 1;
            f = NULL;
        }
    }
    pfr_symfile_free(f);
    if (e)
        elf_end(e);
    free(img);
    return s->vdso;
}

/* ---- DWARF ---- */

/* DWARF bytes of the files in use (the protected segment), f's own excepted. */
static size_t hot_dwarf_bytes(const pfr_symbolizer *s, const struct pfr_sym_file *f)
{
    size_t n = 0;
    for (const struct pfr_sym_file *g = s->seg[SEG_PROTECTED].head; g; g = g->next)
        if (g != f)
            n += g->dwarf_bytes;
    return n;
}

/* Open the DWARF of the ELF at fd into f, within the caps: its size comes from the section
 * headers, so a file over the cap is refused without inflating anything, and room is made
 * before, not after.
 * - Its line tables grow with use: sections that fill nearly all the per-file cap would soon
 *   outgrow it, and be dropped again after evicting the others' DWARF (a 16.6 MB libpython
 *   against a 16 MiB cap did so), so they are refused as over the cap.
 * - Room is made from the DWARF of files not in use only: a newcomer that needs the DWARF of
 *   files in use (libc's debug file, read again at ~90 ms whenever a new address of it comes)
 *   waits instead (-ENOSPC), each time longer; those files' lines stay. */
static int open_dwarf(pfr_symbolizer *s, struct pfr_sym_file *f, int fd)
{
    struct pfr_sym_budget b = parse_budget(s);
    if (pfr_sym_elf_precheck(fd, &b, s->err, sizeof(s->err)) < 0) {
        count_refusal(s, b.refused);
        return b.refused ? -EFBIG : -ENODATA;
    }
    size_t need = pfr_sym_dwarf_size(fd);
    if (need == 0)
        return -ENODATA;
    size_t grown =
        need > SIZE_MAX - need / DWARF_GROWTH_SHARE ? SIZE_MAX : need + need / DWARF_GROWTH_SHARE;
    if (grown > s->max_dwarf_file) {
        snprintf(s->err, sizeof(s->err), "debug sections take %zu bytes, near or over %zu", need,
                 s->max_dwarf_file);
        s->st.dwarf_too_big++;
        count_refusal(s, PFR_REFUSED_TOO_BIG);
        return -EFBIG;
    }
    size_t cap = dwarf_cap(s);
    if (grown > cap || hot_dwarf_bytes(s, f) > cap - grown) {
        s->st.dwarf_no_room++;
        return -ENOSPC;
    }
    make_room(s, f, grown, true, ROOM_COLD_DWARF); /* its growth too: not from DWARF in use */
    make_room(s, f, need, false, ROOM_HOT_FILES);
    /* the sections fit the per-file cap (checked above, and again when its line tables grow:
     * reaccount); building one unit's line table may take up to the whole cache's bound
     * transiently, never more (sym_dwarf.h) */
    int rc = pfr_sym_dwarf_open(fd, s->max_bytes, &b, &f->dwarf, s->err, sizeof(s->err));
    count_refusal(s, b.refused);
    if (rc == 0) {
        f->dwarf_loads++;
        s->st.dwarf_loads++;
    }
    return rc;
}

static bool names_need_fd(const struct pfr_sym_file *f)
{
    return (f->syms.lazy && f->syms.n > 0) || f->gopcln; /* the Go table reads through it */
}

static void ensure_dwarf(pfr_symbolizer *s, struct pfr_sym_file *f, pid_t pid,
                         const struct pfr_sym_maps *maps, const struct pfr_sym_map *m)
{
    if (f->dwarf_state != 0 || (f->dwarf_retry_ns && pfr_clock_mono_ns() < f->dwarf_retry_ns))
        return;
    f->dwarf_state = -1;
    int fd = f->fd;
    if (f->fd >= 0) {
        if (!names_need_fd(f)) {
            f->fd = -1; /* DWARF was all it was kept for */
            s->kept_fds--;
        }
    } else if (f->info.has_debug && m) {
        fd = open_mapped(s, pid, maps, m);
    }
    int rc = -ENODATA;
    if (fd >= 0) {
        rc = open_dwarf(s, f, fd);
        if (rc && f->info.is_go && !f->gopcln) {
            /* DWARF over budget or unreadable: Go's own table still gives lines */
            Elf *e = elf_begin(fd, ELF_C_READ, NULL);
            if (e)
                load_gopcln(s, f, e, fd);
            elf_end(e);
            if (f->gopcln && fd != f->fd) { /* its lookups read through fd: kept */
                make_fd_room(s);            /* f holds none yet: never its own victim */
                f->fd = fd;
                s->kept_fds++;
            }
        }
        if (fd != f->fd)
            close(fd);
    }
    if (rc == -ENODATA || fd < 0) {
        /* no DWARF in the file: a separate debug file installed on the host (-dbgsym) */
        int dfd = open_debug_file(s, f);
        if (dfd >= 0) {
            rc = open_dwarf(s, f, dfd);
            close(dfd);
        }
    }
    if (rc == -ENOSPC)
        backoff_dwarf(f); /* no room now: try again later */
    else if (rc != 0 && rc != -ENODATA)
        s->st.errors++;
    if (f->dwarf)
        f->dwarf_state = 1;
    reaccount(s, f);
}

/* One frame from .gopclntab, shaped like DWARF's. */
static int gopcln_frames(const pfr_symbolizer *s, const struct pfr_sym_file *f, uint64_t vaddr,
                         struct pfr_sym_dwarf_frame *df)
{
    struct pfr_sym_gopcln_frame gf;
    if (!pfr_sym_gopcln_lookup(f->gopcln, vaddr, &gf))
        return 0;
    df[0] = (struct pfr_sym_dwarf_frame){gf.name, s->no_dwarf ? NULL : gf.file,
                                         s->no_dwarf ? 0 : gf.line};
    return 1;
}

/* The name of sym (read from the file on first use); PFR_STR_NONE when the file changed. */
static uint32_t sym_name(pfr_symbolizer *s, struct pfr_sym_file *f,
                         const struct pfr_sym_elf_sym *sym)
{
    uint32_t errors = f->name_errors;
    uint32_t off = pfr_symfile_sym_name(f, sym);
    if (f->name_errors != errors) {
        s->st.name_errors++;
        snprintf(s->err, sizeof(s->err), "%s: symbol names unreadable: the file changed on disk",
                 f->key);
    }
    return off;
}

/* Frames for vaddr from DWARF or .gopclntab, memoized. Returns recs (in the memo or in tmp)
 * and their count. */
static const struct pfr_sym_rec *rich_recs(pfr_symbolizer *s, struct pfr_sym_file *f,
                                           uint64_t vaddr, struct pfr_sym_rec *tmp, size_t *n)
{
    const struct pfr_sym_rec *hit = pfr_symfile_memo_get(f, vaddr, n);
    if (hit)
        return hit;
    struct pfr_sym_dwarf_frame df[PFR_DWARF_MAX_INLINE + 1];
    int nd = f->dwarf ? pfr_sym_dwarf_lookup(f->dwarf, vaddr, df, PFR_DWARF_MAX_INLINE + 1)
                      : gopcln_frames(s, f, vaddr, df);
    s->st.files_refused[PFR_REFUSED_TOO_BIG] += pfr_sym_dwarf_take_refused(f->dwarf);
    const struct pfr_sym_elf_sym *sym = pfr_sym_elf_find(&f->syms, vaddr);
    if (nd <= 0) {
        df[0] = (struct pfr_sym_dwarf_frame){NULL, NULL, 0};
        nd = 1;
    }
    for (int i = 0; i < nd; i++) {
        uint32_t fn = PFR_FILE_UNNAMED;
        if (i == nd - 1 && sym)
            fn = sym_name(s, f, sym); /* the same name as frames without DWARF */
        else if (df[i].name)
            fn = pfr_symfile_intern_name(f, df[i].name);
        uint32_t file =
            df[i].file ? pfr_sym_strpool_intern(&f->syms.names, df[i].file, strlen(df[i].file)) : 0;
        tmp[i] = (struct pfr_sym_rec){fn, file == PFR_STR_NONE ? 0 : file, df[i].line};
    }
    *n = (size_t)nd;
    pfr_symfile_memo_put(f, vaddr, tmp, *n);
    reaccount(s, f);
    return tmp;
}

/* ---- output ---- */

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b && b[1] ? b + 1 : path;
}

static void put(pfr_sym_frame *out, const char *fn, const char *file, int64_t line,
                const char *module, uint64_t offset)
{
    *out = (pfr_sym_frame){fn, file, line, module, offset, false};
}

static int unknown(pfr_symbolizer *s, pfr_sym_frame *out, const char *module, uint64_t offset)
{
    s->st.unresolved_frames++;
    put(out, "[unknown]", "", 0, module, offset);
    return 1;
}

static const char *unnamed_name(pfr_symbolizer *s, const char *module, uint64_t off)
{
    snprintf(s->unnamed, sizeof(s->unnamed), "%s+0x%" PRIx64, base_name(module), off);
    return s->unnamed;
}

static int unnamed(pfr_symbolizer *s, pfr_sym_frame *out, const char *module, uint64_t off)
{
    s->st.unresolved_frames++;
    put(out, unnamed_name(s, module, off), "", 0, module, off);
    return 1;
}

/* Copy recs to out; when they do not fit, keep the innermost ones and the outermost. */
static int emit_recs(pfr_symbolizer *s, const struct pfr_sym_file *f, const struct pfr_sym_rec *r,
                     size_t n, const char *module, uint64_t off, pfr_sym_frame *out, size_t cap)
{
    size_t w = n < cap ? n : cap;
    for (size_t i = 0; i < w; i++) {
        const struct pfr_sym_rec *x = i == w - 1 ? &r[n - 1] : &r[i];
        const char *fn;
        if (x->fn == PFR_FILE_UNNAMED) {
            s->st.unresolved_frames++;
            fn = unnamed_name(s, module, off);
        } else {
            fn = pfr_sym_strpool_get(&f->syms.names, x->fn);
        }
        put(&out[i], fn, pfr_sym_strpool_get(&f->syms.names, x->file), x->line, module, off);
    }
    return (int)w;
}

static struct sym_proc *proc_get(const pfr_symbolizer *s, pid_t pid)
{
    uint64_t v;
    return pfr_sym_hmap_get(&s->procs, (uint64_t)(uint32_t)pid, 0, &v)
               ? (struct sym_proc *)(uintptr_t)v
               : NULL;
}

static void drop_jit(pfr_symbolizer *s, struct sym_proc *p)
{
    if (!p->jit)
        return;
    s->jit_bytes -= pfr_sym_perfmap_bytes(p->jit);
    pfr_sym_perfmap_free(p->jit);
    free(p->jit);
    p->jit = NULL;
    p->jit_read_ns = 0;
    p->jit_refused = false;
}

static void free_proc(pfr_symbolizer *s, struct sym_proc *p)
{
    drop_jit(s, p);
    pfr_sym_maps_free(&p->maps);
    free(p);
}

/* Open (once) and read what was added to p's perf map, at most every JIT_REFRESH_NS. true when
 * it holds more entries than before. The file stays open, so it can still be read after the
 * process is gone. */
static bool jit_update(pfr_symbolizer *s, struct sym_proc *p)
{
    int64_t now = pfr_clock_mono_ns();
    if (s->no_perf_maps || p->jit_refused ||
        (p->jit_read_ns && now - p->jit_read_ns < JIT_REFRESH_NS))
        return false;
    p->jit_read_ns = now;
    if (!p->jit) {
        if (p->gone || !(p->jit = malloc(sizeof(*p->jit))))
            return false;
        pfr_sym_perfmap_init(p->jit);
    }
    struct pfr_sym_perfmap *m = p->jit;
    if (m->fd < 0) {
        int rc = pfr_sym_perfmap_open_guarded(m, s->proc_root, p->pid, s->fsguard, s->jit_err,
                                              sizeof(s->jit_err));
        if (rc == -ESRCH) {
            p->gone = true;
        } else if (rc && rc != -ENOENT) { /* not written yet is worth another look; this not */
            s->st.perf_map_errors++;
            p->jit_refused = true;
        }
        if (rc)
            return false;
        s->st.perf_maps_opened++;
    }
    size_t before = pfr_sym_perfmap_bytes(m), lines = m->lines, bad = m->bad_lines;
    /* a process's map may take a quarter of the cache, all maps together half of it */
    size_t others = s->jit_bytes - before, all = s->max_bytes / 2;
    size_t cap = others < all ? all - others : 0;
    if (cap > s->max_bytes / 4)
        cap = s->max_bytes / 4;
    bool was_full = m->full;
    int rc = pfr_sym_perfmap_update(m, cap, s->jit_err, sizeof(s->jit_err));
    s->jit_bytes = others + pfr_sym_perfmap_bytes(m);
    s->st.perf_map_bad_lines += m->bad_lines - bad;
    if (m->full && !was_full)
        s->st.perf_maps_full++;
    if (rc)
        s->st.perf_map_errors++;
    return m->lines != lines;
}

static int jit_frame(pfr_symbolizer *s, struct sym_proc *p, uint64_t addr, pfr_sym_frame *out)
{
    const struct pfr_perfmap_ent *e = p->jit ? pfr_sym_perfmap_find(p->jit, addr) : NULL;
    if (!e && jit_update(s, p))
        e = pfr_sym_perfmap_find(p->jit, addr);
    const char *name = e ? pfr_sym_perfmap_name(p->jit, e) : NULL;
    if (!name)
        return unknown(s, out, "", addr);
    s->st.jit_frames++;
    put(out, name, "", 0, "[jit]", addr);
    out->transient = true; /* the code there may be freed and the address reused */
    return 1;
}

/* 0, or -ENOMEM (exit mappings will then name fewer files). */
static int remember_path(pfr_symbolizer *s, uint64_t dev, uint64_t ino, const char *path)
{
    if (pfr_sym_hmap_get(&s->file_paths, dev, ino, NULL))
        return 0;
    if (s->file_paths.n >= MAX_FILE_PATHS) { /* forget them all: keeps all bounded */
        pfr_sym_hmap_clear(&s->file_paths);
        pfr_sym_strpool_free(&s->path_pool);
        pfr_sym_hmap_clear(&s->by_ino);
        pfr_sym_hmap_clear(&s->aliases);
        s->paths_gen++;
    }
    uint32_t off = pfr_sym_strpool_add(&s->path_pool, path, strlen(path));
    if (off == PFR_STR_NONE || pfr_sym_hmap_put(&s->file_paths, dev, ino, off) != 0 ||
        pfr_sym_hmap_put(&s->by_ino, ino, 0, dev) != 0)
        return -ENOMEM;
    return 0;
}

/* The device under which snapshots know the file (dev, ino): its overlay's for a layer's file. */
static uint64_t known_dev(const pfr_symbolizer *s, uint64_t dev, uint64_t ino)
{
    uint64_t odev;
    return pfr_sym_hmap_get(&s->aliases, dev, ino, &odev) ? odev : dev;
}

/* Is the file (dev, ino), learned at path, a layer's file whose overlay file snapshots saw? That
 * one has the same inode number on another device, at a path ending in path: a layer's path is
 * walked up to the layer's root, which is the container's root (or its mount point's). */
static bool overlay_twin(const pfr_symbolizer *s, uint64_t dev, uint64_t ino, const char *path,
                         uint64_t *odev)
{
    uint64_t off;
    if (!pfr_sym_hmap_get(&s->by_ino, ino, 0, odev) || *odev == dev ||
        !pfr_sym_hmap_get(&s->file_paths, *odev, ino, &off))
        return false;
    const char *seen = pfr_sym_strpool_get(&s->path_pool, (uint32_t)off);
    size_t n = strlen(seen), k = strlen(path);
    return n >= k && strcmp(seen + n - k, path) == 0;
}

static void remember_paths(pfr_symbolizer *s, const struct pfr_sym_maps *maps)
{
    for (size_t i = 0; i < maps->n; i++) {
        const struct pfr_sym_map *m = &maps->v[i];
        if (m->kind != PFR_MAP_FILE || m->deleted || m->ino == 0)
            continue;
        if (remember_path(s, m->dev, m->ino, pfr_sym_map_path(maps, m)) != 0)
            return;
    }
}

int pfr_symbolizer_learn_path(pfr_symbolizer *s, uint64_t dev, uint64_t ino, const char *path)
{
    if (!s || ino == 0 || !path || path[0] != '/' || strlen(path) >= PATH_MAX)
        return -EINVAL;
    uint64_t odev;
    if (!pfr_sym_hmap_get(&s->file_paths, dev, ino, NULL) &&
        overlay_twin(s, dev, ino, path, &odev)) {
        if (s->aliases.n >= MAX_FILE_PATHS)
            pfr_sym_hmap_clear(&s->aliases);
        return pfr_sym_hmap_put(&s->aliases, dev, ino, odev) ? -ENOMEM : 0;
    }
    return remember_path(s, dev, ino, path);
}

static int read_maps(pfr_symbolizer *s, pid_t pid, struct pfr_sym_maps *out)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%d/maps", s->proc_root, (int)pid);
    int rc = -ENOTTY;
    if (!s->no_maps_query) {
        /* about half the cost of the text for a process starting up, the common case */
        rc = pfr_sym_maps_query(path, out, s->err, sizeof(s->err));
        if (rc == -ENOTTY || rc == -EINVAL)
            s->no_maps_query = true; /* an older kernel, or a fake /proc: the text from now on */
    }
    if (rc == -ENOTTY || rc == -EINVAL)
        rc = pfr_sym_maps_read(path, out, s->err, sizeof(s->err));
    if (rc == 0)
        remember_paths(s, out);
    return rc == -ENOENT ? -ESRCH : rc;
}

/* Is b's first mapping (the executable, or the loader before it) the same file as a's? */
static bool same_program(const struct pfr_sym_maps *a, const struct pfr_sym_maps *b)
{
    if (a->n == 0 || b->n == 0)
        return a->n == b->n;
    const struct pfr_sym_map *x = &a->v[0], *y = pfr_sym_maps_find(b, x->start);
    return y && y->dev == x->dev && y->ino == x->ino;
}

/* An address outside every mapping may come from a library loaded after the snapshot: re-read
 * the maps, rarely, and only keep them if it is still the same program (not an exec or a reused
 * pid, which the caller handles with add_process). The first re-read after a snapshot may come
 * at once: programs load libraries soon after they start (a young process's snapshot is
 * recent), and code beyond its snapshot stays unnamed otherwise until the next drain. */
static bool refresh(pfr_symbolizer *s, struct sym_proc *p)
{
    int64_t now = pfr_clock_mono_ns();
    if (p->gone || p->maps.n == 0 || (p->refreshed && now - p->last_read_ns < REFRESH_NS))
        return false;
    p->last_read_ns = now;
    p->refreshed = true;
    struct pfr_sym_maps fresh = {0};
    int rc = read_maps(s, p->pid, &fresh);
    if (rc) {
        p->gone = rc == -ESRCH;
        return false;
    }
    if (!same_program(&p->maps, &fresh)) {
        pfr_sym_maps_free(&fresh);
        return false;
    }
    pfr_sym_maps_free(&p->maps);
    p->maps = fresh;
    return true;
}

/* ---- public API ---- */

int pfr_symbolizer_new(const pfr_sym_opts *opts, pfr_symbolizer **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return -ENOTSUP;
    pfr_symbolizer *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    const char *root = opts && opts->proc_root ? opts->proc_root : "/proc";
    s->proc_root = strdup(root);
    s->debug_dir = strdup(opts && opts->debug_dir ? opts->debug_dir : DEBUG_DIR);
    if (!s->proc_root || !s->debug_dir) {
        free(s->proc_root);
        free(s->debug_dir);
        free(s);
        return -ENOMEM;
    }
    s->max_bytes = opts && opts->max_cache_bytes ? opts->max_cache_bytes : DEFAULT_CACHE_BYTES;
    s->no_dwarf = opts && opts->no_dwarf;
    s->no_perf_maps = opts && opts->no_perf_maps;
    s->fsguard = opts ? opts->fsguard : NULL;
    s->membudget = opts ? opts->membudget : NULL;
    s->parse_budget_ns =
        opts && opts->parse_budget_ns > 0 ? opts->parse_budget_ns : PFR_SYM_PARSE_NS;
    s->bound = s->max_bytes;
    s->max_dwarf = s->max_bytes / 2;
    s->max_dwarf_file = s->max_bytes / 2;
    s->max_protected = s->max_bytes / 4 * 3;
    struct rlimit rl;
    s->max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                     ? (size_t)rl.rlim_cur / 2
                     : MAX_KEPT_FDS;
    if (s->max_fds < MIN_KEPT_FDS)
        s->max_fds = MIN_KEPT_FDS;
    if (s->max_fds > MAX_KEPT_FDS)
        s->max_fds = MAX_KEPT_FDS;
    *out = s;
    return 0;
}

void pfr_symbolizer_free(pfr_symbolizer *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->procs.cap; i++) {
        if (!s->procs.slots[i].used)
            continue;
        free_proc(s, (struct sym_proc *)(uintptr_t)s->procs.slots[i].val);
    }
    for (int i = 0; i < NSEG; i++)
        while (s->seg[i].head)
            drop_file(s, s->seg[i].head);
    if (s->vdso)
        drop_file(s, s->vdso);
    pfr_sym_hmap_free(&s->procs);
    pfr_sym_hmap_free(&s->devino);
    pfr_sym_hmap_free(&s->neg);
    pfr_sym_hmap_free(&s->putoff);
    pfr_sym_hmap_free(&s->keys);
    pfr_sym_hmap_free(&s->gone);
    pfr_sym_hmap_free(&s->file_paths);
    pfr_sym_hmap_free(&s->by_ino);
    pfr_sym_hmap_free(&s->aliases);
    pfr_sym_strpool_free(&s->path_pool);
    pfr_sym_kallsyms_free(&s->ksyms);
    free(s->proc_root);
    free(s->debug_dir);
    free(s);
}

/* Make *maps (taken over, freed on failure) pid's snapshot; NULL when out of memory. */
static struct sym_proc *set_maps(pfr_symbolizer *s, pid_t pid, struct pfr_sym_maps *maps, bool gone)
{
    struct sym_proc *p = proc_get(s, pid);
    if (p) {
        if (!same_program(&p->maps, maps))
            drop_jit(s, p); /* another program's JIT code */
        pfr_sym_maps_free(&p->maps);
    } else {
        p = calloc(1, sizeof(*p));
        if (!p ||
            pfr_sym_hmap_put(&s->procs, (uint64_t)(uint32_t)pid, 0, (uint64_t)(uintptr_t)p) != 0) {
            free(p);
            pfr_sym_maps_free(maps);
            return NULL;
        }
        p->pid = pid;
        s->st.processes++;
    }
    p->maps = *maps;
    p->gone = gone;
    p->refreshed = false;
    p->last_read_ns = pfr_clock_mono_ns();
    return p;
}

int pfr_symbolizer_add_process(pfr_symbolizer *s, pid_t pid)
{
    if (!s || pid <= 0)
        return -EINVAL;
    struct pfr_sym_maps maps = {0};
    int rc = read_maps(s, pid, &maps);
    if (rc) {
        if (rc != -ESRCH)
            s->st.errors++;
        return rc;
    }
    s->tick++;
    struct sym_proc *p = set_maps(s, pid, &maps, false); /* replaces the old ones after exec */
    if (!p)
        return -ENOMEM;
    /* parse its files now, while /proc/PID/root still leads to them */
    for (size_t i = 0; i < p->maps.n; i++)
        if (p->maps.v[i].kind == PFR_MAP_FILE)
            file_for_map(s, pid, &p->maps, &p->maps.v[i]);
    return 0;
}

static size_t count_files(const struct pfr_sym_maps *maps)
{
    /* mappings are sorted by address and a file's segments are adjacent: count changes */
    const struct pfr_sym_map *last = NULL;
    size_t n = 0;
    for (size_t i = 0; i < maps->n; i++) {
        const struct pfr_sym_map *m = &maps->v[i];
        if (m->kind != PFR_MAP_FILE)
            continue;
        if (!last || m->dev != last->dev || m->ino != last->ino)
            n++;
        last = m;
    }
    return n;
}

/* How many files of v (by address: a file's mappings adjacent) can be named. */
static size_t exit_files(const pfr_symbolizer *s, const pfr_sym_exit_map *v, size_t n)
{
    const pfr_sym_exit_map *last = NULL;
    size_t files = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind != PFR_SYM_EXIT_FILE ||
            (last && v[i].dev == last->dev && v[i].ino == last->ino))
            continue;
        last = &v[i];
        files += pfr_sym_hmap_get(&s->file_paths, known_dev(s, v[i].dev, v[i].ino), v[i].ino, NULL);
    }
    return files;
}

/* The mappings of v that can be named: files by the path other snapshots saw them at. */
static int exit_lines(pfr_symbolizer *s, const pfr_sym_exit_map *v, size_t n,
                      struct pfr_sym_maps *out)
{
    struct pfr_sym_maps_line *lines = calloc(n ? n : 1, sizeof(*lines));
    size_t k = 0;
    if (!lines)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct pfr_sym_maps_line l = {.start = v[i].start,
                                      .end = v[i].end,
                                      .pgoff = v[i].pgoff,
                                      .dev = known_dev(s, v[i].dev, v[i].ino),
                                      .ino = v[i].ino,
                                      .perms = {'r', '-', 'x', 'p'},
                                      .path = "",
                                      .path_len = 0};
        uint64_t off;
        if (v[i].kind == PFR_SYM_EXIT_VDSO) {
            l.path = "[vdso]";
        } else if (v[i].kind == PFR_SYM_EXIT_FILE) {
            if (!pfr_sym_hmap_get(&s->file_paths, l.dev, l.ino, &off))
                continue; /* never seen: no path to name or open it by */
            l.path = pfr_sym_strpool_get(&s->path_pool, (uint32_t)off);
        }
        l.path_len = strlen(l.path);
        lines[k++] = l;
    }
    int rc = pfr_sym_maps_from_lines(lines, k, out, s->err, sizeof(s->err));
    free(lines);
    return rc;
}

int pfr_symbolizer_set_exit_maps(pfr_symbolizer *s, pid_t pid, const pfr_sym_exit_map *v, size_t n)
{
    if (!s || pid <= 0 || (n && !v))
        return -EINVAL;
    /* most exits name no more than the snapshot: known before building anything */
    const struct sym_proc *p = proc_get(s, pid);
    size_t had = p ? count_files(&p->maps) : 0;
    if (exit_files(s, v, n) <= had)
        return 0;
    struct pfr_sym_maps maps = {0};
    int rc = exit_lines(s, v, n, &maps);
    if (rc)
        return rc;
    size_t files = count_files(&maps);
    if (files <= had) {
        pfr_sym_maps_free(&maps);
        return 0;
    }
    /* it exited: nothing to read again */
    return set_maps(s, pid, &maps, true) ? (int)files : -ENOMEM;
}

static bool same_map(const struct pfr_sym_map *a, const struct pfr_sym_map *b)
{
    return a->start == b->start && a->end == b->end && a->pgoff == b->pgoff && a->kind == b->kind &&
           a->dev == b->dev && a->ino == b->ino;
}

/* Does a mapping of add overlap [start, end)? */
static bool overlaps_any(const struct pfr_sym_maps *add, uint64_t start, uint64_t end)
{
    for (size_t i = 0; i < add->n; i++)
        if (add->v[i].start < end && start < add->v[i].end)
            return true;
    return false;
}

/* Mapping e of m as a line of maps, its path without " (deleted)". */
static struct pfr_sym_maps_line map_line(const struct pfr_sym_maps *m, const struct pfr_sym_map *e)
{
    struct pfr_sym_maps_line l = {.start = e->start,
                                  .end = e->end,
                                  .pgoff = e->pgoff,
                                  .dev = e->dev,
                                  .ino = e->ino,
                                  .perms = {'r', '-', 'x', 'p'},
                                  .path = pfr_sym_map_path(m, e)};
    l.path_len = strlen(l.path);
    return l;
}

/* The snapshot old with the mappings of add (both by address), add's replacing the old ones
 * they overlap, into *out. */
static int merge_maps(const struct pfr_sym_maps *old, const struct pfr_sym_maps *add,
                      struct pfr_sym_maps *out, char *err, size_t errlen)
{
    size_t n = 0, a = 0;
    struct pfr_sym_maps_line *lines = calloc(old->n + add->n + 1, sizeof(*lines));
    bool *deleted = calloc(old->n + add->n + 1, sizeof(*deleted));
    int rc = lines && deleted ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i <= old->n; i++) {
        const struct pfr_sym_map *o = i < old->n ? &old->v[i] : NULL;
        for (; a < add->n && (!o || add->v[a].start < o->start); a++, n++) {
            lines[n] = map_line(add, &add->v[a]);
            deleted[n] = add->v[a].deleted;
        }
        if (!o || overlaps_any(add, o->start, o->end))
            continue;
        lines[n] = map_line(old, o);
        deleted[n++] = o->deleted;
    }
    if (rc == 0)
        rc = pfr_sym_maps_from_lines(lines, n, out, err, errlen);
    for (size_t i = 0; rc == 0 && i < n; i++) /* (the paths went without " (deleted)") */
        out->v[i].deleted = deleted[i];
    free(lines);
    free(deleted);
    return rc;
}

int pfr_symbolizer_merge_exit_maps(pfr_symbolizer *s, pid_t pid, const pfr_sym_exit_map *v,
                                   size_t n)
{
    if (!s || pid <= 0 || (n && !v))
        return -EINVAL;
    const struct sym_proc *p = proc_get(s, pid);
    if (!p || p->maps.n == 0)
        return pfr_symbolizer_set_exit_maps(s, pid, v, n);
    struct pfr_sym_maps add = {0};
    int rc = exit_lines(s, v, n, &add);
    if (rc)
        return rc;
    bool news = false;
    for (size_t i = 0; i < add.n && !news; i++) {
        const struct pfr_sym_map *o = pfr_sym_maps_find(&p->maps, add.v[i].start);
        news = !o || !same_map(o, &add.v[i]);
    }
    struct pfr_sym_maps maps = {0};
    if (news)
        rc = merge_maps(&p->maps, &add, &maps, s->err, sizeof(s->err));
    pfr_sym_maps_free(&add);
    if (!news || rc) {
        pfr_sym_maps_free(&maps);
        return rc;
    }
    size_t files = count_files(&maps);
    return set_maps(s, pid, &maps, true) ? (int)(files ? files : 1) : -ENOMEM;
}

size_t pfr_symbolizer_process_files(const pfr_symbolizer *s, pid_t pid)
{
    const struct sym_proc *p = s ? proc_get(s, pid) : NULL;
    if (!p)
        return 0;
    return count_files(&p->maps);
}

size_t pfr_symbolizer_named_files(const pfr_symbolizer *s, pid_t pid, pfr_sym_file_id *out,
                                  size_t max)
{
    const struct sym_proc *p = s ? proc_get(s, pid) : NULL;
    if (!p)
        return 0;
    const struct pfr_sym_map *last = NULL;
    size_t n = 0;
    for (size_t i = 0; i < p->maps.n; i++) {
        const struct pfr_sym_map *m = &p->maps.v[i];
        if (m->kind != PFR_MAP_FILE || (last && m->dev == last->dev && m->ino == last->ino))
            continue;
        last = m;
        if (!pfr_sym_hmap_get(&s->file_paths, m->dev, m->ino, NULL))
            continue;
        if (n < max)
            out[n] = (pfr_sym_file_id){.dev = m->dev, .ino = m->ino};
        n++;
    }
    return n;
}

/* An absolute path into out whole, or -ENOENT (never a cut path). */
static int copy_path(const char *path, char *out, size_t outlen)
{
    size_t len = strlen(path);
    if (path[0] != '/' || len >= outlen)
        return -ENOENT;
    memcpy(out, path, len + 1);
    return 0;
}

uint64_t pfr_symbolizer_paths_generation(const pfr_symbolizer *s)
{
    return s ? s->paths_gen : 0;
}

int pfr_symbolizer_known_path(const pfr_symbolizer *s, uint64_t dev, uint64_t ino, char *out,
                              size_t outlen)
{
    uint64_t off;
    if (!s || !ino || outlen == 0 || !pfr_sym_hmap_get(&s->file_paths, dev, ino, &off))
        return -ENOENT;
    return copy_path(pfr_sym_strpool_get(&s->path_pool, (uint32_t)off), out, outlen);
}

int pfr_symbolizer_file_path(const pfr_symbolizer *s, pid_t pid, uint64_t dev, uint64_t ino,
                             char *out, size_t outlen)
{
    const struct sym_proc *p = s ? proc_get(s, pid) : NULL;
    if (!p || !ino || outlen == 0)
        return -ENOENT;
    for (size_t i = 0; i < p->maps.n; i++) {
        const struct pfr_sym_map *m = &p->maps.v[i];
        if (m->kind != PFR_MAP_FILE || m->ino != ino || m->dev != dev)
            continue;
        return copy_path(pfr_sym_map_path(&p->maps, m), out, outlen);
    }
    return -ENOENT;
}

void pfr_symbolizer_forget_process(pfr_symbolizer *s, pid_t pid)
{
    struct sym_proc *p = s ? proc_get(s, pid) : NULL;
    if (!p)
        return;
    pfr_sym_hmap_del(&s->procs, (uint64_t)(uint32_t)pid, 0);
    free_proc(s, p);
    s->st.processes--;
}

int pfr_symbolize_user(pfr_symbolizer *s, pid_t pid, uint64_t addr, pfr_sym_frame *out, size_t cap)
{
    if (!s || !out || cap == 0)
        return -EINVAL;
    s->tick++;
    struct sym_proc *p = proc_get(s, pid);
    if (!p)
        return unknown(s, out, "", addr);
    const struct pfr_sym_map *m = pfr_sym_maps_find(&p->maps, addr);
    if (!m && refresh(s, p))
        m = pfr_sym_maps_find(&p->maps, addr);
    if (!m)
        return unknown(s, out, "", addr);
    const char *module = pfr_sym_map_path(&p->maps, m);
    uint64_t off = addr - m->start + m->pgoff;
    struct pfr_sym_file *f = NULL;
    if (m->kind == PFR_MAP_FILE)
        f = file_for_map(s, pid, &p->maps, m);
    else if (m->kind == PFR_MAP_VDSO)
        f = vdso_file(s);
    else if (m->kind == PFR_MAP_ANON)
        return jit_frame(s, p, addr, out);
    else
        return unknown(s, out, module, off);
    uint64_t vaddr;
    if (!f && m->kind == PFR_MAP_FILE && s->file_pending) {
        /* its file comes later (a remote copy being made, the memory budget): good for this
         * interval only, so it is named once the file is had */
        int k = unnamed(s, out, module, off);
        out->transient = true;
        return k;
    }
    if (!f || !pfr_sym_elf_off_to_vaddr(&f->info, off, &vaddr))
        return unnamed(s, out, module, off);
    struct pfr_sym_rec tmp[PFR_DWARF_MAX_INLINE + 1];
    size_t n;
    /* frames already worked out need no DWARF: it may have been dropped since */
    const struct pfr_sym_rec *r = pfr_symfile_memo_get(f, vaddr, &n);
    if (r)
        return emit_recs(s, f, r, n, module, off, out, cap);
    if (!s->no_dwarf && m->kind == PFR_MAP_FILE)
        ensure_dwarf(s, f, pid, &p->maps, m);
    if (f->dwarf || f->gopcln) {
        r = rich_recs(s, f, vaddr, tmp, &n);
        return emit_recs(s, f, r, n, module, off, out, cap);
    }
    const struct pfr_sym_elf_sym *sym = pfr_sym_elf_find(&f->syms, vaddr);
    if (!sym)
        return unnamed(s, out, module, off);
    size_t named = f->named.n;
    uint32_t name = sym_name(s, f, sym);
    if (f->named.n != named)
        reaccount(s, f); /* a name read in: f grew */
    if (name == PFR_STR_NONE)
        return unnamed(s, out, module, off);
    put(out, pfr_sym_strpool_get(&f->syms.names, name), "", 0, module, off);
    return 1;
}

int pfr_symbolize_user_mapping(pfr_symbolizer *s, pid_t pid, uint64_t addr, pfr_sym_frame *out)
{
    if (!s || !out)
        return -EINVAL;
    struct sym_proc *p = proc_get(s, pid);
    const struct pfr_sym_map *m = p ? pfr_sym_maps_find(&p->maps, addr) : NULL;
    if (!m || (m->kind != PFR_MAP_FILE && m->kind != PFR_MAP_VDSO))
        return 0;
    const char *module = pfr_sym_map_path(&p->maps, m);
    uint64_t off = addr - m->start + m->pgoff;
    put(out, unnamed_name(s, module, off), "", 0, module, off);
    return 1;
}

int pfr_symbolizer_frame_key(pfr_symbolizer *s, pid_t pid, uint64_t addr, uint64_t *space,
                             uint64_t *off, const char **module)
{
    if (!s || !space || !off || !module)
        return -EINVAL;
    struct sym_proc *p = proc_get(s, pid);
    const struct pfr_sym_map *m = p ? pfr_sym_maps_find(&p->maps, addr) : NULL;
    if (!m)
        return 0;
    struct pfr_sym_file *f = NULL;
    uint64_t v;
    if (m->kind == PFR_MAP_FILE && pfr_sym_hmap_get(&s->devino, m->dev, m->ino, &v))
        f = (struct pfr_sym_file *)(uintptr_t)v;
    else if (m->kind == PFR_MAP_VDSO && s->vdso_state == 1)
        f = s->vdso;
    if (!f)
        return 0;
    /* used as a symbolization would use it, so that the cache keeps the files in use */
    s->tick++;
    touch(s, f);
    /* a file's frames gain file:line once its DWARF (or Go table) is read: another space from
     * each load on (frames worked out before stay in the memo when the DWARF is dropped) */
    *space = f->uid << 16 | (uint64_t)(f->dwarf_loads & 0x7fff) << 1 | (f->gopcln != NULL);
    *off = addr - m->start + m->pgoff;
    *module = pfr_sym_map_path(&p->maps, m);
    return 1;
}

static int load_kernel(pfr_symbolizer *s)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/kallsyms", s->proc_root);
    pfr_sym_kallsyms_free(&s->ksyms);
    int rc = pfr_sym_kallsyms_read(path, &s->ksyms, s->err, sizeof(s->err));
    s->ksyms_state = rc ? -1 : 1;
    if (rc)
        s->st.errors++;
    return rc;
}

int pfr_symbolize_kernel(pfr_symbolizer *s, uint64_t addr, pfr_sym_frame *out)
{
    if (!s || !out)
        return -EINVAL;
    if (s->ksyms_state == 0)
        load_kernel(s);
    const struct pfr_sym_ksym *k =
        s->ksyms_state == 1 ? pfr_sym_kallsyms_find(&s->ksyms, addr) : NULL;
    if (!k)
        return unknown(s, out, "[kernel]", addr);
    put(out, pfr_sym_strpool_get(&s->ksyms.names, k->name), "", 0,
        k->module ? pfr_sym_strpool_get(&s->ksyms.names, k->module) : "[kernel]", addr);
    return 1;
}

void pfr_symbolizer_stats(const pfr_symbolizer *s, pfr_sym_stats *st)
{
    if (!s || !st)
        return;
    *st = s->st;
    st->cache_bytes = s->cache_bytes;
    st->bound_bytes = s->bound;
    st->dwarf_bytes = s->dwarf_bytes;
    st->protected_bytes = s->seg[SEG_PROTECTED].bytes;
    st->files_cached = s->nfiles;
    st->open_files = s->kept_fds;
}

int pfr_symbolizer_reload_kernel(pfr_symbolizer *s)
{
    if (!s)
        return -EINVAL;
    return load_kernel(s);
}

size_t pfr_symbolizer_memory(const pfr_symbolizer *s)
{
    if (!s)
        return 0;
    size_t b = sizeof(*s) + s->cache_bytes + pfr_sym_kallsyms_bytes(&s->ksyms) +
               pfr_sym_hmap_bytes(&s->procs) + pfr_sym_hmap_bytes(&s->devino) +
               pfr_sym_hmap_bytes(&s->neg) + pfr_sym_hmap_bytes(&s->putoff) +
               pfr_sym_hmap_bytes(&s->keys) + pfr_sym_hmap_bytes(&s->gone) +
               pfr_sym_hmap_bytes(&s->file_paths) + pfr_sym_hmap_bytes(&s->by_ino) +
               pfr_sym_hmap_bytes(&s->aliases) + pfr_sym_strpool_bytes(&s->path_pool) +
               s->jit_bytes;
    for (size_t i = 0; i < s->procs.cap; i++)
        if (s->procs.slots[i].used)
            b += sizeof(struct sym_proc) +
                 pfr_sym_maps_bytes(&((struct sym_proc *)(uintptr_t)s->procs.slots[i].val)->maps);
    return b;
}

const char *pfr_symbolizer_last_error(const pfr_symbolizer *s)
{
    return s ? s->err : "";
}

const char *pfr_symbolizer_perf_map_error(const pfr_symbolizer *s)
{
    return s ? s->jit_err : "";
}
