/* What every renderer shares: the package rule, colours, value formatting and names in text. */
#include "pfr_render.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pfr_names.h"
#include "pfr_utf8.h"

/* GCC clone suffixes (foo.part.0, bar.cold) mark plain C names, not Go packages. */
static bool is_clone_suffix(const char *dot)
{
    static const char *const suffixes[] = {"part.",     "cold",       "isra.", "constprop.",
                                           "lto_priv.", "localalias", "llvm."};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
        if (strncmp(dot + 1, suffixes[i], strlen(suffixes[i])) == 0)
            return true;
    return false;
}

static char *copy_span(const char *s, size_t n, char *buf, size_t len)
{
    if (!len)
        return buf;
    if (n >= len)
        n = len - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* C++/Rust: drop <...> and (...) at any depth, then cut at the last "::". */
static bool cxx_package(const char *name, char *buf, size_t len)
{
    char tmp[1024];
    size_t n = 0;
    int angle = 0, paren = 0;
    for (const char *p = name; *p && n + 1 < sizeof(tmp); p++) {
        if (*p == '<')
            angle++;
        else if (*p == '>' && angle > 0)
            angle--;
        else if (*p == '(')
            paren++;
        else if (*p == ')' && paren > 0)
            paren--;
        else if (!angle && !paren)
            tmp[n++] = *p;
    }
    tmp[n] = '\0';
    char *last = NULL;
    for (char *p = strstr(tmp, "::"); p; p = strstr(p + 2, "::"))
        last = p;
    if (!last || last == tmp)
        return false;
    copy_span(tmp, (size_t)(last - tmp), buf, len);
    return true;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

char *pfr_frame_package(const char *name, const char *module, char *buf, size_t len)
{
    if (!name)
        name = "";
    if (!module)
        module = "";
    /* "[module]"; a leading '/' is a service's frame named as Coroot does ("/k8s/ns/app"),
     * not a Go package path */
    if (name[0] == '[' || name[0] == '/')
        return copy_span(name, strlen(name), buf, len);
    if (strstr(name, "::") && cxx_package(name, buf, len))
        return buf;
    const char *slash = strrchr(name, '/');
    if (slash) {
        const char *dot = strchr(slash, '.');
        return copy_span(name, (size_t)((dot ? dot : slash) - name), buf, len);
    }
    const char *dot = strchr(name, '.');
    if (dot && dot != name && !is_clone_suffix(dot))
        return copy_span(name, (size_t)(dot - name), buf, len);
    if (module[0]) {
        const char *b = base_name(module);
        return copy_span(b, strlen(b), buf, len);
    }
    const char *p = name;
    while (*p == '_')
        p++;
    const char *us = strchr(p, '_');
    const char *end = us ? us : dot ? dot : p + strlen(p);
    if (end == p)
        return copy_span(name, strlen(name), buf, len);
    return copy_span(p, (size_t)(end - p), buf, len);
}

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

static void hsl_to_hex(double h, double s, double l, char out[8])
{
    double c = (1 - fabs(2 * l - 1)) * s, hp = h / 60, x = c * (1 - fabs(fmod(hp, 2) - 1));
    double r = 0, g = 0, b = 0;
    if (hp < 1)
        r = c, g = x;
    else if (hp < 2)
        r = x, g = c;
    else if (hp < 3)
        g = c, b = x;
    else if (hp < 4)
        g = x, b = c;
    else if (hp < 5)
        r = x, b = c;
    else
        r = c, b = x;
    double m = l - c / 2;
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)lround((r + m) * 255),
             (unsigned)lround((g + m) * 255), (unsigned)lround((b + m) * 255));
}

static bool is_kernel(const char *package, const char *module)
{
    const char *m = module ? base_name(module) : "";
    return strstr(m, "kernel") || strcmp(m, "vmlinux") == 0 || strstr(package, "kernel") ||
           strcmp(package, "vmlinux") == 0;
}

void pfr_package_color(const char *package, const char *module, char out[8])
{
    uint32_t h = fnv1a(package ? package : "");
    double sat = 0.62 + (double)((h >> 8) % 20) / 100;
    double light = 0.55 + (double)((h >> 16) % 12) / 100;
    if (is_kernel(package ? package : "", module))
        hsl_to_hex(190 + (double)(h % 30), sat - 0.2, light, out);
    else
        hsl_to_hex((double)(h % 52), sat, light, out);
}

void pfr_diff_color(double change, char out[8])
{
    /* Neutral frames are a light grey; the shade moves to red (more) or green (less). */
    double a = fabs(change);
    if (a > 1)
        a = 1;
    double base = 0.86;
    if (change > 0)
        hsl_to_hex(0, 0.15 + 0.7 * a, base - 0.33 * a, out);
    else if (change < 0)
        hsl_to_hex(125, 0.15 + 0.6 * a, base - 0.33 * a, out);
    else
        hsl_to_hex(0, 0, base, out);
}

const char *pfr_type_unit(const char *type)
{
    const char *c = type ? strrchr(type, ':') : NULL;
    return c ? c + 1 : "";
}

static char *scaled(double v, const char *const *names, const double *steps, size_t n,
                    const char *suffix, char *buf, size_t len)
{
    size_t i = 0;
    while (i + 1 < n && fabs(v) >= steps[i + 1])
        i++;
    double x = v / steps[i];
    const char *fmt = fabs(x) >= 100 || x == floor(x) ? "%.0f%s%s%s" : "%.3g%s%s%s";
    snprintf(buf, len, fmt, x, names[i][0] ? " " : "", names[i], suffix);
    return buf;
}

char *pfr_format_value(double v, const char *unit, bool per_second, char *buf, size_t len)
{
    const char *suffix = per_second ? "/s" : "";
    if (!unit)
        unit = "";
    if (strcmp(unit, "nanoseconds") == 0) {
        static const char *const n[] = {"ns", "µs", "ms", "s"};
        static const double s[] = {1, 1e3, 1e6, 1e9};
        return scaled(v, n, s, 4, suffix, buf, len);
    }
    if (strcmp(unit, "bytes") == 0) {
        static const char *const n[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        static const double s[] = {1, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0};
        return scaled(v, n, s, 5, suffix, buf, len);
    }
    static const char *const n[] = {"", "k", "M", "G"};
    static const double s[] = {1, 1e3, 1e6, 1e9};
    return scaled(v, n, s, 4, suffix, buf, len);
}

/* ---- names in text ---- */
typedef struct text_sink {
    FILE *f;   /* write here, or */
    char *buf; /* into buf (len bytes with the NUL), or only count (both NULL) */
    size_t len, used;
    bool full;
} text_sink;

static void sink_put(text_sink *k, const char *s, size_t n)
{
    if (k->f) {
        fwrite(s, 1, n, k->f);
        return;
    }
    if (!k->buf) {
        k->used += n;
        return;
    }
    if (k->full || k->used + n >= k->len) { /* never half an escape or a character */
        k->full = true;
        return;
    }
    memcpy(k->buf + k->used, s, n);
    k->used += n;
    k->buf[k->used] = '\0';
}

/* Not one of PFR_TEXT_*: a backslash is written \\ (folded names that are escaped). */
#define TEXT_BACKSLASH 0x100

/* The escape of the character at s (len bytes, code point cp; len 0: a byte that is not UTF-8)
 * into e, or false when it is written as it is. */
static bool text_escape_char(const unsigned char *s, size_t len, int32_t cp, unsigned flags,
                             char e[8])
{
    if (!len)
        snprintf(e, 8, "\\x%02x", s[0]);
    else if (cp == '\n')
        snprintf(e, 8, "\\n");
    else if (cp == '\t')
        snprintf(e, 8, "\\t");
    else if (cp == '\r')
        snprintf(e, 8, "\\r");
    else if (cp < 0x20 || cp == 0x7f || (cp == ';' && (flags & PFR_TEXT_SEMICOLON)))
        snprintf(e, 8, "\\x%02x", (unsigned)cp);
    else if (cp >= 0x80 && cp < 0xa0)
        snprintf(e, 8, "\\u%04x", (unsigned)cp);
    else if ((cp == '"' && (flags & PFR_TEXT_QUOTE)) ||
             (cp == '\\' && (flags & (PFR_TEXT_QUOTE | TEXT_BACKSLASH))))
        snprintf(e, 8, "\\%c", (char)cp);
    else
        return false;
    return true;
}

static bool text_needs_quotes(const unsigned char *s, size_t n, unsigned flags)
{
    if (!n)
        return true;
    for (size_t i = 0, len; i < n; i += len ? len : 1) {
        int32_t cp = 0;
        char e[8];
        len = pfr_utf8_seq(s + i, n - i, &cp);
        if (cp == ' ' || text_escape_char(s + i, len, cp, flags, e))
            return true;
    }
    return false;
}

/* Printable ASCII that needs neither escapes nor quotes: the common case, written at once. */
static bool text_plain(const unsigned char *s, size_t n, unsigned flags)
{
    bool q = flags & PFR_TEXT_QUOTE, semi = flags & PFR_TEXT_SEMICOLON;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] >= 0x7f || (semi && (s[i] == ';' || s[i] == '\\')) ||
            (q && (s[i] == ' ' || s[i] == '"' || s[i] == '\\')))
            return false;
    return n > 0 || !q;
}

/* A folded name that needs no escape and holds no text a reader takes for one (pfr_names.h):
 * written as it is, backslashes included. */
static bool folded_plain(const unsigned char *s, size_t n)
{
    for (size_t i = 0, len; i < n; i += len ? len : 1) {
        int32_t cp = 0;
        char e[8], dec[4];
        size_t declen;
        len = pfr_utf8_seq(s + i, n - i, &cp);
        if (text_escape_char(s + i, len, cp, PFR_TEXT_SEMICOLON, e) ||
            (cp == '\\' &&
             pfr_name_escape_at((const char *)s + i, n - i, PFR_NAME_FOLDED, dec, &declen)))
            return false;
    }
    return true;
}

static void text_write(text_sink *k, const char *name, unsigned flags)
{
    const unsigned char *s = (const unsigned char *)(name ? name : "");
    size_t n = strlen((const char *)s);
    if ((k->f || !k->buf) && text_plain(s, n, flags)) { /* a buffer may have to cut it */
        sink_put(k, (const char *)s, n);
        return;
    }
    if ((flags & PFR_TEXT_SEMICOLON) && !folded_plain(s, n))
        flags |= TEXT_BACKSLASH;
    bool quote = (flags & PFR_TEXT_QUOTE) && text_needs_quotes(s, n, flags);
    if (quote)
        sink_put(k, "\"", 1);
    for (size_t i = 0, len; i < n; i += len ? len : 1) {
        int32_t cp = 0;
        char e[8];
        len = pfr_utf8_seq(s + i, n - i, &cp);
        if (text_escape_char(s + i, len, cp, flags, e))
            sink_put(k, e, strlen(e));
        else
            sink_put(k, (const char *)s + i, len);
    }
    if (quote)
        sink_put(k, "\"", 1);
}

char *pfr_text_escape(const char *name, unsigned flags, char *buf, size_t len)
{
    if (!len)
        return buf;
    buf[0] = '\0';
    text_sink count = {0};
    text_write(&count, name, flags);
    bool cut = count.used >= len && len > 4; /* end a cut name with "..." */
    text_sink k = {.buf = buf, .len = cut ? len - 3 : len};
    text_write(&k, name, flags);
    if (cut)
        strcat(buf, "...");
    return buf;
}

void pfr_text_put(FILE *out, const char *name, unsigned flags)
{
    text_sink k = {.f = out};
    text_write(&k, name, flags);
}
