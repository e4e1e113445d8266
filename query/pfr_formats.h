/*
 * pfr_formats: the query tool's output formats, one descriptor per format (formats.c).
 *
 * A row says what the format can render (its inputs: a flame tree, a diff tree, a pprof
 * profile, a timeline, the ring's contents), which -o extensions select it, how the tree it
 * draws is built, and its render function. The commands of `pfr`, their --help, the format
 * inferred from -o and the error for a bad --format all read the table, so a new format is its
 * render function plus one row.
 *
 * Errors: render returns 0 or a negative errno (a failed write leaves errno on the stream).
 */
#ifndef PFR_FORMATS_H
#define PFR_FORMATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pfr_query.h"
#include "pfr_render.h"

/* What a format renders; each command hands over one of these. */
enum pfr_output_input {
    PFR_OUTPUT_TREE = 1u << 0,     /* pfr flame: a flame tree (side 0) */
    PFR_OUTPUT_DIFF = 1u << 1,     /* pfr diff: a tree with baseline and comparison */
    PFR_OUTPUT_PROFILE = 1u << 2,  /* pfr flame / export: the merged pprof profile */
    PFR_OUTPUT_TIMELINE = 1u << 3, /* pfr timeline */
    PFR_OUTPUT_LS = 1u << 4,       /* pfr ls */
};

enum pfr_output_flags {
    PFR_OUTPUT_META = 1u << 0,   /* trees: wants pfr_query_meta_json (range, filters) */
    PFR_OUTPUT_STACKS = 1u << 1, /* trees: reads the stacks only, not the merged nodes */
    PFR_OUTPUT_BINARY = 1u << 2, /* never written to a terminal */
};

/* The input of one render call: input says which fields are set. */
typedef struct pfr_output_data {
    enum pfr_output_input input;
    const pfr_tree *tree;         /* TREE, DIFF */
    const pfr_render_opts *opts;  /* TREE, DIFF */
    const char *meta;             /* TREE, DIFF with PFR_OUTPUT_META: JSON object text */
    const pfr_profile *profile;   /* PROFILE */
    const pfr_timeline *timeline; /* TIMELINE */
    const pfr_query_plan *plan;   /* TIMELINE */
    int width;                    /* TIMELINE: bar columns (0 = 50) */
    const pfr_ls *ls;             /* LS */
    size_t values;                /* LS: label values and gaps shown per service */
} pfr_output_data;

typedef struct pfr_output_format {
    const char *name;              /* the --format value */
    const char *const *extensions; /* NULL-terminated: -o FILE ending so selects it */
    unsigned inputs;               /* enum pfr_output_input: what render takes */
    unsigned flags;                /* enum pfr_output_flags */
    double min_share;              /* trees: frames under this share of the total are left
                                    * out unless --min-width says otherwise; 0 keeps all */
    const char *help;              /* a few words for --help */
    int (*render)(FILE *out, const pfr_output_data *d);
} pfr_output_format;

/* The row named name that renders one of inputs, or NULL. */
const pfr_output_format *pfr_output_format_find(const char *name, unsigned inputs);

/* The row whose extension ends path and that renders one of inputs, or NULL. */
const pfr_output_format *pfr_output_format_for_path(const char *path, unsigned inputs);

/* The names of the rows rendering one of inputs, "a, b or c", in buf. Returns buf. */
char *pfr_output_format_names(unsigned inputs, char *buf, size_t len);

/* --help lines for the rows rendering one of inputs: indent, name, help (and extensions). */
void pfr_output_format_help(FILE *out, unsigned inputs, const char *indent, bool extensions);

/* The share of the total under which fmt's tree leaves frames out, for --min-width given in
 * min_width (a share; 0 = not given, < 0 = keep everything). */
double pfr_output_format_share(const pfr_output_format *fmt, double min_width);

#endif
