/* Parse cost of a file's symbol tables: pfr_sym_elf_read_syms_fd() on each FILE, REPS times,
 * the least thread CPU time of one parse (open and libelf's headers included), and a digest of
 * what the parse kept (each symbol's address, extent and name, read back as lookups read it),
 * so two builds can be checked to keep the same symbols while one is faster.
 * Usage: bench_sym_parse REPS FILE... */
#include <fcntl.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sym_elf.h"

#define FNV_PRIME 1099511628211ull

static double thread_cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static uint64_t digest_of(struct pfr_sym_elf_syms *s, int fd)
{
    uint64_t d = 14695981039346656037ull;
    char name[PFR_ELF_MAX_NAME];
    for (size_t i = 0; i < s->n; i++) {
        d = (d ^ s->v[i].addr) * FNV_PRIME;
        d = (d ^ s->v[i].len) * FNV_PRIME;
        int k = pfr_sym_elf_read_name(s, fd, &s->v[i], name, sizeof(name));
        for (int j = 0; j < k; j++)
            d = (d ^ (unsigned char)name[j]) * FNV_PRIME;
    }
    return d;
}

/* One parse of path: its CPU time, and (digest non-NULL) the symbols kept and their digest. */
static int parse(const char *path, double *us, size_t *n, uint64_t *digest)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    double t0 = thread_cpu_us();
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    struct pfr_sym_elf_syms s;
    memset(&s, 0, sizeof(s));
    char err[256];
    int rc = e ? pfr_sym_elf_read_syms_fd(e, fd, &s, 64u << 20, NULL, err, sizeof(err)) : -1;
    *us = thread_cpu_us() - t0;
    if (rc == 0 && digest) {
        *n = s.n;
        *digest = digest_of(&s, fd);
    }
    pfr_sym_elf_syms_free(&s);
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: %s REPS FILE...\n", argv[0]);
        return 2;
    }
    int reps = atoi(argv[1]);
    elf_version(EV_CURRENT);
    for (int a = 2; a < argc; a++) {
        double best = 0;
        size_t n = 0;
        uint64_t digest = 0;
        for (int r = 0; r < reps; r++) {
            double us;
            if (parse(argv[a], &us, &n, r == 0 ? &digest : NULL) != 0) {
                fprintf(stderr, "%s: not parsed\n", argv[a]);
                return 1;
            }
            best = r == 0 || us < best ? us : best;
        }
        const char *base = strrchr(argv[a], '/');
        printf("%-28s %7zu symbols  %9.1f us  digest %016llx\n", base ? base + 1 : argv[a], n, best,
               (unsigned long long)digest);
    }
    return 0;
}
