// The known call tree in C++: names must come out demangled (pfrtest::Worker::heavy(long long)).
// As in calltree_lib.c, heavy() and light() split this thread's CPU time 3:1 by a schedule on its
// CPU clock (counted iterations do not cost the same in every build).
#include <chrono>
#include <cstdlib>
#include <time.h>

namespace pfrtest
{
class Worker
{
  public:
    static long long cpu_ns()
    {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
    }
    // spins until this thread's CPU clock reads until_ns, reading it once a chunk
    __attribute__((noinline)) static void burn(long long until_ns)
    {
        volatile unsigned long x = 0;
        while (cpu_ns() < until_ns)
            for (unsigned long i = 0; i < chunk; i++)
                x += i;
    }
    __attribute__((noinline)) void heavy(long long until_ns)
    {
        burn(until_ns);
    }
    __attribute__((noinline)) void light(long long until_ns)
    {
        burn(until_ns);
    }
    __attribute__((noinline)) void run(double seconds)
    {
        auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        // a unit of 1-3 ms drawn each round: a fixed round could beat against the sampling
        unsigned long long seed =
            (unsigned long long)std::chrono::steady_clock::now().time_since_epoch().count();
        long long slot = cpu_ns();
        while (std::chrono::steady_clock::now() < end) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            long long unit = unit_ns + (long long)((seed >> 33) % (2 * unit_ns));
            heavy(slot += 3 * unit);
            light(slot += unit);
        }
    }

  private:
    static constexpr unsigned long chunk = 50000;
    static constexpr long long unit_ns = 1000000;
};
} // namespace pfrtest

int main(int argc, char **argv)
{
    pfrtest::Worker w;
    w.run(argc > 1 ? std::atof(argv[1]) : 5.0);
    return 0;
}
