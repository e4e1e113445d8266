/* A temporary folder for the identity tests' on-disk metadata and fake /proc files (one per test
 * program, as a cmocka group's setup and teardown). */
#ifndef PFR_ID_TESTDIR_H
#define PFR_ID_TESTDIR_H

#include <stddef.h>

/* Make the folder (/tmp/pfr-<tag>-XXXXXX) / remove it with what it holds: 0 or -1. */
int id_testdir_setup(const char *tag);
int id_testdir_teardown(void);
/* tmpdir/rel, in one of 8 rotating buffers. */
const char *id_testdir_path(const char *rel);
/* Write len bytes to tmpdir/rel with its parent folders, whole at once (a temporary file
 * renamed: the resolver reads concurrently). Aborts the test on failure. */
void id_testdir_put(const char *rel, const char *content, size_t len);

#endif
