/*
 * pfr_ini: INI files read with libinih, whole lines only and no key given twice.
 *
 * libinih reads a line in pieces of its buffer's size and takes the rest of a long line for a
 * new one: a long comment could set a key, a long value failed with no reason. Lines here are
 * taken whole up to PFR_INI_MAX_LINE bytes and a longer one is refused by number. A section or
 * key given twice (other than the keys listed as repeatable) is refused with both line numbers,
 * where libinih would let the last one win silently.
 */
#ifndef PFR_INI_H
#define PFR_INI_H

#include <stddef.h>
#include <stdio.h>

#define PFR_INI_MAX_LINE 4096 /* bytes of one line, its newline excluded */
#define PFR_INI_MAX_FILE (4u << 20)

/* libinih's handler: non-zero = accepted. */
typedef int (*pfr_ini_handler)(void *user, const char *section, const char *name,
                               const char *value);

/* Parse f (its name, for messages, is name). repeatable lists the keys that may be given many
 * times, as "section.key" (NULL-terminated; NULL = none). Returns 0; the number of the first line
 * the handler refused (> 0: its reason is the handler's to give); or -errno with the reason,
 * "NAME:LINE: ...", in err (a line too long, a duplicate, a file too large or unreadable). */
int pfr_ini_parse(FILE *f, const char *name, const char *const *repeatable, pfr_ini_handler h,
                  void *user, char *err, size_t errlen);

/* The same over text (len bytes). */
int pfr_ini_parse_text(const char *text, size_t len, const char *name,
                       const char *const *repeatable, pfr_ini_handler h, void *user, char *err,
                       size_t errlen);

#endif
