/*
 * out_file: where `pfr ... -o PATH` writes, without ever destroying what PATH named.
 *
 * A regular file (or a symlink to one, which stays a symlink) and a path that does not exist
 * yet are written to a temporary file beside the target and renamed over it once complete: a
 * failed write leaves the old file as it was. Anything else (a device such as /dev/stdout or
 * /dev/full, a pipe, a socket) is written in place, and is never removed.
 */
#ifndef PFR_OUT_FILE_H
#define PFR_OUT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct pfr_out_file {
    FILE *f;
    char *target; /* the file renamed over (symlinks resolved); NULL when written in place */
    char *tmp;    /* the temporary file beside it */
    char *name;   /* the path given, for messages */
} pfr_out_file;

/* Open path for writing. 0, or -errno with a reason in err. */
int pfr_out_file_open(const char *path, pfr_out_file *out, char *err, size_t errlen);
/* Finish: ok and every write good, the output takes the target's place; otherwise the
 * temporary file is removed and the target stays as it was. 0, or -errno with a reason in err
 * (a failed write, flush, close or rename). */
int pfr_out_file_close(pfr_out_file *out, bool ok, char *err, size_t errlen);

#endif
