/*
 * pfr_read_small: a small text file (a /proc file: status, stat, comm, cgroup) read whole into a
 * caller's buffer in one call, as the process and JVM scans read them. /proc files are
 * generated at read time and may come in several reads; a signal may interrupt one.
 */
#ifndef PFR_READ_SMALL_H
#define PFR_READ_SMALL_H

#include <stddef.h>
#include <sys/types.h>

/* Up to cap-1 bytes of path into buf, NUL-terminated (a longer file is cut there), reads
 * interrupted by a signal retried. Returns the length, or -errno (open's or read's; -EINVAL
 * when cap is 0, buf untouched). */
ssize_t pfr_read_small(const char *path, char *buf, size_t cap);

#endif
