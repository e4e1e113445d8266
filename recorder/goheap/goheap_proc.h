/* goheap_proc: the little the Go heap reader needs from /proc. */
#ifndef PFR_GOHEAP_PROC_H
#define PFR_GOHEAP_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* starttime (field 22, clock ticks after boot) and startstack (field 28, randomised anew by
 * every exec) from the text of /proc/PID/stat. 0 or -EBADMSG. */
int pfr_goheap_parse_stat(const char *text, size_t len, uint64_t *starttime, uint64_t *startstack);
/* The same, read from <proc_root>/<pid>/stat: 0, -ESRCH if gone, or a negative errno. */
int pfr_goheap_read_stat(const char *proc_root, pid_t pid, uint64_t *starttime,
                         uint64_t *startstack);

/* Load bias of a position-independent executable: find its mapping of file offset
 * page_down(load_offset) in <proc_root>/<pid>/maps (matched by device and inode, or by path),
 * bias = mapping start - page_down(load_vaddr). 0, -ENOENT if not mapped, or a negative errno. */
int pfr_goheap_read_bias(const char *proc_root, pid_t pid, const struct stat *exe,
                         const char *exe_path, uint64_t load_vaddr, uint64_t load_offset,
                         uint64_t *bias);

#endif
