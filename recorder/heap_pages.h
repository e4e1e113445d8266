/* The recorder's heap on transparent huge pages.
 *
 * Every interval the recorder's threads wake after seconds asleep and walk megabytes of their
 * own tables (symbols, frames, the profiles being built, the ring writer's). With 4 KiB pages
 * each touch of memory gone cold is a page-table walk, in a virtual machine a walk of two
 * tables; on 2 MiB pages there are 512 times fewer of them. glibc's malloc puts its heap on
 * transparent huge pages when its tunable glibc.malloc.hugetlb is 1, and reads tunables only at
 * a program's start: so the recorder, once its configuration asks for it, runs itself again
 * with the tunable in its environment (pfr_heap_pages_exec). */
#ifndef PFR_HEAP_PAGES_H
#define PFR_HEAP_PAGES_H

#include <stdbool.h>
#include <stddef.h>

/* The environment variable set for the second start: its presence means "done, whatever came
 * of it" (glibc may have dropped the tunable), so the recorder never runs itself a third time.
 * It holds the process's name before the exec, given back to it; then it is unset. */
#define PFR_HEAP_PAGES_MARK "PFR_HEAP_PAGES_EXEC"

/* What the start should do, from its inputs alone:
 *   tunables  the environment's GLIBC_TUNABLES (NULL: unset);
 *   thp       the contents of /sys/kernel/mm/transparent_hugepage/enabled (NULL: unreadable);
 *   secure    AT_SECURE (glibc erases tunables from a privileged start's environment: the
 *             second start would not have it).
 * Returns true when the program should run again with GLIBC_TUNABLES = out (the tunables it had
 * and glibc.malloc.hugetlb=1); false to go on as it is (the tunable already set either way, huge
 * pages never available, a privileged start, or out too small). */
bool pfr_heap_pages_plan(const char *tunables, const char *thp, bool secure, char *out,
                         size_t outlen);

/* Whether the heap is on huge pages in this process (GLIBC_TUNABLES has glibc.malloc.hugetlb=1
 * and the kernel's mode is not "never"), for the log. */
bool pfr_heap_pages_huge(void);

/* Run /proc/self/exe again with argv and the tunable when pfr_heap_pages_plan says so: returns
 * only if it does not (0) or the exec failed (a negative errno, with why in err; the
 * environment is as it was). In the second start, gives the process its name back and returns
 * 0. Call first in main: before any thread starts and any descriptor is opened that the second
 * start must not inherit. */
int pfr_heap_pages_exec(char **argv, char *err, size_t errlen);

/* Near or over the memory budget: the heap as it is now back on small pages (MADV_NOHUGEPAGE),
 * so that a trim (malloc_trim) gives back the free 4 KiB pages inside its huge ones and
 * khugepaged makes no more of them; what the heap grows by later is on huge pages again. Returns
 * the bytes of heap marked (0 if none or the maps could not be read). */
size_t pfr_heap_pages_small(void);

#endif
