/* The unit tests' main program (-O2 -fomit-frame-pointer, lazy PLT): a leaf that pushes
 * nothing, a call into uw_fp.c (built with frame pointers), and printf through the PLT. */
#include <stdio.h>

int uw_fp(int x);

__attribute__((noinline)) int uw_leaf(int x)
{
    return x * 3 + 1;
}

/* called through a pointer so that neither call is inlined away */
int (*volatile uw_leaf_ptr)(int) = uw_leaf;

int main(int argc, char **argv)
{
    (void)argv;
    printf("%d\n", uw_leaf_ptr(argc) + uw_fp(argc));
    return 0;
}
