/*
 * pfr_membudget: one memory budget for the whole recorder (its resident set, as the kernel
 * counts it for the unit's MemoryMax), and the level that tells every cache and builder how to
 * behave: pay new costs freely (OK), only small or brief ones (TIGHT), or none (OVER). The daemon's
 * main thread measures at each interval's end (every second while not OK); the sources' threads
 * ask before they pay for a file (a symbol table, an unwind table, a Go heap walk), measuring
 * again first when the last measure is more than a second old, and count what they refused. So the
 * recorder degrades (names fewer frames, walks stacks by frame pointers, drops cold caches)
 * instead of growing past the budget, and says so in its metrics.
 *
 * Levels (with hysteresis, so a recorder near its budget does not flap):
 *   OVER   resident set above the budget;
 *   TIGHT  above 7/8 of it (or OVER until it falls below that);
 *   OK     below 3/4 of it (or TIGHT until it falls below that).
 *
 * Thread-safe: every function from any thread.
 * Constructor pfr_membudget_new, destructor pfr_membudget_free. A NULL budget (tests, offline
 * tools) or a budget of 0 bytes (off) allows everything.
 */
#ifndef PFR_MEMBUDGET_H
#define PFR_MEMBUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pfr_membudget pfr_membudget;

enum pfr_mem_level { PFR_MEM_OK = 0, PFR_MEM_TIGHT = 1, PFR_MEM_OVER = 2 };

/* Who asked, for the refusal counters. */
enum pfr_mem_user {
    PFR_MEM_SYMBOLS = 0, /* a file's symbol table (or DWARF, perf map) */
    PFR_MEM_UNWIND,      /* a file's unwind table */
    PFR_MEM_GOHEAP,      /* a Go process's heap profile */
    PFR_MEM_NUSERS
};

typedef struct pfr_membudget_stats {
    uint64_t budget_bytes;   /* 0: off */
    uint64_t rss_bytes;      /* at the last measure */
    uint64_t peak_bytes;     /* the most measured */
    int level;               /* enum pfr_mem_level */
    uint64_t over_intervals; /* measures found OVER */
    uint64_t refused[PFR_MEM_NUSERS];
} pfr_membudget_stats;

/* budget_bytes 0: off. statm_path NULL: "/proc/self/statm" (a test gives its own). The file is
 * opened at the first measure and kept open (read again from its start each time; opened again
 * after a read that fails or yields nothing). @return 0 or -ENOMEM. */
int pfr_membudget_new(uint64_t budget_bytes, const char *statm_path, pfr_membudget **out);
void pfr_membudget_free(pfr_membudget *b);

/* Measure the resident set now and set the level. @return the level, or a negative errno when
 * it cannot be read (the level stays). */
int pfr_membudget_update(pfr_membudget *b);

/* The age past which a decision (allow, headroom, cache bound) measures again first: a second
 * unless set (tests: 0, every decision measures). */
void pfr_membudget_set_fresh(pfr_membudget *b, int64_t max_age_ns);

/* The level at the last measure (OK when b is NULL or off). */
enum pfr_mem_level pfr_membudget_level(const pfr_membudget *b);

/* May `user` pay for something of about `bytes` now? Something small (at most 1/64 of the
 * budget): unless OVER. Something larger: only at OK, and only if the resident set plus bytes
 * stays below TIGHT (7/8 of the budget). A refusal is counted. b NULL: yes. */
bool pfr_membudget_allow(pfr_membudget *b, enum pfr_mem_user user, uint64_t bytes);

/* As pfr_membudget_allow, for something held only briefly: freed before the asker's call
 * returns, nothing of it kept in the resident set (an unwind table, built or read back from
 * disk, is handed to the kernel's map and freed). Besides what pfr_membudget_allow allows, such a
 * cost is paid near the budget (TIGHT) too, if the resident set plus bytes stays below 15/16 of the
 * budget: its peak passes, and what it brings (a process's native stacks) would otherwise be
 * refused for as long as the recorder stays near the budget, which on a busy host can be the rest
 * of its run. Never over the budget. A refusal is counted. */
bool pfr_membudget_allow_brief(pfr_membudget *b, enum pfr_mem_user user, uint64_t bytes);

/* Bytes a brief cost may still take (pfr_membudget_allow_brief's ceiling, 15/16 of the budget,
 * less the resident set measured now): the bound a builder allowed to start keeps to as it
 * grows, whatever its estimate said. 0 when OVER or past the ceiling; INT64_MAX
 * when b is NULL or off. */
int64_t pfr_membudget_brief_room(pfr_membudget *b);

/* Count a refusal `user` decided later, past a bound the budget set (pfr_membudget_brief_room). */
void pfr_membudget_count_refused(pfr_membudget *b, enum pfr_mem_user user);

/* Bytes the resident set may still grow by, at a measure at most a second old, before it leaves OK
 * (3/4 of the budget); negative past it. A cache that grows by at most a share of it each time
 * stays within the budget with the others. INT64_MAX when b is NULL or off. */
int64_t pfr_membudget_headroom(pfr_membudget *b);

void pfr_membudget_stats_get(const pfr_membudget *b, pfr_membudget_stats *st);

/* The bound of a cache whose setting is max and which holds used bytes now: it may grow by half
 * of the headroom (the other half is for the rest of the recorder) and gives back half of what
 * the resident set is over, down to a floor of a quarter of max but never above an eighth of
 * the budget (a cache set far above the budget must not hold the recorder over it). max when b
 * is NULL or off. */
uint64_t pfr_membudget_cache_bound(pfr_membudget *b, uint64_t max, uint64_t used);

/* The level a resident set gives, from the level before (exposed for tests). */
enum pfr_mem_level pfr_membudget_next_level(enum pfr_mem_level prev, uint64_t rss, uint64_t budget);

#endif
