/*
 * pfr_settings_int: what pfr_settings.c (the layers) and pfr_settings_doc.c (--help, the sample
 * file, the reference) share. Not for programs: they use pfr_settings.h.
 */
#ifndef PFR_SETTINGS_INT_H
#define PFR_SETTINGS_INT_H

#include "pfr_settings.h"

#define PFR_SETTINGS_NAME_MAX 64 /* bytes of a flag's or an instance's name */

/* A group bound to the struct it fills, or to a collector. */
struct pfr_settings_binding {
    const pfr_settings_group *g;
    void *conf;                      /* NULL for a collected group */
    pfr_settings_collect_fn collect; /* or NULL */
    void *ctx;
    unsigned char *set; /* per row: 0 = its default, else 1 + the enum pfr_settings_layer that
                         * set it last */
};

struct pfr_settings {
    char *program, *env_prefix, *usage; /* owned copies */
    char *sample_header;                /* or NULL */
    char *default_section;              /* or NULL */
    struct pfr_settings_binding *b;     /* in the order bound */
    size_t nb;
    bool stop_at_operand; /* getopt's '+' */
    bool no_config;       /* no --config */
};

bool pfr_settings_row_is_list(const pfr_setting *r);
/* May be given many times: a LIST or PFR_SETF_REPEAT row. */
bool pfr_settings_row_repeats(const pfr_setting *r);
/* The row an alias stands for (r itself if it is none); NULL if the table is wrong. */
const pfr_setting *pfr_settings_row_target(const pfr_settings_group *g, const pfr_setting *r);
/* Is r's key read from a file? An alias with a fixed value (--no-dwarf) is a flag only. */
bool pfr_settings_row_in_file(const pfr_setting *r);
/* r's flag name (without "--") in buf; false if it has none. */
bool pfr_settings_row_flag(const pfr_setting *r, char *buf, size_t n);
/* r's environment variables, ',' between them, in buf; false if none. */
bool pfr_settings_row_env(const pfr_settings *s, const pfr_setting *r, char *buf, size_t n);

#endif
