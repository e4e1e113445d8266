/* A process for the symbolizer tests: prints the addresses of known functions, "ready", then
 * waits for stdin to close. Markers in comments give the tests the expected line numbers, so
 * the one-line functions must stay one line. */
// clang-format off
#include <stdio.h>
#include <unistd.h>

#ifdef WITH_LIB
int lib_function(int x);
#endif

void *volatile probe_ret;

__attribute__((noinline)) int leaf_function(int x) { return x * 7 + 1; } /* LEAF_LINE */

__attribute__((noinline)) void probe(void)
{
    probe_ret = __builtin_return_address(0);
}

static inline __attribute__((always_inline)) void inlined_helper(void)
{
    probe();                           /* INLINE_CALL_LINE */
    __asm__ volatile("" ::: "memory"); /* keeps the call above out of tail position */
}

__attribute__((noinline)) void outer_function(void)
{
    inlined_helper(); /* OUTER_CALL_LINE */
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    outer_function();
    printf("leaf_function %p\n", (void *)leaf_function);
    printf("probe_ret %p\n", probe_ret);
#ifdef WITH_LIB
    printf("lib_function %p\n", (void *)lib_function);
#endif
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    return leaf_function(0) == 1 ? 0 : 1;
}
