/* A syscall-heavy workload: most of its time is in the kernel (read() of /dev/zero clears user
 * memory), so its stacks have kernel frames on top of user frames. */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

__attribute__((noinline)) void pfr_do_reads(int fd)
{
    for (int i = 0; i < 16; i++)
        if (read(fd, buf, sizeof(buf)) < 0)
            exit(1);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0)
        return 1;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        pfr_do_reads(fd);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    close(fd);
    return 0;
}
