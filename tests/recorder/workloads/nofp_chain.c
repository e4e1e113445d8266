/*
 * A call chain built without frame pointers (-O2 -fomit-frame-pointer): main -> chain_a ->
 * chain_b -> chain_leaf, the leaf spinning. Prints the functions' addresses on its first line
 * (so a test can place return addresses without a symbolizer), then spins for argv[1] seconds.
 * With a second argument "syscall" the leaf spends its time in getppid(2) instead: samples
 * taken in the kernel, whose user stacks start from the task's saved registers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static int in_kernel;

__attribute__((noinline)) unsigned long chain_leaf(unsigned long x)
{
    if (in_kernel) {
        for (int i = 0; i < 200; i++)
            x += (unsigned long)syscall(SYS_getppid);
        return x;
    }
    for (int i = 0; i < 20000; i++)
        x = x * 6364136223846793005ul + 1442695040888963407ul;
    return x;
}

/* the arrays make each caller adjust rsp, as real functions do */
__attribute__((noinline)) unsigned long chain_b(unsigned long x)
{
    volatile unsigned long pad[3] = {x, x + 1, x + 2};
    return chain_leaf(pad[1]) + pad[2];
}

/* An over-aligned local beside a variable-length array: gcc realigns the stack through a DRAP
 * register (its CFI: CFA = *(rbp - 8), the caller's rbp at [rbp]). */
__attribute__((noinline)) unsigned long chain_a(unsigned long x)
{
    volatile unsigned long pad[5] __attribute__((aligned(64))) = {x, x, x, x, x};
    volatile char vla[(x & 7) + 8];
    vla[0] = (char)x;
    return chain_b(pad[3] + (unsigned long)vla[0]) ^ pad[4];
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 3;
    in_kernel = argc > 2 && strcmp(argv[2], "syscall") == 0;
    printf("chain_a=%p chain_b=%p chain_leaf=%p main=%p\n", (void *)chain_a, (void *)chain_b,
           (void *)chain_leaf, (void *)main);
    fflush(stdout);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 100; i++)
            sink += chain_a(sink + (unsigned long)i);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    return 0;
}
