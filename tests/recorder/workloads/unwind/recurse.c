/* Deep recursion: the leaf is called at the bottom of two recursions 90 calls deep.
 *
 *   main -> run -> descend_a -> descend_a -> ... (91 frames) -> hot_leaf   3 calls a round: 75%
 *               -> descend_b -> descend_b -> ... (91 frames) -> hot_leaf   1 call a round:  25%
 *
 * A whole stack is about 97 frames: under the 127 frames perf and pfr keep, and a few KiB of
 * stack (perf --call-graph dwarf copies 8 KiB). The recursive calls are not tail calls (a store
 * follows each), so the compiler cannot turn them into loops.
 * Usage: uw-recurse SECONDS; prints "truth descend_a=N descend_b=N" (leaf iterations) at exit. */
#include "uw_common.h"

#define DEPTH 90

static unsigned long work_a, work_b;

UW_NOINLINE unsigned long descend_a(int depth, unsigned long unit)
{
    if (depth == 0) {
        unsigned long r = 0;
        for (int i = 0; i < 3; i++)
            r += hot_leaf(unit);
        work_a += 3 * unit;
        uw_sink += r;
        return r;
    }
    unsigned long r = descend_a(depth - 1, unit);
    uw_sink += r;
    return r + (unsigned long)depth;
}

UW_NOINLINE unsigned long descend_b(int depth, unsigned long unit)
{
    if (depth == 0) {
        unsigned long r = hot_leaf(unit);
        work_b += unit;
        uw_sink += r;
        return r;
    }
    unsigned long r = descend_b(depth - 1, unit);
    uw_sink += r;
    return r + (unsigned long)depth;
}

UW_NOINLINE void run(double seconds)
{
    uw_deadline end = uw_deadline_in(seconds);
    unsigned long long seed = uw_seed();
    while (uw_before(&end)) {
        unsigned long unit = uw_unit(&seed, 40000);
        uw_sink += descend_a(DEPTH, unit);
        uw_sink += descend_b(DEPTH, unit);
    }
}

int main(int argc, char **argv)
{
    run(uw_seconds(argc, argv));
    printf("truth descend_a=%lu descend_b=%lu\n", work_a, work_b);
    return 0;
}
