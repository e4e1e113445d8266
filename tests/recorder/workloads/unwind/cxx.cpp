/* C++ with exceptions and inlining.
 *
 *   main -> run -> uw::Engine::heavy -> [uw::Engine::step, inlined] -> hot_leaf   3 calls: 75%
 *               -> uw::Engine::light -> [uw::Engine::step, inlined] -> hot_leaf   1 call:  25%
 *                                    -> uw::Engine::fail x8 -> __cxa_throw -> libgcc's unwinder,
 *                                       caught in run (every round)
 *
 * step() is always inlined: the profilers may show it as an inlined frame or not at all; the
 * callers of the leaf are heavy and light either way. Throwing through eight frames each round
 * puts a few percent of the samples in libstdc++ and libgcc_s, whose stacks must reach main too.
 * Usage: uw-cxx SECONDS; prints "truth uw::Engine::heavy=N uw::Engine::light=N" (leaf
 * iterations) at exit. */
#include "uw_common.h"

#include <stdexcept>

namespace uw
{

struct Engine {
    unsigned long unit = 0;
    unsigned long work_heavy = 0, work_light = 0;

    __attribute__((always_inline)) inline void step(unsigned long &work)
    {
        uw_sink += hot_leaf(unit);
        work += unit;
    }
    UW_NOINLINE void heavy()
    {
        for (int i = 0; i < 3; i++)
            step(work_heavy);
    }
    UW_NOINLINE void light()
    {
        step(work_light);
        fail(8);
    }
    UW_NOINLINE void fail(int depth)
    {
        if (depth == 0)
            throw std::runtime_error("round over");
        fail(depth - 1);
        uw_sink += 1;
    }
};

} // namespace uw

UW_NOINLINE unsigned long run(uw::Engine &e, double seconds)
{
    uw_deadline end = uw_deadline_in(seconds);
    unsigned long long seed = uw_seed();
    unsigned long caught = 0;
    while (uw_before(&end)) {
        e.unit = uw_unit(&seed, 40000);
        e.heavy();
        try {
            e.light();
        } catch (const std::runtime_error &) {
            caught++;
        }
    }
    return caught;
}

int main(int argc, char **argv)
{
    uw::Engine e;
    unsigned long caught = run(e, uw_seconds(argc, argv));
    printf("truth uw::Engine::heavy=%lu uw::Engine::light=%lu\n", e.work_heavy, e.work_light);
    return caught ? 0 : 1;
}
