// The known call tree in C++: names must come out demangled (pfrtest::Worker::heavy()).
#include <chrono>
#include <cstdlib>

namespace pfrtest
{
class Worker
{
  public:
    __attribute__((noinline)) static void burn(unsigned long n)
    {
        volatile unsigned long x = 0;
        for (unsigned long i = 0; i < n; i++)
            x += i;
    }
    __attribute__((noinline)) void heavy()
    {
        burn(3 * unit);
    }
    __attribute__((noinline)) void light()
    {
        burn(unit);
    }
    __attribute__((noinline)) void run(double seconds)
    {
        auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < end) {
            heavy();
            light();
        }
    }

  private:
    unsigned long unit = 100000;
};
} // namespace pfrtest

int main(int argc, char **argv)
{
    pfrtest::Worker w;
    w.run(argc > 1 ? std::atof(argv[1]) : 5.0);
    return 0;
}
