/* gohelp: build the test Go programs with a given Debian toolchain and drive them over pipes
 * (shared by the integration tests and the benchmarks). */
#ifndef PFR_TEST_GOHELP_H
#define PFR_TEST_GOHELP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define GOHELP_SKIP 77 /* ctest SKIP_RETURN_CODE */

/* Build the Go package in src_dir into out with `go build <flags> -o out .` (flags may be "").
 * Serialised per toolchain with a lock file in work_dir. 0, or -1 with the output on stderr. */
int pfr_gohelp_build(const char *go, const char *src_dir, const char *flags, const char *out,
                     const char *work_dir);

typedef struct gohelp_proc {
    pid_t pid;
    int in, out;    /* its stdin (we write), its stdout (we read) */
    char buf[4096]; /* unread output */
    size_t len;
} gohelp_proc;

/* Start argv[0] with pipes on stdin/stdout (stderr inherited). 0 or -errno. */
int pfr_gohelp_start(gohelp_proc *p, char *const argv[]);
/* Next output line (without newline) into line; 0, -ETIMEDOUT, or -EPIPE at EOF. */
int pfr_gohelp_line(gohelp_proc *p, char *line, size_t cap, int timeout_ms);
/* Read lines until one starts with prefix; copies it to line. */
int pfr_gohelp_expect(gohelp_proc *p, const char *prefix, char *line, size_t cap, int timeout_ms);
/* Write a command line to its stdin. */
int pfr_gohelp_send(gohelp_proc *p, const char *cmd);
/* SIGKILL and reap (idempotent). */
void pfr_gohelp_kill(gohelp_proc *p);

/* The toolchain for version ("1.19") under /usr/lib/go-<version>/bin/go, or NULL. */
const char *pfr_gohelp_toolchain(const char *version, char *buf, size_t cap);

#endif
