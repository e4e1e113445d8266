// C++ process for the symbolizer tests: mangled names must come back demangled.
// clang-format off
#include <cstdio>
#include <unistd.h>

namespace ns
{
struct Widget {
    static int make(int x);
};
__attribute__((noinline)) int Widget::make(int x) { return x * 3 + 2; } // CPP_LINE

template <typename T> __attribute__((noinline)) T twice(T v)
{
    return v + v;
}
} // namespace ns

int main()
{
    long (*tw)(long) = ns::twice<long>;
    std::printf("make %p\n", (void *)&ns::Widget::make);
    std::printf("twice %p\n", (void *)tw);
    std::printf("ready\n");
    std::fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    return ns::Widget::make(1) + (int)tw(1) == 7 ? 0 : 1;
}
