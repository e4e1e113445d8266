/*
 * pfr_names: names (services, types, labels, frames) as pfr prints them and reads them back.
 *
 * A name is bytes, as the ring holds it: not always UTF-8 (a process may call itself anything),
 * and it may hold a backslash (systemd writes '-' in a unit name as \x2d). Printed, every name
 * must stay apart from every other and read back to its bytes; a name that needs nothing is
 * printed as it is.
 *
 *   PFR_NAME_JSON    JSON strings, and the names the query arguments take (--service, service=,
 *                    label=, type): a byte that is not UTF-8 is written \xHH (HH 80-ff).
 *   PFR_NAME_FOLDED  folded stacks: also ';' as \x3b, control characters as \n, \t, \r, \xHH or
 *                    \uHHHH (render.c writes them).
 *
 * A name is plain when it needs no escape and holds no text that reads as one (in JSON form "\\"
 * or \xHH with HH 80-ff; in folded form "\\", \xHH, \uHHHH, \n, \t, \r): it is printed as it
 * is. Any other name is escaped whole: its escapes as above and every backslash doubled. Reading
 * back turns each escape of the form into its bytes and leaves any other text as it is, so it
 * gives back every name exactly, plain or not.
 */
#ifndef PFR_NAMES_H
#define PFR_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "pfr_buf.h"

typedef enum pfr_name_form {
    PFR_NAME_JSON,
    PFR_NAME_FOLDED,
} pfr_name_form;

/* The escape of form f at s (n > 0 bytes, s[0] == '\\'), if a reader takes it for one: its
 * length, and the bytes it stands for in out[*outlen]; 0 when the backslash stands for itself. */
size_t pfr_name_escape_at(const char *s, size_t n, pfr_name_form f, char out[4], size_t *outlen);

/* NULL when name is printed as it is in JSON form; else its printed form, malloc'ed (the
 * caller's). *err is -ENOMEM when that could not be made, else 0. */
char *pfr_name_json(const char *name, int *err);

/* The bytes the printed name s (n bytes) stands for in form f, appended to out (the inverse of
 * printing; any text reads as something). 0 or -ENOMEM. */
int pfr_name_read(const char *s, size_t n, pfr_name_form f, pfr_buf *out);

/* NULL when the printed name s stands for itself in form f; else the bytes it stands for,
 * NUL-terminated and malloc'ed (the caller's); a NUL escape ends the name early. *err is -ENOMEM
 * when that could not be made, else 0. */
char *pfr_name_parse(const char *s, pfr_name_form f, int *err);

#endif
