/*
 * Checks for the tests that are plain programs rather than cmocka suites (they run real
 * processes or the real kernel and report every failure of a run, not just the first).
 *
 * CHECK(cond, fmt, ...): if cond is false, prints where, the condition and the message, and
 * counts it in check_failures; the test goes on. REQUIRE: the same, then exits with status 1.
 * Each evaluates cond once: it is often the action itself.
 */
#ifndef PFR_CHECK_H
#define PFR_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures __attribute__((unused)); /* not every test counts */

#define CHECK_REPORT_(cond, ...)                                                                   \
    do {                                                                                           \
        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
    } while (0)

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            CHECK_REPORT_(cond, __VA_ARGS__);                                                      \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            CHECK_REPORT_(cond, __VA_ARGS__);                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
