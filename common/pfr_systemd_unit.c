/* pfr_systemd_unit: systemd units' Type and TriggeredBy from their files (pfr_systemd_unit.h). */
#include "pfr_systemd_unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pfr_buf.h"

static const char *const search_path[] = {PFR_SYSTEMD_SEARCH_PATH};
#define NDIRS (sizeof(search_path) / sizeof(search_path[0]))

struct timer {
    char name[PFR_SYSTEMD_NAME_MAX];
    char unit[PFR_SYSTEMD_NAME_MAX]; /* the unit it triggers */
};

struct pfr_systemd {
    int rootfd;
    int dirfd[NDIRS]; /* O_PATH; -1 where the directory is missing */
    struct timer *timers;
    size_t ntimers, cap_timers;
};

/* ---- the parser ---- */

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* s[0..n) without its leading and trailing blanks, NUL-terminated in place. */
static char *trim(char *s, size_t n)
{
    while (n && blank(s[n - 1]))
        n--;
    s[n] = '\0';
    while (blank(*s))
        s++;
    return s;
}

/* One logical line (continuations joined) in line: a section, an assignment, or nothing. */
static int parse_line(char *line, size_t n, pfr_buf *section, pfr_systemd_assign_fn fn, void *ctx)
{
    char *l = trim(line, n);
    size_t len = strlen(l);
    if (l[0] == '[') {
        pfr_buf_reset(section);
        if (len >= 2 && l[len - 1] == ']')
            pfr_buf_put(section, l + 1, len - 2);
        else
            pfr_buf_puts(section, "\n"); /* a broken header: no section matches it */
        return pfr_buf_cstr(section) ? 0 : -ENOMEM;
    }
    char *eq = strchr(l, '=');
    if (!eq || !section->len)
        return 0; /* systemd: "Missing '='" or "Assignment outside of section", ignored */
    *eq = '\0';
    return fn((const char *)section->data, trim(l, (size_t)(eq - l)), trim(eq + 1, strlen(eq + 1)),
              ctx);
}

/* The end of the physical line starting at p: systemd's read_line ends one at '\n', '\r' (a
 * "\r\n" is one end) or a NUL byte. *next is where the next line starts. */
static const char *line_end(const char *p, const char *end, const char **next)
{
    const char *e = p;
    while (e < end && *e != '\n' && *e != '\r' && *e != '\0')
        e++;
    *next = e < end ? e + 1 + (*e == '\r' && e + 1 < end && e[1] == '\n') : end;
    return e;
}

/* Whether s[0..n) ends in a backslash that is not itself escaped. */
static bool continues(const char *s, size_t n)
{
    bool escaped = false;
    for (size_t i = 0; i < n; i++)
        escaped = !escaped && s[i] == '\\';
    return escaped;
}

int pfr_systemd_unit_parse(const char *text, size_t len, pfr_systemd_assign_fn fn, void *ctx)
{
    if (len > PFR_SYSTEMD_FILE_MAX)
        return -EFBIG;
    pfr_buf line = {0}, section = {0};
    int rc = pfr_buf_reserve(&line, len + 1);
    const char *p = text, *end = text + len;
    while (!rc && p < end) {
        const char *s = p, *e = line_end(p, end, &p);
        const char *first = s;
        while (first < e && (*first == ' ' || *first == '\t'))
            first++;
        if (first < e && (*first == '#' || *first == ';'))
            continue; /* a comment, also inside a continuation */
        size_t n = (size_t)(e - s);
        if (continues(s, n)) { /* joined with the next line, the backslash made a blank */
            pfr_buf_put(&line, s, n - 1);
            pfr_buf_putc(&line, ' ');
            continue;
        }
        pfr_buf_put(&line, s, n);
        if (!pfr_buf_cstr(&line)) {
            rc = -ENOMEM;
            break;
        }
        rc = parse_line((char *)line.data, line.len, &section, fn, ctx);
        pfr_buf_reset(&line);
    }
    if (!rc && line.len) /* a continuation at the end of the text */
        rc = pfr_buf_cstr(&line) ? parse_line((char *)line.data, line.len, &section, fn, ctx)
                                 : -ENOMEM;
    pfr_buf_free(&line);
    pfr_buf_free(&section);
    return rc;
}

/* ---- names ---- */

static const char *const unit_types[] = {"service", "socket",    "target", "device",
                                         "mount",   "automount", "swap",   "timer",
                                         "path",    "slice",     "scope"};

/* The unit's type suffix (after the last '.'), NULL when it is not one of systemd's. */
static const char *unit_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return NULL;
    for (size_t i = 0; i < sizeof(unit_types) / sizeof(unit_types[0]); i++)
        if (!strcmp(dot + 1, unit_types[i]))
            return unit_types[i];
    return NULL;
}

bool pfr_systemd_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= PFR_SYSTEMD_NAME_MAX || name[0] == '.' || !unit_type(name))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr(":_.@-\\", c)))
            return false;
    }
    return true;
}

/* The template of an instance ("getty@tty1.service" -> "getty@.service"): false when name is
 * not an instance. */
static bool template_of(const char *name, char *out, size_t outlen)
{
    const char *at = strchr(name, '@'), *dot = strrchr(name, '.');
    if (!at || !dot || dot < at || dot == at + 1)
        return false;
    int n = snprintf(out, outlen, "%.*s%s", (int)(at + 1 - name), name, dot);
    return n > 0 && (size_t)n < outlen;
}

/* ---- files ---- */

/* Open rel (relative) under the root: links resolve inside it (RESOLVE_IN_ROOT), /proc's magic
 * links not at all. Kernels before 5.6 have no openat2: plain openat, whose absolute links
 * resolve from the real root (the same thing when root is "/"). A negative errno or the fd. */
static int open_in_root(int rootfd, const char *rel, int flags)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
    if (fd < 0 && errno == ENOSYS)
        fd = openat(rootfd, rel, flags | O_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

enum entry { ENTRY_NONE, ENTRY_FILE, ENTRY_MASKED };

/* Entry base of directory dirfd (at dirrel under the root): none, masked, or a file whose text
 * is read into text (malloc'ed; caller frees). A negative errno when it cannot be read. */
static int read_entry(const pfr_systemd *sd, int dirfd, const char *dirrel, const char *base,
                      char **text, size_t *len)
{
    struct stat st;
    if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT || errno == ENOTDIR ? ENTRY_NONE : -errno;
    if (S_ISLNK(st.st_mode)) {
        char target[16];
        ssize_t n = readlinkat(dirfd, base, target, sizeof(target) - 1);
        if (n == 9 && !memcmp(target, "/dev/null", 9))
            return ENTRY_MASKED; /* inside a test's root, /dev/null is not there to open */
    }
    char rel[PATH_MAX];
    if (snprintf(rel, sizeof(rel), "%s/%s", dirrel, base) >= (int)sizeof(rel))
        return -ENAMETOOLONG;
    int fd = open_in_root(sd->rootfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd == -ENOENT)
        return ENTRY_NONE; /* a dangling link */
    if (fd < 0)
        return fd;
    int rc = ENTRY_FILE;
    if (fstat(fd, &st) < 0)
        rc = -errno;
    else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || (S_ISREG(st.st_mode) && !st.st_size))
        rc = ENTRY_MASKED; /* systemd's null_or_empty() */
    else if (!S_ISREG(st.st_mode))
        rc = ENTRY_NONE; /* a directory, a FIFO: no unit file */
    else if (st.st_size > PFR_SYSTEMD_FILE_MAX)
        rc = -EFBIG;
    if (rc != ENTRY_FILE) {
        close(fd);
        return rc;
    }
    rc = 0;
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    if (!buf)
        rc = -ENOMEM;
    while (!rc && got <= (size_t)st.st_size) { /* one byte more: a file that grew is too big */
        ssize_t r = read(fd, buf + got, (size_t)st.st_size + 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : 0;
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (!rc && got > (size_t)st.st_size)
        rc = -EFBIG;
    if (rc) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = got;
    return ENTRY_FILE;
}

/* The search path's directory i, relative to the root. */
static const char *dir_rel(size_t i)
{
    return search_path[i] + 1;
}

/* Visit the entries of directory rel under the root (at most PFR_SYSTEMD_DIR_ENTRIES_MAX) whose
 * names end in suffix: fn(dirfd, name, ctx); a nonzero return stops the walk with it. A missing
 * directory has no entries. */
static int each_entry(const pfr_systemd *sd, const char *rel, const char *suffix,
                      int (*fn)(int dirfd, const char *name, void *ctx), void *ctx)
{
    int fd = open_in_root(sd->rootfd, rel, O_RDONLY | O_DIRECTORY);
    if (fd == -ENOENT || fd == -ENOTDIR)
        return 0;
    if (fd < 0)
        return fd;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    size_t m = strlen(suffix), seen = 0;
    int rc = 0;
    struct dirent *e;
    while (!rc && seen++ < PFR_SYSTEMD_DIR_ENTRIES_MAX && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > m && !strcmp(e->d_name + n - m, suffix))
            rc = fn(dirfd(d), e->d_name, ctx);
    }
    closedir(d);
    return rc;
}

/* ---- loading a unit: its file, then its drop-ins ---- */

#define DROPIN_NAMES_MAX 64

struct dropin {
    char base[PFR_SYSTEMD_NAME_MAX];
    size_t dir, name; /* search directory, and which of the unit's <name>.d/ */
};

struct dropins {
    char names[DROPIN_NAMES_MAX][PFR_SYSTEMD_NAME_MAX]; /* dropin_names */
    size_t nnames;
    struct dropin v[PFR_SYSTEMD_DROPINS_MAX];
    size_t n;
    size_t dir, name; /* of the directory being listed */
};

static int add_dropin(int dirfd, const char *name, void *ctx)
{
    (void)dirfd;
    struct dropins *d = ctx;
    if (strlen(name) >= PFR_SYSTEMD_NAME_MAX)
        return 0; /* longer than systemd's file names */
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->v[i].base, name))
            return 0; /* a directory earlier in the search path has it */
    if (d->n == PFR_SYSTEMD_DROPINS_MAX)
        return -E2BIG;
    snprintf(d->v[d->n].base, sizeof(d->v[d->n].base), "%s", name);
    d->v[d->n].dir = d->dir;
    d->v[d->n].name = d->name;
    d->n++;
    return 0;
}

static int cmp_dropin(const void *a, const void *b)
{
    return strcmp(((const struct dropin *)a)->base, ((const struct dropin *)b)->base);
}

/* The names whose "<name>.d/" hold the unit's drop-ins, most specific first: the unit, its
 * template, the dash prefixes of the template or the unit ("foo-bar-.service", "foo-.service"),
 * and last its type ("service"), whose drop-ins come after the others' in the search path.
 * @return how many (at most max). */
static size_t dropin_names(const char *unit, char names[][PFR_SYSTEMD_NAME_MAX], size_t max)
{
    size_t k = 0;
    snprintf(names[k++], PFR_SYSTEMD_NAME_MAX, "%s", unit);
    const char *base = unit;
    if (template_of(unit, names[k], PFR_SYSTEMD_NAME_MAX))
        base = names[k++];
    const char *dot = strrchr(base, '.');
    for (const char *p = dot - 1; p > base && k + 1 < max; p--) {
        if (*p != '-' || p == dot - 1)
            continue; /* not a dash, or the name's own trailing dash */
        snprintf(names[k++], PFR_SYSTEMD_NAME_MAX, "%.*s%s", (int)(p + 1 - base), base, dot);
    }
    snprintf(names[k++], PFR_SYSTEMD_NAME_MAX, "%s", dot + 1);
    return k;
}

/* <search directory>/<name>.d of a drop-in, relative to the root. */
static int dropin_dir(const struct dropins *d, size_t dir, size_t name, char *rel, size_t len)
{
    int n = snprintf(rel, len, "%s/%s.d", dir_rel(dir), d->names[name]);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Find the drop-ins of unit: every search directory's <name>.d/ *.conf files, the type's last; one
 * file name kept once (the earliest directory's), sorted by file name. */
static int collect_dropins(const pfr_systemd *sd, const char *unit, struct dropins *d)
{
    d->nnames = dropin_names(unit, d->names, DROPIN_NAMES_MAX);
    char rel[PATH_MAX];
    for (int pass = 0; pass < 2; pass++) { /* the names' directories, then the type's */
        size_t from = pass ? d->nnames - 1 : 0, to = pass ? d->nnames : d->nnames - 1;
        for (size_t i = 0; i < NDIRS; i++) {
            for (size_t k = from; sd->dirfd[i] >= 0 && k < to; k++) {
                d->dir = i, d->name = k;
                int rc = dropin_dir(d, i, k, rel, sizeof(rel));
                if (!rc)
                    rc = each_entry(sd, rel, ".conf", add_dropin, d);
                if (rc)
                    return rc;
            }
        }
    }
    qsort(d->v, d->n, sizeof(d->v[0]), cmp_dropin);
    return 0;
}

/* Parse one entry if it is a file. */
static int apply_entry(const pfr_systemd *sd, int dirfd, const char *dirrel, const char *base,
                       pfr_systemd_assign_fn fn, void *ctx)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_entry(sd, dirfd, dirrel, base, &text, &len);
    if (rc == ENTRY_FILE)
        rc = pfr_systemd_unit_parse(text, len, fn, ctx);
    free(text);
    return rc < 0 ? rc : 0;
}

static int apply_dropins(const pfr_systemd *sd, const char *unit, pfr_systemd_assign_fn fn,
                         void *ctx)
{
    struct dropins *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    int rc = collect_dropins(sd, unit, d);
    char rel[PATH_MAX];
    for (size_t i = 0; !rc && i < d->n; i++) {
        rc = dropin_dir(d, d->v[i].dir, d->v[i].name, rel, sizeof(rel));
        int fd = rc ? rc : open_in_root(sd->rootfd, rel, O_PATH | O_DIRECTORY);
        if (fd < 0) {
            rc = fd == -ENOENT ? 0 : fd; /* gone since it was listed */
            continue;
        }
        rc = apply_entry(sd, fd, rel, d->v[i].base, fn, ctx);
        close(fd);
    }
    free(d);
    return rc;
}

/* Load unit as systemd does: its file (the first directory holding its name, else its
 * template's), then its drop-ins; fn sees every assignment in that order. */
static int load_unit(const pfr_systemd *sd, const char *unit, pfr_systemd_assign_fn fn, void *ctx,
                     enum pfr_systemd_load *load)
{
    char tmpl[PFR_SYSTEMD_NAME_MAX];
    const char *names[2] = {unit, template_of(unit, tmpl, sizeof(tmpl)) ? tmpl : NULL};
    *load = PFR_SYSTEMD_NOT_FOUND;
    for (size_t k = 0; k < 2 && names[k]; k++) {
        for (size_t i = 0; i < NDIRS; i++) {
            if (sd->dirfd[i] < 0)
                continue;
            char *text = NULL;
            size_t len = 0;
            int rc = read_entry(sd, sd->dirfd[i], dir_rel(i), names[k], &text, &len);
            if (rc == ENTRY_NONE)
                continue;
            if (rc == ENTRY_MASKED) {
                *load = PFR_SYSTEMD_MASKED;
                return 0;
            }
            if (rc == ENTRY_FILE)
                rc = pfr_systemd_unit_parse(text, len, fn, ctx);
            free(text);
            if (rc < 0)
                return rc;
            *load = PFR_SYSTEMD_LOADED;
            return apply_dropins(sd, unit, fn, ctx);
        }
    }
    return 0;
}

/* ---- services ---- */

struct service {
    char type[16];
    bool bus_name, exec_start;
};

static int service_assign(const char *section, const char *key, const char *value, void *ctx)
{
    static const char *const types[] = {"simple", "exec",   "forking",       "oneshot",
                                        "dbus",   "notify", "notify-reload", "idle"};
    struct service *s = ctx;
    if (strcmp(section, "Service"))
        return 0;
    if (!strcmp(key, "Type")) {
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
            if (!strcmp(value, types[i]))
                snprintf(s->type, sizeof(s->type), "%s", types[i]);
    } else if (!strcmp(key, "BusName")) {
        s->bus_name = value[0] != '\0';
    } else if (!strcmp(key, "ExecStart")) {
        s->exec_start = value[0] != '\0'; /* an empty one clears the list */
    }
    return 0;
}

static int ignore_assign(const char *section, const char *key, const char *value, void *ctx)
{
    (void)section, (void)key, (void)value, (void)ctx;
    return 0;
}

/* ---- timers ---- */

struct timer_load {
    const char *timer; /* its name */
    char unit[PFR_SYSTEMD_NAME_MAX];
};

/* value with the specifiers of timer's name expanded (%n %N %p %i %%): false for another
 * specifier or a result too long. */
static bool expand(const char *timer, const char *value, char *out, size_t outlen)
{
    const char *dot = strrchr(timer, '.'), *at = strchr(timer, '@');
    size_t k = 0;
    for (const char *v = value; *v; v++) {
        const char *s = v;
        size_t n = 1;
        if (*v == '%') {
            switch (*++v) {
            case 'n':
                s = timer, n = strlen(timer);
                break;
            case 'N':
                s = timer, n = (size_t)(dot - timer);
                break;
            case 'p':
                s = timer, n = (size_t)((at && at < dot ? at : dot) - timer);
                break;
            case 'i':
                s = at && at < dot ? at + 1 : "", n = at && at < dot ? (size_t)(dot - at - 1) : 0;
                break;
            case '%':
                break;
            default:
                return false;
            }
        }
        if (k + n >= outlen)
            return false;
        memcpy(out + k, s, n);
        k += n;
    }
    out[k] = '\0';
    return true;
}

static int timer_assign(const char *section, const char *key, const char *value, void *ctx)
{
    struct timer_load *t = ctx;
    if (t->unit[0] || strcmp(section, "Timer") || strcmp(key, "Unit"))
        return 0; /* systemd takes the first Unit= that resolves */
    char unit[PFR_SYSTEMD_NAME_MAX];
    const char *type = NULL;
    if (expand(t->timer, value, unit, sizeof(unit)) && pfr_systemd_name_ok(unit))
        type = unit_type(unit);
    if (type && strcmp(type, "timer"))
        snprintf(t->unit, sizeof(t->unit), "%s", unit);
    return 0;
}

struct timer_scan {
    pfr_systemd *sd;
    const char *dir; /* the search directory being listed, relative to the root */
};

static int add_timer(int dirfd, const char *name, void *ctx)
{
    (void)dirfd;
    pfr_systemd *sd = ctx;
    if (!pfr_systemd_name_ok(name))
        return 0;
    for (size_t i = 0; i < sd->ntimers; i++)
        if (!strcmp(sd->timers[i].name, name))
            return 0;
    if (sd->ntimers == PFR_SYSTEMD_TIMERS_MAX)
        return 0; /* more than a host has: the rest are not known */
    if (sd->ntimers == sd->cap_timers) {
        size_t cap = sd->cap_timers ? 2 * sd->cap_timers : 16;
        struct timer *v = realloc(sd->timers, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        sd->timers = v;
        sd->cap_timers = cap;
    }
    memset(&sd->timers[sd->ntimers], 0, sizeof(sd->timers[0]));
    snprintf(sd->timers[sd->ntimers++].name, PFR_SYSTEMD_NAME_MAX, "%s", name);
    return 0;
}

/* A *.wants/ or *.requires/ directory of a search directory: the timers linked into it. */
static int scan_wants(int dirfd, const char *name, void *ctx)
{
    (void)dirfd;
    struct timer_scan *x = ctx;
    char rel[PATH_MAX];
    if (snprintf(rel, sizeof(rel), "%s/%s", x->dir, name) >= (int)sizeof(rel))
        return 0;
    return each_entry(x->sd, rel, ".timer", add_timer, x->sd);
}

static int cmp_timer(const void *a, const void *b)
{
    return strcmp(((const struct timer *)a)->name, ((const struct timer *)b)->name);
}

/* Find the enabled timers and the unit each triggers; those that do not load are dropped. */
static int load_timers(pfr_systemd *sd)
{
    static const char *const kinds[] = {".wants", ".requires"};
    for (size_t i = 0; i < NDIRS; i++) {
        struct timer_scan x = {.sd = sd, .dir = dir_rel(i)};
        for (size_t k = 0; sd->dirfd[i] >= 0 && k < 2; k++) {
            int rc = each_entry(sd, x.dir, kinds[k], scan_wants, &x);
            if (rc < 0)
                return rc;
        }
    }
    size_t kept = 0;
    for (size_t i = 0; i < sd->ntimers; i++) {
        struct timer_load t = {.timer = sd->timers[i].name};
        enum pfr_systemd_load load;
        int rc = load_unit(sd, t.timer, timer_assign, &t, &load);
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0 || load != PFR_SYSTEMD_LOADED)
            continue; /* unreadable or masked: not loaded by systemd either */
        if (!t.unit[0]) {
            const char *dot = strrchr(t.timer, '.');
            snprintf(t.unit, sizeof(t.unit), "%.*s.service", (int)(dot - t.timer), t.timer);
        }
        sd->timers[kept] = sd->timers[i];
        snprintf(sd->timers[kept].unit, PFR_SYSTEMD_NAME_MAX, "%s", t.unit);
        kept++;
    }
    sd->ntimers = kept;
    if (sd->ntimers > 1)
        qsort(sd->timers, sd->ntimers, sizeof(sd->timers[0]), cmp_timer);
    return 0;
}

/* ---- the view ---- */

int pfr_systemd_open(const char *root, pfr_systemd **out)
{
    *out = NULL;
    pfr_systemd *sd = calloc(1, sizeof(*sd));
    if (!sd)
        return -ENOMEM;
    for (size_t i = 0; i < NDIRS; i++)
        sd->dirfd[i] = -1;
    sd->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sd->rootfd < 0) {
        int rc = -errno;
        free(sd);
        return rc;
    }
    for (size_t i = 0; i < NDIRS; i++) {
        int fd = open_in_root(sd->rootfd, dir_rel(i), O_PATH | O_DIRECTORY);
        sd->dirfd[i] = fd < 0 ? -1 : fd; /* missing or unreadable: no units there */
    }
    int rc = load_timers(sd);
    if (rc) {
        pfr_systemd_close(sd);
        return rc;
    }
    *out = sd;
    return 0;
}

void pfr_systemd_close(pfr_systemd *sd)
{
    if (!sd)
        return;
    for (size_t i = 0; i < NDIRS; i++)
        if (sd->dirfd[i] >= 0)
            close(sd->dirfd[i]);
    close(sd->rootfd);
    free(sd->timers);
    free(sd);
}

size_t pfr_systemd_timers(const pfr_systemd *sd)
{
    return sd->ntimers;
}

int pfr_systemd_unit_props(const pfr_systemd *sd, const char *unit, pfr_systemd_props *out)
{
    memset(out, 0, sizeof(*out));
    if (!pfr_systemd_name_ok(unit))
        return -EINVAL;
    struct service s = {0};
    bool service = !strcmp(unit_type(unit), "service");
    enum pfr_systemd_load load;
    int rc = load_unit(sd, unit, service ? service_assign : ignore_assign, &s, &load);
    if (rc)
        return rc;
    out->load = load;
    if (load == PFR_SYSTEMD_LOADED && service) {
        /* systemd's service_add_extras, for a service without a valid Type= */
        const char *type = s.type[0]      ? s.type
                           : s.bus_name   ? "dbus"
                           : s.exec_start ? "simple"
                                          : "oneshot";
        snprintf(out->type, sizeof(out->type), "%s", type);
    }
    for (size_t i = 0; i < sd->ntimers; i++) {
        if (!strcmp(sd->timers[i].unit, unit)) {
            snprintf(out->triggered_by, sizeof(out->triggered_by), "%s", sd->timers[i].name);
            break;
        }
    }
    return 0;
}
