/* The shared library of the callbacks program: calls back into the program that loaded it, so a
 * stack from the callback crosses this library's frame (built like the program: without frame
 * pointers, or with them). */
void uwcb_each(void (*fn)(void *, int), void *arg, int n);

volatile int uwcb_calls;

__attribute__((noinline)) void uwcb_each(void (*fn)(void *, int), void *arg, int n)
{
    for (int i = 0; i < n; i++)
        fn(arg, i);
    uwcb_calls += n; /* after the loop: the last callback is not a tail call */
}
