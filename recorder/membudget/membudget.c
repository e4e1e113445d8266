/* pfr_membudget: the recorder's one memory budget (see pfr_membudget.h). */
#include "pfr_membudget.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pfr_clock.h"

/* How old a measure a decision accepts before it measures again itself. */
#define FRESH_NS 1000000000LL

struct pfr_membudget {
    uint64_t budget;    /* bytes; 0 = off */
    char statm[256];    /* where the resident set is read */
    int statm_fd;       /* ... kept open (-1 until the first read): read again from its start, so
                         * a measure every second costs one syscall, not three */
    uint64_t page;      /* bytes a page */
    pthread_mutex_t mu; /* one measure at a time: statm_fd and the measure's stores */
    int64_t fresh_ns;   /* see FRESH_NS */
    atomic_int_fast64_t last_ns; /* monotonic time of the last measure (0: none) */
    atomic_int level;            /* enum pfr_mem_level */
    atomic_uint_fast64_t rss, peak, over;
    atomic_uint_fast64_t refused[PFR_MEM_NUSERS];
};

enum pfr_mem_level pfr_membudget_next_level(enum pfr_mem_level prev, uint64_t rss, uint64_t budget)
{
    if (budget == 0)
        return PFR_MEM_OK;
    if (rss > budget)
        return PFR_MEM_OVER;
    if (rss > budget / 8 * 7)
        return prev == PFR_MEM_OVER ? PFR_MEM_OVER : PFR_MEM_TIGHT;
    if (rss > budget / 4 * 3)
        return prev == PFR_MEM_OK ? PFR_MEM_OK : PFR_MEM_TIGHT;
    return PFR_MEM_OK;
}

int pfr_membudget_new(uint64_t budget_bytes, const char *statm_path, pfr_membudget **out)
{
    pfr_membudget *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->budget = budget_bytes;
    b->statm_fd = -1;
    b->fresh_ns = FRESH_NS;
    pthread_mutex_init(&b->mu, NULL);
    snprintf(b->statm, sizeof(b->statm), "%s", statm_path ? statm_path : "/proc/self/statm");
    long page = sysconf(_SC_PAGESIZE);
    b->page = page > 0 ? (uint64_t)page : 4096;
    *out = b;
    return 0;
}

void pfr_membudget_free(pfr_membudget *b)
{
    if (!b)
        return;
    if (b->statm_fd >= 0)
        close(b->statm_fd);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* The resident set in bytes (statm's second field, in pages), or -errno. */
static int64_t read_rss(pfr_membudget *b)
{
    if (b->statm_fd < 0 && (b->statm_fd = open(b->statm, O_RDONLY | O_CLOEXEC)) < 0)
        return -errno;
    char buf[128];
    /* procfs renders the file again for a read at offset 0 */
    ssize_t n = pread(b->statm_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) {
        int e = n < 0 ? errno : EINVAL;
        close(b->statm_fd);
        b->statm_fd = -1; /* opened again at the next measure */
        return -e;
    }
    buf[n] = '\0';
    unsigned long long size, resident;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return -EINVAL;
    return (int64_t)(resident * b->page);
}

/* A measure, b->mu held. */
static int measure(pfr_membudget *b)
{
    int64_t rss = read_rss(b);
    if (rss < 0)
        return (int)rss;
    atomic_store(&b->last_ns, pfr_clock_mono_ns());
    atomic_store(&b->rss, (uint64_t)rss);
    if ((uint64_t)rss > atomic_load(&b->peak))
        atomic_store(&b->peak, (uint64_t)rss);
    enum pfr_mem_level l = pfr_membudget_next_level((enum pfr_mem_level)atomic_load(&b->level),
                                                    (uint64_t)rss, b->budget);
    if (l == PFR_MEM_OVER)
        atomic_fetch_add(&b->over, 1);
    atomic_store(&b->level, (int)l);
    return (int)l;
}

int pfr_membudget_update(pfr_membudget *b)
{
    pthread_mutex_lock(&b->mu);
    int rc = measure(b);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Before a decision: measure again when the last measure is older than fresh_ns, so that the
 * daemon need not wake every second to measure a recorder nothing asks of. A measure under way
 * on another thread is not waited for (its result lands within microseconds). */
static void refresh(pfr_membudget *b)
{
    if (pfr_clock_mono_ns() - atomic_load(&b->last_ns) < b->fresh_ns)
        return;
    if (pthread_mutex_trylock(&b->mu) != 0)
        return;
    if (pfr_clock_mono_ns() - atomic_load(&b->last_ns) >= b->fresh_ns)
        measure(b);
    pthread_mutex_unlock(&b->mu);
}

void pfr_membudget_set_fresh(pfr_membudget *b, int64_t max_age_ns)
{
    b->fresh_ns = max_age_ns;
}

enum pfr_mem_level pfr_membudget_level(const pfr_membudget *b)
{
    return b ? (enum pfr_mem_level)atomic_load(&b->level) : PFR_MEM_OK;
}

/* pfr_membudget_allow and pfr_membudget_allow_brief (brief: held only while the asker runs). */
static bool allow(pfr_membudget *b, enum pfr_mem_user user, uint64_t bytes, bool brief)
{
    if (!b || b->budget == 0)
        return true;
    refresh(b);
    enum pfr_mem_level l = pfr_membudget_level(b);
    uint64_t rss = atomic_load(&b->rss);
    /* a large cost is paid only if it leaves the resident set below TIGHT: builds of large files
     * paid at OK made the peaks (a 200 MB executable's unwind table holds ~25 MiB while built) */
    bool small = bytes <= b->budget / 64;
    bool fits = rss + bytes <= b->budget / 8 * 7;
    /* a brief one also near the budget, if its peak stays clear of the budget */
    bool passes = brief && rss + bytes <= b->budget / 16 * 15;
    bool ok = l != PFR_MEM_OVER && (small || (l == PFR_MEM_OK && fits) || passes);
    if (!ok && user >= 0 && user < PFR_MEM_NUSERS)
        atomic_fetch_add(&b->refused[user], 1);
    return ok;
}

bool pfr_membudget_allow(pfr_membudget *b, enum pfr_mem_user user, uint64_t bytes)
{
    return allow(b, user, bytes, false);
}

bool pfr_membudget_allow_brief(pfr_membudget *b, enum pfr_mem_user user, uint64_t bytes)
{
    return allow(b, user, bytes, true);
}

int64_t pfr_membudget_headroom(pfr_membudget *b)
{
    if (!b || b->budget == 0)
        return INT64_MAX;
    refresh(b);
    return (int64_t)(b->budget / 4 * 3) - (int64_t)atomic_load(&b->rss);
}

int64_t pfr_membudget_brief_room(pfr_membudget *b)
{
    if (!b || b->budget == 0)
        return INT64_MAX;
    pfr_membudget_update(b); /* now: what a build grew to a moment ago counts */
    int64_t room = (int64_t)(b->budget / 16 * 15) - (int64_t)atomic_load(&b->rss);
    return pfr_membudget_level(b) == PFR_MEM_OVER || room < 0 ? 0 : room;
}

void pfr_membudget_count_refused(pfr_membudget *b, enum pfr_mem_user user)
{
    if (b && user >= 0 && user < PFR_MEM_NUSERS)
        atomic_fetch_add(&b->refused[user], 1);
}

void pfr_membudget_stats_get(const pfr_membudget *b, pfr_membudget_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (!b)
        return;
    st->budget_bytes = b->budget;
    st->rss_bytes = atomic_load(&b->rss);
    st->peak_bytes = atomic_load(&b->peak);
    st->level = atomic_load(&b->level);
    st->over_intervals = atomic_load(&b->over);
    for (int i = 0; i < PFR_MEM_NUSERS; i++)
        st->refused[i] = atomic_load(&b->refused[i]);
}

uint64_t pfr_membudget_cache_bound(pfr_membudget *b, uint64_t max, uint64_t used)
{
    int64_t room = pfr_membudget_headroom(b);
    if (room == INT64_MAX)
        return max;
    uint64_t floor = max / 4;
    if (floor > b->budget / 8)
        floor = b->budget / 8;
    int64_t want = (int64_t)used + room / 2;
    return want <= (int64_t)floor ? floor : (uint64_t)want >= max ? max : (uint64_t)want;
}
