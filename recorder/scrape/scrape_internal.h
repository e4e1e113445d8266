/*
 * Internals of pfr_scrape shared by its modules. Not a public API.
 */
#ifndef PFR_SCRAPE_INTERNAL_H
#define PFR_SCRAPE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pfr_clock.h"
#include "pfr_hash.h"
#include "pfr_scrape.h"

#define SC_NS_PER_SEC  1000000000ll
#define SC_NS_PER_MSEC 1000000ll

/* Longest label key / value / service name / URL accepted from any source. */
#define SC_MAX_LABEL  512
#define SC_MAX_URL    2048
#define SC_MAX_LABELS 32
#define SC_ERROR_LEN  160

/* snprintf that never fails loudly (truncates); a no-op when len == 0. */
void pfr_scrape_errf(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copy src into dst (cap bytes), truncating; dst is always terminated. */
void pfr_scrape_copy(char *dst, size_t cap, const char *src);

/* A target as a discovery source describes it. Every string is owned (malloc'ed). */
struct sc_want {
    char *base; /* endpoints are <base>/<name>; ends in /debug/pprof */
    char *service;
    pfr_kv *labels; /* sorted by key; keys and values owned */
    size_t nlabels;
    enum pfr_scrape_source source;
    pid_t pid;          /* local discovery */
    uint64_t starttime; /* local discovery: /proc/PID/stat starttime */
    uint64_t netns;     /* local discovery: inode of its network namespace if not ours, else 0 */
    char *key;          /* identity: equal keys are the same target */
};

struct sc_wantlist {
    struct sc_want *v;
    size_t n, cap;
};

void pfr_scrape_want_free(struct sc_want *w);
void pfr_scrape_wantlist_free(struct sc_wantlist *l);
void pfr_scrape_wantlist_clear(struct sc_wantlist *l);
/* Deep copy of w appended to l. */
int pfr_scrape_wantlist_push_copy(struct sc_wantlist *l, const struct sc_want *w);
/* Append w, taking ownership of its strings (w is zeroed); on failure w is freed. */
int pfr_scrape_wantlist_push(struct sc_wantlist *l, struct sc_want *w);
/* Index of the want with this key, or -1. */
ssize_t pfr_scrape_wantlist_find(const struct sc_wantlist *l, const char *key);

/* Build a want: normalise url into a base, validate service and labels, add an instance label
 * (host:port of the URL) unless labels have one, sort labels, compute the key. */
int pfr_scrape_want_make(struct sc_want *w, const char *url, const char *service,
                         const pfr_kv *labels, size_t nlabels, enum pfr_scrape_source source,
                         pid_t pid, uint64_t starttime, char *err, size_t errlen);

/* Label keys: [A-Za-z_][A-Za-z0-9_.]*; values: 1..SC_MAX_LABEL bytes of printable non-space
 * ASCII or UTF-8. */
bool pfr_scrape_label_key_ok(const char *k);
bool pfr_scrape_label_value_ok(const char *v);

/* Exponential backoff of a target or endpoint. */
struct sc_backoff {
    unsigned consecutive;
    int64_t delay_ns;   /* current wait after the last failure */
    int64_t until_mono; /* not due before this (CLOCK_MONOTONIC) */
};
/* A failure at now: the wait doubles from interval up to max. Returns true when this is a new
 * backoff step (the first failure, or the wait grew), i.e. worth one log line. */
bool pfr_scrape_backoff_fail(struct sc_backoff *b, int64_t now, int64_t interval, int64_t max);
/* A success: returns true if it was failing (worth a "recovered" line). */
bool pfr_scrape_backoff_ok(struct sc_backoff *b);
/* Is an attempt due at now? Rounds do not start exactly on time, so a quarter interval early
 * counts as due. */
bool pfr_scrape_backoff_due(const struct sc_backoff *b, int64_t now, int64_t interval);

/* Read a whole small file (at most max bytes) into a NUL-terminated malloc'ed buffer. */
int pfr_scrape_read_file(const char *path, size_t max, char **out, size_t *len);

#endif
