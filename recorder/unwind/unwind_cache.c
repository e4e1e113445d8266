/* unwind_cache: unwind tables kept on disk (see unwind_cache.h). */
#include "unwind_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <gelf.h>
#include <lz4.h>

#include "pfr_clock.h"
#include "pfr_disk_keep.h"
#include "pfr_hash.h"
#include "pfr_membudget.h"
#include "pfr_vec.h"
#include "sym_elf.h"

/* The file format: raise it whenever the layout below changes. */
#define FORMAT   1u
#define MAGIC    "PFRUWT\r\n"
#define SUFFIX   ".uwt"
#define TMP      ".tmp-"
#define MIN_DIR  (1u << 20)
#define CHUNK_RB (PFR_UNWIND_CACHE_CHUNK_ROWS * sizeof(struct pfr_unwind_row))
/* The fuzz target builds with 0, so that its mutations get past the hashes to the chunks and
 * the rows' checks. */
#ifndef CHECK_HASHES
#define CHECK_HASHES 1
#endif

/* The header, as written (native byte order: a cache belongs to one host). The key's part is
 * [format, key_end): the file's name is its hash. */
struct hdr {
    char magic[8];
    uint32_t format;
    uint32_t rows_version;
    uint32_t flags;
    uint32_t id_len;
    uint8_t id[PFR_UNWIND_CACHE_MAX_ID];
    uint64_t dev, ino, size;
    int64_t mtime_ns;
    /* key_end */
    uint64_t base, delta;
    uint32_t nrows;
    uint32_t chunk_rows;
    uint64_t payload;   /* bytes after the header: per chunk, its length (4 bytes) and its LZ4 */
    uint64_t rows_hash; /* pfr_hash_bytes() of the rows */
    uint64_t hdr_hash;  /* pfr_hash_bytes() of the header before this field */
};
_Static_assert(sizeof(struct hdr) == 168, "the header's layout is the file's");
#define KEY_START offsetof(struct hdr, format)
#define KEY_END   offsetof(struct hdr, base)

struct entry {
    uint64_t name;
    uint64_t bytes;
    int64_t used_ns; /* its mtime: written or last read (CLOCK_REALTIME) */
};

struct pfr_unwind_cache {
    int dfd;
    uint64_t max_bytes;
    struct pfr_membudget *membudget;
    pfr_disk_keep keep; /* the free space left to the ring (pfr_disk_keep.h) */
    struct entry *v;    /* the directory's table files */
    size_t n, cap;
    pfr_unwind_cache_stats st;
    char err[256];
};

/* ---- the file layer ---- */

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -EIO : -EBADMSG; /* (a file shorter than it says: torn) */
        done += (size_t)n;
    }
    return 0;
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (size_t)n;
    }
    return 0;
}

/* The key's fields into a header (zeroed first, so that its hash covers no stray bytes). */
static void key_to_hdr(const pfr_unwind_cache_key *k, struct hdr *h)
{
    memset(h, 0, sizeof(*h));
    memcpy(h->magic, MAGIC, sizeof(h->magic));
    h->format = FORMAT;
    h->rows_version = PFR_UNWIND_ROWS_VERSION;
    h->flags = k->flags;
    h->id_len = k->id_len <= PFR_UNWIND_CACHE_MAX_ID ? k->id_len : PFR_UNWIND_CACHE_MAX_ID;
    memcpy(h->id, k->id, h->id_len);
    h->dev = h->id_len ? 0 : k->dev;
    h->ino = h->id_len ? 0 : k->ino;
    h->size = k->size;
    h->mtime_ns = k->mtime_ns;
}

static void hdr_to_key(const struct hdr *h, pfr_unwind_cache_key *k)
{
    memset(k, 0, sizeof(*k));
    k->id_len = h->id_len;
    memcpy(k->id, h->id, h->id_len);
    k->dev = h->dev;
    k->ino = h->ino;
    k->size = h->size;
    k->mtime_ns = h->mtime_ns;
    k->flags = h->flags;
}

static uint64_t key_name(const pfr_unwind_cache_key *k)
{
    struct hdr h;
    key_to_hdr(k, &h);
    return pfr_hash_bytes((const char *)&h + KEY_START, KEY_END - KEY_START);
}

static uint64_t hdr_hash(const struct hdr *h)
{
    return pfr_hash_bytes(h, offsetof(struct hdr, hdr_hash));
}

/* The header of the file open at fd, checked but for its key. 0; -EBADMSG not a table file (or
 * a torn one); -ENOENT another format or builder; -EIO. */
static int read_hdr(int fd, struct hdr *h)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -EIO;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < sizeof(*h))
        return -EBADMSG;
    int rc = pread_full(fd, h, sizeof(*h), 0);
    if (rc)
        return rc;
    if (memcmp(h->magic, MAGIC, sizeof(h->magic)) != 0 ||
        (CHECK_HASHES && h->hdr_hash != hdr_hash(h)))
        return -EBADMSG;
    if (h->format != FORMAT || h->rows_version != PFR_UNWIND_ROWS_VERSION)
        return -ENOENT;
    if (h->id_len > PFR_UNWIND_CACHE_MAX_ID || h->nrows < 2 ||
        h->chunk_rows != PFR_UNWIND_CACHE_CHUNK_ROWS ||
        h->payload != (uint64_t)st.st_size - sizeof(*h))
        return -EBADMSG;
    return 0;
}

static bool key_equal(const struct hdr *h, const pfr_unwind_cache_key *k)
{
    struct hdr want;
    key_to_hdr(k, &want);
    return memcmp((const char *)h + KEY_START, (const char *)&want + KEY_START,
                  KEY_END - KEY_START) == 0;
}

/* One chunk's rows from its planes (pc deltas, then rules), checked as a table's rows are: pcs
 * rising from 0, known rule kinds, neighbours' rules different. *pc: the last row's pc. */
static int unplane(const uint32_t *plane, uint32_t cnt, bool first, struct pfr_unwind_row *rows,
                   uint32_t *pc)
{
    const uint32_t *delta = plane, *rule = plane + cnt;
    for (uint32_t i = 0; i < cnt; i++) {
        bool head = first && i == 0;
        if (head ? delta[i] != 0 : delta[i] == 0 || delta[i] > UINT32_MAX - *pc)
            return -EBADMSG;
        if (PFR_UW_RULE_KIND(rule[i]) >= PFR_UW_KINDS || (!head && rule[i] == rows[-1].rule))
            return -EBADMSG;
        *pc = head ? 0 : *pc + delta[i];
        *rows++ = (struct pfr_unwind_row){.pc = *pc, .rule = rule[i]};
    }
    return 0;
}

/* Bytes of one chunk's buffers for a table of nrows rows: its rows' planes, and their LZ4. */
static size_t chunk_bytes(uint32_t nrows)
{
    return nrows < PFR_UNWIND_CACHE_CHUNK_ROWS ? nrows * sizeof(struct pfr_unwind_row) : CHUNK_RB;
}

/* What reading a table back holds at its peak: its rows and one chunk's buffers. */
static uint64_t read_cost(uint32_t nrows)
{
    size_t chunk = chunk_bytes(nrows);
    return (uint64_t)nrows * sizeof(struct pfr_unwind_row) + chunk +
           (uint64_t)LZ4_compressBound((int)chunk);
}

/* The rows of the file whose header h was read: into out, every chunk checked. */
static int read_rows(int fd, const struct hdr *h, pfr_unwind_table *out)
{
    memset(out, 0, sizeof(*out));
    size_t zcap = (size_t)LZ4_compressBound((int)chunk_bytes(h->nrows));
    struct pfr_unwind_row *rows = malloc((size_t)h->nrows * sizeof(*rows));
    char *z = malloc(zcap);
    uint32_t *plane = malloc(chunk_bytes(h->nrows));
    int rc = rows && z && plane ? 0 : -ENOMEM;
    uint64_t off = sizeof(*h), end = sizeof(*h) + h->payload;
    uint32_t pc = 0;
    for (uint32_t done = 0; rc == 0 && done < h->nrows;) {
        uint32_t cnt = h->nrows - done < h->chunk_rows ? h->nrows - done : h->chunk_rows;
        uint32_t zlen = 0;
        rc = end - off >= 4 ? pread_full(fd, &zlen, 4, off) : -EBADMSG;
        off += 4;
        if (rc == 0 && (zlen == 0 || zlen > zcap || zlen > end - off))
            rc = -EBADMSG;
        if (rc == 0)
            rc = pread_full(fd, z, zlen, off);
        off += zlen;
        int raw = (int)(cnt * sizeof(*rows));
        if (rc == 0 && LZ4_decompress_safe(z, (char *)plane, (int)zlen, raw) != raw)
            rc = -EBADMSG;
        if (rc == 0)
            rc = unplane(plane, cnt, done == 0, rows + done, &pc);
        done += cnt;
    }
    if (rc == 0 &&
        (off != end || PFR_UW_RULE_KIND(rows[h->nrows - 1].rule) != PFR_UW_NONE ||
         (CHECK_HASHES && pfr_hash_bytes(rows, (size_t)h->nrows * sizeof(*rows)) != h->rows_hash)))
        rc = -EBADMSG;
    free(z);
    free(plane);
    if (rc) {
        free(rows);
        return rc;
    }
    out->rows = rows;
    out->nrows = h->nrows;
    out->base = h->base;
    out->delta = h->delta;
    return 0;
}

int pfr_unwind_cache_read_fd(int fd, const pfr_unwind_cache_key *key, size_t max_rows,
                             pfr_unwind_table *out, pfr_unwind_cache_key *key_out)
{
    memset(out, 0, sizeof(*out));
    struct hdr h;
    int rc = read_hdr(fd, &h);
    if (rc)
        return rc;
    if (key_out)
        hdr_to_key(&h, key_out);
    if (key && !key_equal(&h, key))
        return -ENOENT;
    if (h.nrows > max_rows)
        return -E2BIG;
    return read_rows(fd, &h, out);
}

int pfr_unwind_cache_write_fd(int fd, const pfr_unwind_cache_key *key, const pfr_unwind_table *t)
{
    if (t->nrows < 2 || t->nrows > UINT32_MAX)
        return -EINVAL;
    struct hdr h;
    key_to_hdr(key, &h);
    h.base = t->base;
    h.delta = t->delta;
    h.nrows = (uint32_t)t->nrows;
    h.chunk_rows = PFR_UNWIND_CACHE_CHUNK_ROWS;
    int zcap = LZ4_compressBound((int)CHUNK_RB);
    char *z = malloc(4 + (size_t)zcap);
    uint32_t *plane = malloc(CHUNK_RB);
    int rc = z && plane ? 0 : -ENOMEM;
    uint64_t off = sizeof(h);
    for (size_t done = 0; rc == 0 && done < t->nrows;) {
        uint32_t cnt =
            (uint32_t)(t->nrows - done < PFR_UNWIND_CACHE_CHUNK_ROWS ? t->nrows - done
                                                                     : PFR_UNWIND_CACHE_CHUNK_ROWS);
        for (uint32_t i = 0; i < cnt; i++) {
            const struct pfr_unwind_row *r = &t->rows[done + i];
            plane[i] = done + i == 0 ? r->pc : r->pc - r[-1].pc;
            plane[cnt + i] = r->rule;
        }
        int zlen =
            LZ4_compress_default((const char *)plane, z + 4, (int)(cnt * sizeof(*t->rows)), zcap);
        if (zlen <= 0) {
            rc = -EIO;
            break;
        }
        uint32_t len = (uint32_t)zlen;
        memcpy(z, &len, 4);
        rc = pwrite_full(fd, z, 4 + len, off);
        off += 4 + len;
        done += cnt;
    }
    free(z);
    free(plane);
    if (rc)
        return rc;
    h.payload = off - sizeof(h);
    h.rows_hash = pfr_hash_bytes(t->rows, t->nrows * sizeof(*t->rows));
    h.hdr_hash = hdr_hash(&h);
    return pwrite_full(fd, &h, sizeof(h), 0);
}

/* ---- the key ---- */

/* The GNU build-id of the ELF file open at fd, within the symbolizer's limits; 0 bytes if none. */
static uint32_t build_id(int fd, uint8_t *id)
{
    char err[128];
    struct pfr_sym_budget b = {0};
    if (elf_version(EV_CURRENT) == EV_NONE || pfr_sym_elf_precheck(fd, &b, err, sizeof(err)) != 0)
        return 0;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    if (!e)
        return 0;
    struct pfr_sym_elf_info info;
    uint32_t n = 0;
    if (pfr_sym_elf_read_info(e, &info, err, sizeof(err)) == 0 && info.id_kind == PFR_ELF_ID_GNU &&
        info.id_len > 0 && info.id_len <= PFR_UNWIND_CACHE_MAX_ID) {
        n = (uint32_t)info.id_len;
        memcpy(id, info.id, n);
    }
    elf_end(e);
    return n;
}

int pfr_unwind_cache_key_fd(int fd, unsigned flags, pfr_unwind_cache_key *out)
{
    memset(out, 0, sizeof(*out));
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -ENOEXEC;
    out->size = (uint64_t)st.st_size;
    out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    out->flags = flags;
    out->id_len = build_id(fd, out->id);
    if (out->id_len == 0) {
        out->dev = (uint64_t)st.st_dev;
        out->ino = (uint64_t)st.st_ino;
    }
    return 0;
}

/* ---- the directory ---- */

static void file_name(uint64_t name, char *buf, size_t len)
{
    snprintf(buf, len, "%016" PRIx64 SUFFIX, name);
}

/* name of a table file ("<16 hex digits>.uwt"), else false */
static bool parse_name(const char *s, uint64_t *name)
{
    if (strlen(s) != 16 + strlen(SUFFIX) || strcmp(s + 16, SUFFIX) != 0)
        return false;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *name = v;
    return true;
}

static ssize_t find(const pfr_unwind_cache *c, uint64_t name)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].name == name)
            return (ssize_t)i;
    return -1;
}

static void forget(pfr_unwind_cache *c, size_t i)
{
    c->st.bytes -= c->v[i].bytes;
    c->v[i] = c->v[--c->n];
}

static void remove_file(pfr_unwind_cache *c, uint64_t name)
{
    char fn[32];
    file_name(name, fn, sizeof(fn));
    unlinkat(c->dfd, fn, 0);
    ssize_t i = find(c, name);
    if (i >= 0)
        forget(c, (size_t)i);
}

static int remember(pfr_unwind_cache *c, uint64_t name, uint64_t bytes, int64_t used_ns)
{
    ssize_t i = find(c, name);
    if (i >= 0)
        forget(c, (size_t)i);
    if (PFR_VEC_RESERVE(c->v, c->cap, c->n + 1))
        return -ENOMEM;
    c->v[c->n++] = (struct entry){name, bytes, used_ns};
    c->st.bytes += bytes;
    return 0;
}

static void remove_lru(pfr_unwind_cache *c)
{
    size_t lru = 0;
    for (size_t i = 1; i < c->n; i++)
        if (c->v[i].used_ns < c->v[lru].used_ns)
            lru = i;
    remove_file(c, c->v[lru].name);
    c->st.evictions++;
}

/* Remove the least recently used files until room more bytes fit in the bound. */
static void make_room(pfr_unwind_cache *c, uint64_t room)
{
    while (c->n > 0 && c->st.bytes + room > c->max_bytes)
        remove_lru(c);
}

/* The most a table of nrows rows takes on disk: its header and each chunk's LZ4 at its bound. */
static uint64_t write_bound(size_t nrows)
{
    uint64_t b = sizeof(struct hdr);
    for (size_t done = 0; done < nrows; done += PFR_UNWIND_CACHE_CHUNK_ROWS) {
        size_t cnt =
            nrows - done < PFR_UNWIND_CACHE_CHUNK_ROWS ? nrows - done : PFR_UNWIND_CACHE_CHUNK_ROWS;
        b += 4 + (uint64_t)LZ4_compressBound((int)(cnt * sizeof(struct pfr_unwind_row)));
    }
    return b;
}

/* Whether the file system has room for bytes more and still leaves the ring what keep says:
 * the least recently used files removed first (the cache gives up room before the ring does).
 * The bound, not the size, so that not even the temporary file takes the ring's room. */
static bool disk_room(pfr_unwind_cache *c, uint64_t bytes)
{
    while (pfr_disk_keep_fits(&c->keep, c->dfd, bytes, NULL) != 0) {
        if (c->n == 0)
            return false;
        remove_lru(c);
        c->st.room_evictions++;
    }
    return true;
}

/* The directory's table files into the index; files of writes cut short removed. */
static int scan(pfr_unwind_cache *c)
{
    int fd = dup(c->dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -errno;
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        uint64_t name;
        struct stat st;
        if (strncmp(e->d_name, TMP, strlen(TMP)) == 0)
            unlinkat(c->dfd, e->d_name, 0);
        else if (parse_name(e->d_name, &name) &&
                 fstatat(c->dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            rc = remember(c, name, (uint64_t)st.st_size,
                          (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
    }
    closedir(d);
    return rc;
}

/* mkdir -p, each new folder 0700. */
static int make_dirs(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    for (char *s = p + 1;; s++) {
        bool last = *s == '\0';
        if (*s != '/' && !last)
            continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return -errno;
        if (last)
            return 0;
        *s = '/';
    }
}

int pfr_unwind_cache_open(const char *dir, uint64_t max_bytes, struct pfr_membudget *membudget,
                          const pfr_disk_keep *keep, pfr_unwind_cache **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    if (!dir || !dir[0]) {
        snprintf(err, errlen, "unwind cache: no directory");
        return -EINVAL;
    }
    pfr_unwind_cache *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "unwind cache: out of memory");
        return -ENOMEM;
    }
    c->max_bytes = max_bytes < MIN_DIR ? MIN_DIR : max_bytes;
    c->st.max_bytes = c->max_bytes;
    c->membudget = membudget;
    if (keep)
        c->keep = *keep;
    int rc = make_dirs(dir);
    c->dfd = rc ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rc == 0 && c->dfd < 0)
        rc = -errno;
    struct stat st;
    if (rc == 0 && fstat(c->dfd, &st) != 0)
        rc = -errno;
    if (rc) {
        snprintf(err, errlen, "unwind cache: cannot open %s: %s", dir, strerror(-rc));
    } else if (st.st_uid != geteuid() || (st.st_mode & 022)) {
        /* its files become the sampler's rows: only ours may write them */
        rc = -EPERM;
        snprintf(err, errlen,
                 "unwind cache: %s is not the recorder's own (owned by uid %u, mode %04o): not "
                 "used",
                 dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    } else if ((rc = scan(c)) != 0) {
        snprintf(err, errlen, "unwind cache: cannot list %s: %s", dir, strerror(-rc));
    }
    if (rc) {
        pfr_unwind_cache_close(c);
        return rc;
    }
    make_room(c, 0);
    *out = c;
    return 0;
}

void pfr_unwind_cache_close(pfr_unwind_cache *c)
{
    if (!c)
        return;
    if (c->dfd >= 0)
        close(c->dfd);
    free(c->v);
    free(c);
}

int pfr_unwind_cache_get(pfr_unwind_cache *c, const pfr_unwind_cache_key *key, size_t max_rows,
                         pfr_unwind_table *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t name = key_name(key);
    char fn[32];
    file_name(name, fn, sizeof(fn));
    int fd = openat(c->dfd, fn, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        c->st.misses++;
        return -ENOENT;
    }
    struct hdr h;
    int rc = read_hdr(fd, &h);
    if (rc == 0 && (!key_equal(&h, key) || h.nrows > max_rows))
        rc = -ENOENT; /* another key of the same hash, or too large for the sampler's map now */
    /* the rows and one chunk's buffers, held only until the caller hands the rows to the
     * kernel's map: a brief cost, paid near the budget too while it stays clear of it (else a
     * library's table evicted while the recorder is near its budget, libpython's 58,717 rows
     * read back in 1.4 MB, was refused for the rest of the run and its stacks walked by frame
     * pointers, cut after their first frame) */
    if (rc == 0 && !pfr_membudget_allow_brief(c->membudget, PFR_MEM_UNWIND, read_cost(h.nrows)))
        rc = -ENOBUFS;
    if (rc == 0)
        rc = read_rows(fd, &h, out);
    if (rc == 0 && futimens(fd, NULL) == 0) { /* its place in the LRU order, past restarts */
        ssize_t i = find(c, name);
        if (i >= 0)
            c->v[i].used_ns = pfr_clock_real_ns();
    }
    close(fd);
    if (rc == 0)
        c->st.hits++;
    else if (rc == -ENOENT)
        c->st.misses++;
    else if (rc == -ENOBUFS)
        c->st.no_memory++;
    else if (rc == -EBADMSG || rc == -EIO) {
        c->st.bad_files++;
        remove_file(c, name);
        rc = -EBADMSG;
    }
    return rc;
}

int pfr_unwind_cache_put(pfr_unwind_cache *c, const pfr_unwind_cache_key *key,
                         const pfr_unwind_table *t)
{
    if (!disk_room(c, write_bound(t->nrows))) {
        c->st.no_room++;
        snprintf(c->err, sizeof(c->err),
                 "unwind cache: a table of %zu rows not written: its file system's free space is "
                 "left to the ring",
                 t->nrows);
        return -EDQUOT;
    }
    uint64_t name = key_name(key);
    char fn[32], tmp[64];
    file_name(name, fn, sizeof(fn));
    snprintf(tmp, sizeof(tmp), TMP "%s.%ld", fn, (long)getpid());
    unlinkat(c->dfd, tmp, 0); /* (a write of ours cut short) */
    int fd = openat(c->dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : pfr_unwind_cache_write_fd(fd, key, t);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) != 0)
        rc = -errno;
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    uint64_t bytes = rc == 0 ? (uint64_t)st.st_size : 0;
    if (rc == 0 && bytes > c->max_bytes)
        rc = -EFBIG;
    if (rc == 0) {
        ssize_t old = find(c, name);
        if (old >= 0)
            forget(c, (size_t)old);
        make_room(c, bytes);
        if (renameat(c->dfd, tmp, c->dfd, fn) != 0)
            rc = -errno;
    }
    if (rc == 0 && (rc = remember(c, name, bytes, pfr_clock_real_ns())) != 0)
        unlinkat(c->dfd, fn, 0); /* a file out of the index would escape the bound */
    if (rc == 0) {
        c->st.writes++;
        return 0;
    }
    unlinkat(c->dfd, tmp, 0);
    if (rc != -EFBIG) {
        c->st.write_errors++;
        snprintf(c->err, sizeof(c->err), "unwind cache: cannot write a table of %zu rows: %s",
                 t->nrows, strerror(-rc));
    }
    return rc;
}

void pfr_unwind_cache_stats_get(const pfr_unwind_cache *c, pfr_unwind_cache_stats *out)
{
    *out = c->st;
    out->files = c->n;
}

const char *pfr_unwind_cache_last_error(const pfr_unwind_cache *c)
{
    return c->err;
}
