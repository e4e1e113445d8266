/*
 * pfr_render: flame tree renderers. Every renderer writes to a FILE* (a file, stdout, or an
 * open_memstream() buffer for the web server) and returns 0 or a negative errno.
 *
 * Plain flame graphs use side 0 of the tree. Diffs (opts.diff) use side 0 as the baseline and
 * side 1 as the comparison; opts.norm[] turns each side into a rate (1 / range seconds) so ranges
 * of different lengths compare fairly.
 */
#ifndef PFR_RENDER_H
#define PFR_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pfr_tree.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pfr_render_opts {
    const char *title;    /* first line printed on pictures; NULL = "Flame graph" */
    const char *subtitle; /* range and filters, printed under the title */
    const char *unit;     /* unit of the values: "nanoseconds", "bytes", "count", ... */
    bool diff;            /* two sides: baseline (0) and comparison (1) */
    double norm[2];       /* factor applied to each side's values when shown; 0 = 1 */
    double min_width;     /* svg/html: drop frames narrower than this share of the total;
                             0 = default (0.0001 for html, 0.0005 for svg); <0 = keep all */
    size_t limit;         /* top: rows; 0 = 30 */
    int width;            /* svg: picture width in pixels; 0 = 1200 */
    const char *search;   /* html/svg: initial search text; may be NULL */
} pfr_render_opts;

/* ---- package and colour rule (see docs/query.md, "Colours") ----
 * C++/Rust "a::b::f(...)"  -> text before the last "::" once <...> and (...) are removed
 * Go "path/to/pkg.(*T).M"  -> up to the first '.' after the last '/'
 * Go "runtime.mallocgc"    -> up to the first '.'
 * plain C "memcpy"         -> the module's file name ("libc.so.6"), or the name's prefix up to
 *                             its first '_' (leading '_' skipped) when no module is known
 * "[module]" frames        -> the name itself.
 * "/..." frames            -> the name itself (the frame of a service named as Coroot does,
 *                             "/k8s/ns/app", "/system.slice/nginx.service").
 * Writes the package into buf and returns buf. */
char *pfr_frame_package(const char *name, const char *module, char *buf, size_t len);
/* "#rrggbb": warm hues for user code, blue hues for the kernel; stable per package. */
void pfr_package_color(const char *package, const char *module, char out[8]);
/* Diff shading: change in [-1, 1] (see pfr_diff_change) to "#rrggbb"; 0 is neutral grey. */
void pfr_diff_color(double change, char out[8]);

/* "1.23 s", "512 MiB", "12.3k" from a value in unit; per_second appends "/s". */
char *pfr_format_value(double v, const char *unit, bool per_second, char *buf, size_t len);

/* Unit of a profile type name "src:name:unit" (its last field); "" if none. */
const char *pfr_type_unit(const char *type);

/* ---- names in text output ----
 * Service, label and function names come from outside (cgroups, binaries, scraped profiles) and
 * may hold anything. In text written to a terminal or a line-based file a control character
 * (C0, DEL, C1) or a byte that is not UTF-8 is written as \n, \t, \r, \xNN or \u00NN, so a
 * name can neither break a line nor drive the terminal. */
enum {
    PFR_TEXT_QUOTE = 1,     /* a name that is empty or has a space, '"', '\' or anything escaped
                               is put in double quotes, with \" and \\: lists stay unambiguous */
    PFR_TEXT_SEMICOLON = 2, /* folded stacks: ';' written as \x3b (frames are separated by ';'),
                               and in a name that is escaped every '\' as \\, so that each
                               name reads back to its bytes (pfr_names.h, PFR_NAME_FOLDED) */
};
/* The escaped name (flags: PFR_TEXT_*) in buf, NUL-terminated; a name too long for it is cut
 * before an escape or a character and ends with "...". Returns buf. */
char *pfr_text_escape(const char *name, unsigned flags, char *buf, size_t len);
/* The same written to out. */
void pfr_text_put(FILE *out, const char *name, unsigned flags);

/* ---- renderers ---- */
/* Collapsed stacks "root;child;leaf value", root first, one line per stack with self > 0.
 * Values are rounded to integers. Plain flame graphs only. */
int pfr_render_folded(FILE *out, const pfr_tree *t, const pfr_render_opts *o);
/* Table of the heaviest functions (self, total, percent), or of the largest changes for a diff. */
int pfr_render_top(FILE *out, const pfr_tree *t, const pfr_render_opts *o);
/* JSON document: metadata, package colours and the nested tree (format in docs/query.md).
 * meta_json, if not NULL, is a JSON object text merged into the top level (range, filters). */
int pfr_render_json(FILE *out, const pfr_tree *t, const pfr_render_opts *o, const char *meta_json);
/* Self-contained SVG with tooltips, click-to-zoom and a search box (inline script). */
int pfr_render_svg(FILE *out, const pfr_tree *t, const pfr_render_opts *o);
/* One self-contained HTML page (inline CSS/JS and data; no external URL). */
int pfr_render_html(FILE *out, const pfr_tree *t, const pfr_render_opts *o, const char *meta_json);

/* The page's script and style, for a web server that serves them itself. */
extern const char pfr_asset_flame_js[];
extern const char pfr_asset_flame_css[];
extern const char pfr_asset_svg_js[];

#ifdef __cplusplus
}
#endif
#endif
