#include "goheap_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE_SZ  4096u
#define MAX_IOVS 64u /* remote pages per process_vm_readv: 256 KiB */

void pfr_goheap_procmem_init(pfr_goheap_procmem *pm, pid_t pid, const char *proc_root)
{
    memset(pm, 0, sizeof(*pm));
    pm->pid = pid;
    pm->memfd = -1;
    snprintf(pm->mem_path, sizeof(pm->mem_path), "%s/%d/mem", proc_root ? proc_root : "/proc",
             (int)pid);
}

void pfr_goheap_procmem_close(pfr_goheap_procmem *pm)
{
    if (pm->memfd >= 0)
        close(pm->memfd);
    pm->memfd = -1;
}

static int open_mem(pfr_goheap_procmem *pm, int flags)
{
    if (pm->memfd >= 0 && flags == O_RDONLY)
        return 0;
    if (pm->memfd >= 0)
        close(pm->memfd);
    pm->memfd = open(pm->mem_path, flags | O_CLOEXEC);
    if (pm->memfd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    return 0;
}

static ssize_t pread_mem(pfr_goheap_procmem *pm, uint64_t addr, void *buf, size_t len)
{
    int rc = open_mem(pm, O_RDONLY);
    if (rc < 0)
        return rc;
    pm->reads++;
    ssize_t n = pread(pm->memfd, buf, len, (off_t)addr);
    if (n < 0)
        return errno == EIO ? -EFAULT : -errno;
    if (n == 0 && len > 0)
        return -EFAULT;
    return n;
}

/* process_vm_readv stops at the first remote iovec it cannot read and never splits one, so
 * one iovec per page turns a fault part-way into a short read instead of a failure. */
static ssize_t proc_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    pfr_goheap_procmem *pm = ctx;
    if (len == 0)
        return 0;
    if (pm->use_pread)
        goto fallback;
    struct iovec local = {buf, len};
    struct iovec remote[MAX_IOVS];
    size_t n = 0, done = 0;
    uint64_t a = addr;
    while (done < len && n < MAX_IOVS) {
        size_t chunk = PAGE_SZ - (size_t)(a % PAGE_SZ);
        if (chunk > len - done)
            chunk = len - done;
        remote[n].iov_base = (void *)(uintptr_t)a;
        remote[n].iov_len = chunk;
        n++;
        a += chunk;
        done += chunk;
    }
    local.iov_len = done;
    pm->reads++;
    ssize_t got = process_vm_readv(pm->pid, &local, 1, remote, n, 0);
    if (got < 0) {
        if (errno == ENOSYS || errno == EPERM) {
            pm->use_pread = 1;
            goto fallback;
        }
        return -errno;
    }
    if (got == 0)
        return -EFAULT;
    pm->bytes += (uint64_t)got;
    return got;
fallback:;
    ssize_t r = pread_mem(pm, addr, buf, len);
    if (r > 0)
        pm->bytes += (uint64_t)r;
    return r;
}

/* Writes go through /proc/PID/mem: it works on any mapping the kernel lets root poke. */
static int proc_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
    pfr_goheap_procmem *pm = ctx;
    int fd = open(pm->mem_path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    ssize_t n = pwrite(fd, buf, len, (off_t)addr);
    int err = n < 0 ? -errno : ((size_t)n == len ? 0 : -EFAULT);
    close(fd);
    return err == -EIO ? -EFAULT : err;
}

pfr_goheap_mem pfr_goheap_procmem_reader(pfr_goheap_procmem *pm)
{
    pfr_goheap_mem m = {.ctx = pm, .read = proc_read, .write = proc_write};
    return m;
}

static ssize_t buf_read(void *ctx, uint64_t addr, void *out, size_t len)
{
    pfr_goheap_bufmem *bm = ctx;
    bm->reads++;
    if (addr < bm->base || addr - bm->base >= bm->len)
        return -EFAULT;
    size_t off = (size_t)(addr - bm->base);
    size_t n = bm->len - off < len ? bm->len - off : len;
    memcpy(out, bm->buf + off, n);
    return (ssize_t)n;
}

static int buf_write(void *ctx, uint64_t addr, const void *in, size_t len)
{
    pfr_goheap_bufmem *bm = ctx;
    if (addr < bm->base || addr - bm->base > bm->len || bm->len - (addr - bm->base) < len)
        return -EFAULT;
    memcpy(bm->buf + (addr - bm->base), in, len);
    return 0;
}

pfr_goheap_mem pfr_goheap_bufmem_reader(pfr_goheap_bufmem *bm)
{
    pfr_goheap_mem m = {.ctx = bm, .read = buf_read, .write = buf_write};
    return m;
}
