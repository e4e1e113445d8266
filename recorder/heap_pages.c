/* The recorder's heap on transparent huge pages (heap_pages.h). */
#include "heap_pages.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "pfr_read_small.h"

#define TUNABLE  "glibc.malloc.hugetlb"
#define THP_MODE "/sys/kernel/mm/transparent_hugepage/enabled"
#define SELF_EXE "/proc/self/exe"
#define TUNABLES "GLIBC_TUNABLES"

/* Whether the kernel's mode (its file: "always [madvise] never", the chosen one bracketed)
 * gives huge pages to a heap that asks: not when unreadable or "never". */
static bool thp_available(const char *thp)
{
    return thp && strstr(thp, "[") && !strstr(thp, "[never]");
}

/* The value tunables (colon-separated name=value) give the tunable, or NULL if they do not set
 * it. */
static const char *tunable_value(const char *tunables)
{
    size_t n = strlen(TUNABLE);
    for (const char *p = tunables; p && *p;) {
        if (!strncmp(p, TUNABLE, n) && p[n] == '=')
            return p + n + 1;
        p = strchr(p, ':');
        p = p ? p + 1 : NULL;
    }
    return NULL;
}

bool pfr_heap_pages_plan(const char *tunables, const char *thp, bool secure, char *out,
                         size_t outlen)
{
    /* a tunable already set is an administrator's choice: it stands */
    if (secure || !thp_available(thp) || tunable_value(tunables))
        return false;
    int n = tunables && *tunables ? snprintf(out, outlen, "%s:%s=1", tunables, TUNABLE)
                                  : snprintf(out, outlen, "%s=1", TUNABLE);
    return n > 0 && (size_t)n < outlen;
}

/* The kernel's THP mode, read into buf; NULL when unreadable. */
static const char *read_thp_mode(char *buf, size_t len)
{
    return pfr_read_small(THP_MODE, buf, len) > 0 ? buf : NULL;
}

bool pfr_heap_pages_huge(void)
{
    const char *v = tunable_value(getenv(TUNABLES));
    char mode[128];
    return v && v[0] == '1' && (v[1] == ':' || v[1] == '\0') &&
           thp_available(read_thp_mode(mode, sizeof(mode)));
}

/* The second start: the process's name back (an exec names it after the file run, "exe"), so
 * that ps, top and pgrep show it as they did. */
static void second_start(const char *name)
{
    char comm[16];
    snprintf(comm, sizeof(comm), "%s", name);
    if (comm[0])
        prctl(PR_SET_NAME, comm);
    unsetenv(PFR_HEAP_PAGES_MARK);
}

/* The environment as it was before a second start that did not happen. */
static void restore_env(const char *saved)
{
    if (saved)
        setenv(TUNABLES, saved, 1);
    else
        unsetenv(TUNABLES);
    unsetenv(PFR_HEAP_PAGES_MARK);
}

int pfr_heap_pages_exec(char **argv, char *err, size_t errlen)
{
    char mode[128], value[4096], comm[16] = "";
    const char *old = getenv(TUNABLES), *mark = getenv(PFR_HEAP_PAGES_MARK);
    if (mark) {
        second_start(mark);
        return 0;
    }
    if (!pfr_heap_pages_plan(old, read_thp_mode(mode, sizeof(mode)), getauxval(AT_SECURE) != 0,
                             value, sizeof(value)))
        return 0;
    prctl(PR_GET_NAME, comm);
    char *saved = old ? strdup(old) : NULL;
    if (old && !saved) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int e;
    /* the mark holds the name (a name of "" still marks the second start) */
    if (setenv(TUNABLES, value, 1) || setenv(PFR_HEAP_PAGES_MARK, comm, 1)) {
        e = errno;
        snprintf(err, errlen, "setenv: %s", strerror(e));
    } else {
        execv(SELF_EXE, argv);
        e = errno;
        snprintf(err, errlen, "cannot run %s again: %s", SELF_EXE, strerror(e));
    }
    /* this start goes on with small pages */
    restore_env(saved);
    free(saved);
    return -e;
}

size_t pfr_heap_pages_small(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return 0;
    char line[512];
    size_t bytes = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        /* glibc's heap grows by sbrk: one or more VMAs named [heap], its own process's */
        if (!strstr(line, "[heap]") || sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi <= lo)
            continue;
        if (madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE) == 0)
            bytes += hi - lo;
    }
    fclose(f);
    return bytes;
}
