/*
 * goheap_mem: the "memory reader" the Go heap walker reads a process through.
 *
 * The walker never touches a process directly: it calls read() on a pfr_goheap_mem. Two backends
 * live here: a live process (process_vm_readv, falling back to pread of /proc/PID/mem) and a byte
 * buffer standing in for a process (unit tests and fuzzing). Tests may wrap either one to make a
 * process exit or exec in the middle of a walk.
 */
#ifndef PFR_GOHEAP_MEM_H
#define PFR_GOHEAP_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pfr_goheap_mem {
    void *ctx;
    /* Read up to len bytes at addr. Returns the number of bytes read, which is less than len when
     * the range runs into an unmapped page (a prefix is always contiguous from addr), or a
     * negative errno (-EFAULT when addr itself is unmapped, -ESRCH when the process is gone). */
    ssize_t (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
    /* Write len bytes at addr: 0 or a negative errno. May be NULL (read-only backend). */
    int (*write)(void *ctx, uint64_t addr, const void *buf, size_t len);
} pfr_goheap_mem;

/* ---- live process ---- */
typedef struct pfr_goheap_procmem {
    pid_t pid;
    char mem_path[64]; /* <proc_root>/<pid>/mem */
    int memfd;         /* opened lazily, -1 until needed */
    int use_pread;     /* process_vm_readv unavailable: read /proc/PID/mem instead */
    uint64_t reads;    /* system calls made by read() */
    uint64_t bytes;    /* bytes returned by read() */
} pfr_goheap_procmem;

/* Prepare pm for pid (no system call yet). proc_root is "/proc" unless testing. */
void pfr_goheap_procmem_init(pfr_goheap_procmem *pm, pid_t pid, const char *proc_root);
/* Close what init/read opened. */
void pfr_goheap_procmem_close(pfr_goheap_procmem *pm);
/* A reader over pm (pm must outlive it). */
pfr_goheap_mem pfr_goheap_procmem_reader(pfr_goheap_procmem *pm);

/* ---- byte buffer posing as process memory: [base, base + len) is mapped, nothing else ---- */
typedef struct pfr_goheap_bufmem {
    uint8_t *buf; /* borrowed; written to by write() */
    size_t len;
    uint64_t base;
    uint64_t reads; /* calls to read() */
} pfr_goheap_bufmem;

pfr_goheap_mem pfr_goheap_bufmem_reader(pfr_goheap_bufmem *bm);

#endif
