/* Helpers of the symbolizer tests: build the test programs, run one, read the addresses it
 * prints, find a marker's line in a source file. */
#ifndef PFR_SYM_TESTUTIL_H
#define PFR_SYM_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TU_MAX_SYMS 8

struct tu_child {
    pid_t pid;
    int in_fd; /* its stdin: closing it makes it exit */
    int nsyms;
    char names[TU_MAX_SYMS][64];
    uint64_t addrs[TU_MAX_SYMS];
};

/* Runs a shell command; returns its exit status (or -1). */
int pfr_tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Starts argv[0] with pipes and reads "name 0xaddr" lines until "ready". 0 or -1. */
int pfr_tu_start(struct tu_child *c, char *const argv[]);
/* The address printed under name (0 if none). */
uint64_t pfr_tu_addr(const struct tu_child *c, const char *name);
/* Closes its stdin and reaps it; returns its exit status. */
int pfr_tu_stop(struct tu_child *c);
/* 1-based line of the first line of path containing marker, or -1. */
int pfr_tu_marker_line(const char *path, const char *marker);
/* start and file offset of pid's mapping holding addr (read independently of the symbolizer). */
bool pfr_tu_mapping(pid_t pid, uint64_t addr, uint64_t *start, uint64_t *pgoff);
/* Does s end with suffix? */
bool pfr_tu_ends_with(const char *s, const char *suffix);

#endif
