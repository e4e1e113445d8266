/* Built with -fno-omit-frame-pointer: push rbp; mov rbp, rsp. Two calls, so not a leaf. */
extern int (*volatile uw_leaf_ptr)(int);

__attribute__((noinline)) int uw_fp(int x)
{
    return uw_leaf_ptr(x) * uw_leaf_ptr(x + 1);
}
