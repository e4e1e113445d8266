/* Two callers of one hot leaf in a known ratio.
 *
 *   main -> run -> caller_a -> hot_leaf    3 calls a round: 75% of the leaf's time
 *               -> caller_b -> hot_leaf    1 call a round:  25%
 *
 * Every call of a round does the same work, so the split is exact in every round.
 * Usage: uw-ratio SECONDS; prints "truth caller_a=N caller_b=N" (leaf iterations) at exit. */
#include "uw_common.h"

static unsigned long work_a, work_b;

UW_NOINLINE void caller_a(unsigned long unit)
{
    for (int i = 0; i < 3; i++)
        uw_sink += hot_leaf(unit);
    work_a += 3 * unit;
}

UW_NOINLINE void caller_b(unsigned long unit)
{
    uw_sink += hot_leaf(unit);
    work_b += unit;
}

UW_NOINLINE void run(double seconds)
{
    uw_deadline end = uw_deadline_in(seconds);
    unsigned long long seed = uw_seed();
    while (uw_before(&end)) {
        unsigned long unit = uw_unit(&seed, 40000);
        caller_a(unit);
        caller_b(unit);
    }
}

int main(int argc, char **argv)
{
    run(uw_seconds(argc, argv));
    printf("truth caller_a=%lu caller_b=%lu\n", work_a, work_b);
    return 0;
}
