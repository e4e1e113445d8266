/* The sampler's unwind maps made for a test (real BPF maps: root), and its requests for files
 * this process maps. */
#ifndef PFR_TEST_UNWINDER_MAPS_H
#define PFR_TEST_UNWINDER_MAPS_H

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "pfr_check.h"
#include "unwinder.h"

struct maps {
    int rows, files, asked;
};

/* rows_flags: unwind_rows' map_flags (BPF_F_MMAPABLE: as the recorder makes it where the kernel
 * can, its rows written by copy, not by update syscalls). */
static inline struct maps maps_new_flags(uint32_t max_rows, uint32_t rows_flags)
{
    LIBBPF_OPTS(bpf_map_create_opts, ro, .map_flags = rows_flags);
    struct maps m = {
        bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_rows", sizeof(uint32_t),
                       sizeof(struct pfr_unwind_row), max_rows, &ro),
        bpf_map_create(BPF_MAP_TYPE_HASH, "unwind_files", sizeof(struct pfr_file_key),
                       sizeof(struct pfr_unwind_file), PFR_UNWIND_FILES_MAX, NULL),
        bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "unwind_asked", sizeof(struct pfr_file_key), 1,
                       PFR_UNWIND_FILES_MAX, NULL),
    };
    REQUIRE(m.rows >= 0 && m.files >= 0 && m.asked >= 0, "bpf_map_create: %s (root?)",
            strerror(errno));
    return m;
}

static inline struct maps maps_new(uint32_t max_rows)
{
    return maps_new_flags(max_rows, 0);
}

static inline void maps_close(struct maps *m)
{
    close(m->rows);
    close(m->files);
    close(m->asked);
}

/* Ask for the file's table as the sampler does (marked asked, then requested). */
static inline void request(pfr_unwinder *u, const struct maps *m, const struct pfr_unwind_req *r)
{
    struct pfr_file_key k = {.ino = r->ino, .dev = r->dev};
    uint8_t one = 1;
    bpf_map_update_elem(m->asked, &k, &one, BPF_ANY);
    pfr_unwinder_request(u, r);
}

/* The first len bytes of the file open at fd (0: all of it) mapped executable by this process,
 * and the sampler's request for that mapping. */
static inline struct pfr_unwind_req map_it(int fd, size_t len, void **at, size_t *mapped)
{
    struct stat st;
    REQUIRE(fstat(fd, &st) == 0, "stat");
    *mapped = len ? len : (size_t)st.st_size;
    *at = mmap(NULL, *mapped, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    REQUIRE(*at != MAP_FAILED, "mmap: %s", strerror(errno));
    return (struct pfr_unwind_req){.ev.type = PFR_EV_UNWIND,
                                   .ev.tgid = (uint32_t)getpid(),
                                   .start = (uint64_t)(uintptr_t)*at,
                                   .end = (uint64_t)(uintptr_t)*at +
                                          (((uint64_t)*mapped + 4095) & ~4095ull),
                                   .ino = st.st_ino,
                                   .dev = major(st.st_dev) << 20 | minor(st.st_dev)};
}

/* CPU time of this process's thread named comm (schedstat: nanoseconds), 0 if none. */
static inline uint64_t thread_cpu_ns(const char *comm)
{
    DIR *d = opendir("/proc/self/task");
    REQUIRE(d, "/proc/self/task: %s", strerror(errno));
    uint64_t ns = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[300], name[32] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        bool match = fgets(name, sizeof(name), f) && strncmp(name, comm, strlen(comm)) == 0 &&
                     (name[strlen(comm)] == '\n' || name[strlen(comm)] == '\0');
        fclose(f);
        snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
        if (match && (f = fopen(path, "re")) != NULL) {
            unsigned long long v = 0;
            if (fscanf(f, "%llu", &v) == 1)
                ns = v;
            fclose(f);
        }
    }
    closedir(d);
    return ns;
}

#endif
