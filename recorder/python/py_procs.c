/* CPython processes: finding their interpreter, naming their frames (pfr_python.h). */
#include "pfr_python.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goheap_mem.h"
#include "pfr_map.h"
#include "py_elf.h"
#include "py_layout.h"
#include "py_lines.h"
#include "sym_maps.h"

#define MAX_STR       1024       /* characters of a name or file kept */
#define MAX_LINETABLE (64 << 10) /* bytes of a line table read */
#define MAX_CODES     16384      /* code objects cached per process */
#define MAX_PENDING   64         /* processes whose interpreter file is being copied */
#define UNREADABLE    "[python: unreadable]"

/* A code object as read. */
typedef struct code_entry {
    char *qualname, *filename;
    uint8_t *linetable;
    size_t linetable_len;
    int64_t firstlineno;
    uint64_t units; /* code units (Py_SIZE of a 3.11+ code object; 3.8-3.10: co_code's / 2) */
} code_entry;

typedef struct py_proc {
    pid_t pid;
    const pfr_py_layout *lay;                 /* a row of the table, or own */
    pfr_py_layout own;                        /* read from the process (3.13's _Py_DebugOffsets) */
    uint64_t code_type, str_type, bytes_type; /* the interpreter's type objects */
    pfr_goheap_procmem pm;
    pfr_goheap_mem mem;
    pfr_map codes; /* code object address -> index in v + 1 */
    code_entry *v;
    size_t n, cap;
    size_t bytes;
} py_proc;

struct pfr_py {
    char proc_root[64];
    size_t max_bytes;
    pfr_map procs; /* pid -> py_proc * */
    pfr_py_elf *elf;
    pid_t pending[MAX_PENDING]; /* processes whose interpreter file the guard is copying */
    size_t npending;
    pfr_py_stats st;
    char line_buf[32];
};

/* ---- names ---- */

static bool version_digits(const char **p, unsigned *v)
{
    if (!isdigit((unsigned char)**p))
        return false;
    unsigned x = 0;
    while (isdigit((unsigned char)**p) && x < 1000)
        x = x * 10 + (unsigned)(*(*p)++ - '0');
    *v = x;
    return x < 1000;
}

int pfr_py_version_from_name(const char *path, unsigned *major, unsigned *minor)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    bool lib = !strncmp(base, "libpython", 9);
    const char *p = lib ? base + 9 : base;
    if (!lib) {
        if (strncmp(p, "python", 6))
            return -ENOENT;
        p += 6;
    }
    if (!version_digits(&p, major) || *p++ != '.' || !version_digits(&p, minor))
        return -ENOENT;
    while (*p == 'd' || *p == 'm' || *p == 'u' || *p == 't') /* ABI flags */
        p++;
    if (lib ? strncmp(p, ".so", 3) != 0 : *p != '\0')
        return -ENOENT;
    return *major == 3 ? 0 : -ENOENT;
}

/* ---- processes ---- */

static void entry_free(code_entry *c)
{
    free(c->qualname);
    free(c->filename);
    free(c->linetable);
}

static void proc_clear_codes(pfr_py *py, py_proc *p)
{
    for (size_t i = 0; i < p->n; i++)
        entry_free(&p->v[i]);
    p->n = 0;
    pfr_map_clear(&p->codes);
    py->st.cache_bytes -= p->bytes;
    p->bytes = 0;
}

static void proc_free(pfr_py *py, py_proc *p)
{
    proc_clear_codes(py, p);
    free(p->v);
    pfr_map_free(&p->codes);
    pfr_goheap_procmem_close(&p->pm);
    free(p);
}

int pfr_py_new(const char *proc_root, size_t max_bytes, pfr_py **out)
{
    pfr_py *py = calloc(1, sizeof(*py));
    if (!py)
        return -ENOMEM;
    snprintf(py->proc_root, sizeof(py->proc_root), "%s", proc_root ? proc_root : "/proc");
    py->max_bytes = max_bytes;
    if (pfr_py_elf_new(py->proc_root, &py->elf)) {
        free(py);
        return -ENOMEM;
    }
    *out = py;
    return 0;
}

void pfr_py_free(pfr_py *py)
{
    if (!py)
        return;
    size_t pos = 0;
    uint64_t k, v;
    while (pfr_map_next(&py->procs, &pos, &k, &v))
        proc_free(py, (py_proc *)(uintptr_t)v);
    pfr_map_free(&py->procs);
    pfr_py_elf_free(py->elf);
    free(py);
}

bool pfr_py_known(const pfr_py *py, pid_t pid)
{
    return pfr_map_get(&py->procs, (uint64_t)pid) != NULL;
}

void pfr_py_forget(pfr_py *py, pid_t pid)
{
    uint64_t *v = pfr_map_get(&py->procs, (uint64_t)pid);
    if (!v)
        return;
    proc_free(py, (py_proc *)(uintptr_t)*v);
    pfr_map_del(&py->procs, (uint64_t)pid);
    py->st.processes--;
}

void pfr_py_stats_get(const pfr_py *py, pfr_py_stats *out)
{
    *out = py->st;
    pfr_py_elf_stats es;
    pfr_py_elf_stats_get(py->elf, &es);
    out->files_read = es.files_read;
    out->file_cache_hits = es.cache_hits;
    out->file_copies = es.remote_copies;
    out->files_refused = es.refused;
}

void pfr_py_set_fsguard(pfr_py *py, struct pfr_fsguard *guard)
{
    pfr_py_elf_set_guard(py->elf, guard);
}

static void pending_add(pfr_py *py, pid_t pid)
{
    for (size_t i = 0; i < py->npending; i++)
        if (py->pending[i] == pid)
            return;
    if (py->npending < MAX_PENDING)
        py->pending[py->npending++] = pid;
}

size_t pfr_py_take_pending(pfr_py *py, pid_t *out, size_t max)
{
    size_t n = py->npending < max ? py->npending : max;
    memcpy(out, py->pending, n * sizeof(*out));
    memmove(py->pending, py->pending + n, (py->npending - n) * sizeof(*out));
    py->npending -= n;
    return n;
}

static int read_maps(const char *proc_root, pid_t pid, struct pfr_sym_maps *maps)
{
    char path[96], why[128];
    snprintf(path, sizeof(path), "%s/%d/maps", proc_root, (int)pid);
    int rc = pfr_sym_maps_query(path, maps, why, sizeof(why));
    if (rc == -ENOTTY)
        rc = pfr_sym_maps_read(path, maps, why, sizeof(why));
    return rc;
}

static void fill_rec(const pfr_py_layout *l, const pfr_py_elf_syms *s, uint64_t bias,
                     struct pfr_py_proc *r)
{
    memset(r, 0, sizeof(*r));
    r->interp_head = s->runtime + bias + l->rt_interp_head;
    if (l->frame_kind == PFR_PY_FRAMES_OBJECT && s->eval && s->eval_size) {
        r->eval_lo = s->eval + bias;
        r->eval_hi = s->eval + bias + s->eval_size;
    }
    r->is_threads_head = l->is_threads_head;
    r->ts_next = l->ts_next;
    r->ts_tid = l->ts_tid;
    r->ts_frame = l->ts_frame;
    r->cf_frame = l->cf_frame;
    r->f_code = l->f_code;
    r->f_previous = l->f_previous;
    r->f_instr = l->f_instr;
    r->f_owner = l->f_owner;
    r->f_is_entry = l->f_is_entry;
    r->co_code = l->co_code;
    r->tid_kind = l->tid_kind;
    r->owner_cstack = l->owner_cstack;
    r->frame_kind = l->frame_kind;
    r->lasti_shift = l->lasti_shift;
    r->f_lasti = l->f_lasti;
}

/* The interpreter among the process's executable mappings: a libpython3.X first (a python3.X
 * linked to it has no _PyRuntime of its own), then a python3.X. */
static int find_interpreter(pfr_py *py, pid_t pid, const struct pfr_sym_maps *maps,
                            pfr_py_elf_syms *s, uint64_t *bias, unsigned *major, unsigned *minor,
                            char *why, size_t whylen)
{
    int rc = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < maps->n; i++) {
            const struct pfr_sym_map *m = &maps->v[i];
            if (m->kind != PFR_MAP_FILE)
                continue;
            const char *path = pfr_sym_map_path(maps, m);
            const char *base = strrchr(path, '/');
            base = base ? base + 1 : path;
            if ((pass == 0) != !strncmp(base, "libpython", 9))
                continue;
            if (pfr_py_version_from_name(path, major, minor) != 0)
                continue;
            rc = pfr_py_elf_symbols(py->elf, pid, maps, m, s, bias);
            if (rc == 0) {
                snprintf(why, whylen, "%s", path);
                return 1;
            }
            snprintf(why, whylen, "%s: %s", path, strerror(-rc));
            if (rc == -EINPROGRESS) {
                pending_add(py, pid); /* looked at again once copied (pfr_py_take_pending) */
                return rc;
            }
        }
    }
    return rc < 0 && rc != -ENOENT ? rc : 0;
}

/* 3.13: the layout the interpreter publishes at the start of _PyRuntime, read and checked. */
static int debug_layout(py_proc *p, uint64_t runtime)
{
    uint8_t buf[PFR_PY_DEBUG_OFFSETS_SIZE];
    if (p->mem.read(p->mem.ctx, runtime, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
        return -EFAULT;
    return pfr_py_layout_from_debug(buf, sizeof(buf), &p->own);
}

int pfr_py_inspect(pfr_py *py, pid_t pid, struct pfr_py_proc *rec, char *why, size_t whylen)
{
    snprintf(why, whylen, "no CPython mapped");
    pfr_py_forget(py, pid);
    struct pfr_sym_maps maps = {0};
    int rc = read_maps(py->proc_root, pid, &maps);
    if (rc)
        return rc;
    pfr_py_elf_syms s;
    uint64_t bias = 0;
    unsigned major = 0, minor = 0;
    rc = find_interpreter(py, pid, &maps, &s, &bias, &major, &minor, why, whylen);
    pfr_sym_maps_free(&maps);
    if (rc <= 0)
        return rc;
    py_proc *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->pid = pid;
    pfr_goheap_procmem_init(&p->pm, pid, py->proc_root);
    p->mem = pfr_goheap_procmem_reader(&p->pm);
    if (s.version) {
        /* Py_Version (3.11+): PY_VERSION_HEX, the running interpreter's own word */
        uint32_t hex = 0;
        if (p->mem.read(p->mem.ctx, s.version + bias, &hex, sizeof(hex)) == sizeof(hex)) {
            major = (hex >> 24) & 0xff;
            minor = (hex >> 16) & 0xff;
        }
    }
    p->lay = pfr_py_layout_find(major, minor);
    if (!p->lay && major == 3 && minor == 13 && debug_layout(p, s.runtime + bias) == 0)
        p->lay = &p->own;
    if (!p->lay) {
        py->st.unknown_versions++;
        snprintf(why, whylen, "CPython %u.%u: no layout known", major, minor);
        proc_free(py, p);
        return -ENOTSUP;
    }
    p->code_type = s.code_type + bias;
    p->str_type = s.str_type + bias;
    p->bytes_type = s.bytes_type + bias;
    if (pfr_map_put(&py->procs, (uint64_t)pid, (uint64_t)(uintptr_t)p)) {
        proc_free(py, p);
        return -ENOMEM;
    }
    py->st.processes++;
    py->st.found++;
    fill_rec(p->lay, &s, bias, rec);
    size_t used = strlen(why);
    snprintf(why + used, whylen - used, ": CPython %u.%u", major, minor);
    return 1;
}

/* ---- objects ---- */

static int read_exact(py_proc *p, uint64_t addr, void *buf, size_t len)
{
    if (!addr || addr + len < addr)
        return -EFAULT;
    ssize_t n = p->mem.read(p->mem.ctx, addr, buf, len);
    return n == (ssize_t)len ? 0 : (n < 0 ? (int)n : -EFAULT);
}

static uint64_t u64_at(const uint8_t *b, size_t off)
{
    uint64_t v;
    memcpy(&v, b + off, sizeof(v));
    return v;
}

/* The UTF-8 of code point c into out (room for 4). */
static size_t utf8(uint32_t c, char *out)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c >= 0xd800 && c < 0xe000)
        c = 0xfffd; /* a lone surrogate: not valid UTF-8 */
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    if (c > 0x10ffff)
        c = 0xfffd;
    if (c < 0x10000)
        return utf8(c, out);
    out[0] = (char)(0xf0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* A str object (compact: every name and file name is) as a new UTF-8 string. */
static int read_str(py_proc *p, uint64_t addr, char **out)
{
    const pfr_py_layout *l = p->lay;
    uint8_t h[128];
    if (l->str_compact_data > sizeof(h) || read_exact(p, addr, h, l->str_compact_data))
        return -EFAULT;
    if (u64_at(h, l->ob_type) != p->str_type)
        return -EINVAL;
    uint64_t len = u64_at(h, l->str_length);
    uint32_t state;
    memcpy(&state, h + l->str_state, sizeof(state));
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4))
        return -EINVAL;
    if (len > MAX_STR)
        len = MAX_STR;
    uint64_t data = addr + (ascii ? l->str_ascii_data : l->str_compact_data);
    uint8_t raw[MAX_STR * 4];
    if (read_exact(p, data, raw, (size_t)len * kind))
        return -EFAULT;
    char *s = malloc((size_t)len * 4 + 1);
    if (!s)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t c = kind == 1 ? raw[i]
                     : kind == 2
                         ? (uint32_t)raw[2 * i] | raw[2 * i + 1] << 8
                         : (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                               (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
        if (c == 0)
            c = 0xfffd;
        n += utf8(c, s + n);
    }
    s[n] = '\0';
    *out = s;
    return 0;
}

static int read_bytes(py_proc *p, uint64_t addr, uint8_t **out, size_t *outlen)
{
    const pfr_py_layout *l = p->lay;
    uint8_t h[64];
    if (l->bytes_data > sizeof(h) || read_exact(p, addr, h, l->bytes_data))
        return -EFAULT;
    if (u64_at(h, l->ob_type) != p->bytes_type)
        return -EINVAL;
    uint64_t len = u64_at(h, l->bytes_size);
    if (len > MAX_LINETABLE)
        return -EFBIG;
    uint8_t *b = malloc(len ? (size_t)len : 1);
    if (!b)
        return -ENOMEM;
    if (len && read_exact(p, addr + l->bytes_data, b, (size_t)len)) {
        free(b);
        return -EFAULT;
    }
    *out = b;
    *outlen = (size_t)len;
    return 0;
}

/* The code units of a code object whose header h was read: 3.11+ hold them (Py_SIZE, the
 * PyVarObject's ob_size as every var object's); 3.8-3.10 point at a bytes object co_code. */
static int code_units(py_proc *p, const uint8_t *h, uint64_t *units)
{
    const pfr_py_layout *l = p->lay;
    if (l->co_code_obj == PFR_PY_NONE) {
        *units = u64_at(h, l->bytes_size);
        return 0;
    }
    uint8_t b[64];
    if (l->bytes_data > sizeof(b) || read_exact(p, u64_at(h, l->co_code_obj), b, l->bytes_data))
        return -EFAULT;
    if (u64_at(b, l->ob_type) != p->bytes_type)
        return -EINVAL;
    *units = u64_at(b, l->bytes_size) / 2;
    return 0;
}

static int read_code(py_proc *p, uint64_t addr, code_entry *c)
{
    const pfr_py_layout *l = p->lay;
    uint8_t h[256];
    if (l->co_header > sizeof(h) || read_exact(p, addr, h, l->co_header))
        return -EFAULT;
    if (u64_at(h, l->ob_type) != p->code_type)
        return -EINVAL; /* freed, reused, or never a code object */
    int32_t first;
    memcpy(&first, h + l->co_firstlineno, sizeof(first));
    memset(c, 0, sizeof(*c));
    c->firstlineno = first;
    int rc = code_units(p, h, &c->units);
    if (rc)
        return rc;
    rc = read_str(p, u64_at(h, l->co_qualname), &c->qualname);
    if (rc == 0)
        rc = read_str(p, u64_at(h, l->co_filename), &c->filename);
    if (rc == 0)
        rc = read_bytes(p, u64_at(h, l->co_linetable), &c->linetable, &c->linetable_len);
    if (rc)
        entry_free(c);
    return rc;
}

/* The cached entry of code object addr, read now if not cached; NULL if unreadable. */
static const code_entry *code_of(pfr_py *py, py_proc *p, uint64_t addr)
{
    uint64_t *ix = pfr_map_get(&p->codes, addr);
    if (ix) {
        py->st.cache_hits++;
        return &p->v[*ix - 1];
    }
    code_entry c;
    if (read_code(p, addr, &c))
        return NULL;
    py->st.frames_read++;
    size_t bytes = strlen(c.qualname) + strlen(c.filename) + c.linetable_len + sizeof(c) + 32;
    if (p->n >= MAX_CODES || py->st.cache_bytes + bytes > py->max_bytes) {
        py->st.cache_resets++;
        proc_clear_codes(py, p);
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        code_entry *v = realloc(p->v, cap * sizeof(*v));
        if (!v) {
            entry_free(&c);
            return NULL;
        }
        p->v = v;
        p->cap = cap;
    }
    if (pfr_map_put(&p->codes, addr, p->n + 1)) {
        entry_free(&c);
        return NULL;
    }
    p->v[p->n] = c;
    p->bytes += bytes;
    py->st.cache_bytes += bytes;
    return &p->v[p->n++];
}

int pfr_py_name(pfr_py *py, pid_t pid, uint64_t v, pfr_py_frame *out)
{
    *out = (pfr_py_frame){.function = UNREADABLE, .file = "", .line = 0};
    uint64_t *pp = pfr_map_get(&py->procs, (uint64_t)pid);
    py_proc *proc = pp ? (py_proc *)(uintptr_t)*pp : NULL;
    uint64_t code = pfr_py_frame_code(v);
    const code_entry *c = NULL;
    if (proc && code)
        c = code_of(py, proc, code);
    if (!c) {
        py->st.read_failures++;
        return -ENOENT;
    }
    uint32_t unit1 = pfr_py_frame_unit1(v);
    if (unit1 > c->units && unit1 < PFR_PY_UNIT_MAX) {
        /* an instruction past the code's end: the frame ran another code object, freed since
         * and its address reused by this one (the rest of such reuses go unseen) */
        py->st.read_failures++;
        return -ENOENT;
    }
    int64_t line = c->firstlineno;
    if (unit1 > 0) {
        line = pfr_py_line(proc->lay->lines, c->linetable, c->linetable_len, c->firstlineno,
                           unit1 - 1);
        if (line < 0)
            line = 0;
    }
    *out = (pfr_py_frame){.function = c->qualname, .file = c->filename, .line = line};
    return 0;
}
