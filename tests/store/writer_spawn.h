/* Running store_writer_proc from a test and reading the chunks it reports as committed. */
#ifndef STORE_WRITER_SPAWN_H
#define STORE_WRITER_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* committed.n of a pin the writer made (pfr_store_pin_add returned), or released */
#define WRITER_PIN       (-1L)
#define WRITER_UNPIN     (-2L)
#define WRITER_UNPINNING (-3L) /* said before the release: it may or may not have committed */

struct committed {
    int64_t id;
    long n;        /* index of the profile in the writer's generator */
    uint64_t seed; /* the writer's generator seed */
};

struct writer_run {
    pid_t pid;
    int fd; /* read end of the writer's stdout */
    char buf[256];
    size_t len;
};

/* Start `exe db seed count max_bytes`; stdout is a pipe (non-blocking if nonblock). */
int pfr_writer_start(struct writer_run *w, const char *exe, const char *db, uint64_t seed,
                     long count, uint64_t max_bytes, bool nonblock);
/* Read the lines available (all of them until EOF if the pipe blocks) and append records to
 * *out (grown with realloc). Returns 1 at EOF, 0 otherwise. */
int pfr_writer_read(struct writer_run *w, uint64_t seed, struct committed **out, size_t *n,
                    size_t *cap);
/* waitpid; returns the raw status. */
int pfr_writer_wait(struct writer_run *w);

#endif
