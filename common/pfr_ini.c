/* INI parsing: lines and duplicates checked here, the grammar left to libinih. */
#include "pfr_ini.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A section or key seen, and where. */
struct seen {
    char *what; /* "[section]" or "section\nkey" */
    unsigned line;
};

struct scan {
    const char *name;
    const char *const *repeatable;
    struct seen *v;
    size_t n, cap;
    char *err;
    size_t errlen;
};

static void seen_free(struct scan *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].what);
    free(s->v);
}

/* 0 if what is new (and now remembered); -EINVAL with the reason if given before. */
static int remember(struct scan *s, char *what, unsigned line, const char *kind, const char *show)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].what, what) == 0) {
            snprintf(s->err, s->errlen, "%s:%u: %s %s given again (first at line %u)", s->name,
                     line, kind, show, s->v[i].line);
            free(what);
            return -EINVAL;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct seen *v = realloc(s->v, cap * sizeof(*v));
        if (!v) {
            free(what);
            return -ENOMEM;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct seen){what, line};
    return 0;
}

static bool repeatable(const struct scan *s, const char *section, const char *key, size_t klen)
{
    size_t sl = strlen(section);
    for (const char *const *r = s->repeatable; r && *r; r++)
        if (strncmp(*r, section, sl) == 0 && (*r)[sl] == '.' && strlen(*r + sl + 1) == klen &&
            strncmp(*r + sl + 1, key, klen) == 0)
            return true;
    return false;
}

static size_t trimmed(const char *p, size_t n)
{
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    return n;
}

/* One line (no newline), as libinih will read it: section headers and keys are remembered. */
static int scan_line(struct scan *s, const char *line, size_t len, unsigned no, char *section,
                     bool *in_key)
{
    size_t i = 0;
    while (i < len && isspace((unsigned char)line[i]))
        i++;
    if (i == len || line[i] == ';' || line[i] == '#')
        return 0; /* blank or a comment */
    if (i > 0 && *in_key)
        return 0; /* an indented line continues the value above (libinih's multi-line) */
    const char *p = line + i;
    size_t n = len - i;
    if (*p == '[') {
        const char *end = memchr(p, ']', n);
        if (!end)
            return 0; /* libinih reports it */
        size_t sl = (size_t)(end - p - 1);
        while (sl && isspace((unsigned char)p[1 + sl - 1]))
            sl--;
        const char *sn = p + 1;
        while (sl && isspace((unsigned char)*sn))
            sn++, sl--;
        snprintf(section, PFR_INI_MAX_LINE + 1, "%.*s", (int)sl, sn);
        *in_key = false;
        char *what = NULL, show[PFR_INI_MAX_LINE + 3];
        snprintf(show, sizeof(show), "[%s]", section);
        if (!(what = strdup(show)))
            return -ENOMEM;
        return remember(s, what, no, "section", show);
    }
    size_t k = strcspn(p, "=:");
    if (k >= n)
        return 0; /* not a key = value line: libinih reports it */
    k = trimmed(p, k);
    *in_key = true;
    if (repeatable(s, section, p, k))
        return 0;
    size_t wl = strlen(section) + 1 + k + 1;
    char *what = malloc(wl);
    if (!what)
        return -ENOMEM;
    snprintf(what, wl, "%s\n%.*s", section, (int)k, p);
    char show[PFR_INI_MAX_LINE + 32];
    snprintf(show, sizeof(show), "'%.*s'%s%s%s", (int)k, p, section[0] ? " in [" : "", section,
             section[0] ? "]" : "");
    return remember(s, what, no, "key", show);
}

/* Every line whole and no duplicate. */
static int scan_text(struct scan *s, const char *text, size_t len)
{
    char *section = calloc(1, PFR_INI_MAX_LINE + 1);
    if (!section)
        return -ENOMEM;
    bool in_key = false;
    unsigned no = 0;
    int rc = 0;
    for (size_t pos = 0, next; pos < len && rc == 0; pos = next) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t l = nl ? (size_t)(nl - (text + pos)) : len - pos;
        next = pos + l + (nl ? 1 : 0);
        no++;
        if (l && text[pos + l - 1] == '\r')
            l--;
        if (l > PFR_INI_MAX_LINE) {
            snprintf(s->err, s->errlen, "%s:%u: line is too long (%zu bytes; at most %d)", s->name,
                     no, l, PFR_INI_MAX_LINE);
            rc = -EINVAL;
        } else if (memchr(text + pos, '\0', l)) {
            snprintf(s->err, s->errlen, "%s:%u: a NUL byte in the line", s->name, no);
            rc = -EINVAL;
        } else {
            rc = scan_line(s, text + pos, l, no, section, &in_key);
        }
    }
    free(section);
    return rc;
}

int pfr_ini_parse_text(const char *text, size_t len, const char *name,
                       const char *const *repeatable, pfr_ini_handler h, void *user, char *err,
                       size_t errlen)
{
    struct scan s = {.name = name, .repeatable = repeatable, .err = err, .errlen = errlen};
    int rc = scan_text(&s, text, len);
    seen_free(&s);
    if (rc < 0) {
        if (rc == -ENOMEM)
            snprintf(err, errlen, "%s: out of memory", name);
        return rc;
    }
    /* libinih reads with a buffer of ini_max_line bytes taken from the heap when it is told
     * to: the lines checked above then arrive whole. These are the library's settings, the
     * same for every caller, written before each parse. */
    ini_use_stack = false;
    ini_max_line = PFR_INI_MAX_LINE + 3;
    ini_initial_alloc = PFR_INI_MAX_LINE + 3;
    char *copy = malloc(len + 1); /* ini_parse_string wants a C string */
    if (!copy) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -ENOMEM;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    rc = ini_parse_string(copy, h, user);
    free(copy);
    if (rc < 0) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -ENOMEM;
    }
    return rc;
}

int pfr_ini_parse(FILE *f, const char *name, const char *const *repeatable, pfr_ini_handler h,
                  void *user, char *err, size_t errlen)
{
    char *text = malloc(PFR_INI_MAX_FILE + 1);
    if (!text) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -ENOMEM;
    }
    size_t len = fread(text, 1, PFR_INI_MAX_FILE + 1, f);
    int rc;
    if (ferror(f)) {
        rc = -(errno ? errno : EIO);
        snprintf(err, errlen, "%s: cannot read: %s", name, strerror(-rc));
    } else if (len > PFR_INI_MAX_FILE) {
        rc = -EFBIG;
        snprintf(err, errlen, "%s: larger than %u bytes", name, PFR_INI_MAX_FILE);
    } else {
        rc = pfr_ini_parse_text(text, len, name, repeatable, h, user, err, errlen);
    }
    free(text);
    return rc;
}
