/* The shared library of the symbolizer tests (one-line function: its marker gives the line). */
// clang-format off
__attribute__((noinline)) int lib_function(int x) { return x * 5 - 2; } /* LIB_LINE */
