/* Benchmark workload: spins forever through deep-ish call stacks (depth 20..40, several
 * distinct stacks) and counts finished work units in a shared file (argv[1]) so the harness can
 * measure the work rate while a profiler runs. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define UNIT 20000ul

static volatile uint64_t *counter;

__attribute__((noinline)) static void spin(unsigned long n)
{
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++)
        x += i;
}

__attribute__((noinline)) static void descend_b(int d);

__attribute__((noinline)) static void descend_a(int d)
{
    if (d <= 0)
        spin(UNIT);
    else
        descend_b(d - 1);
}

__attribute__((noinline)) static void descend_b(int d)
{
    if (d <= 0)
        spin(UNIT);
    else
        descend_a(d - 1);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return 1;
    counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (counter == MAP_FAILED)
        return 1;
    for (uint64_t i = 0;; i++) {
        descend_a(20 + (int)(i % 21));
        __atomic_store_n(counter, *counter + 1, __ATOMIC_RELAXED);
    }
}
