/* A fake libpython3.11.so for py_hostile.c: the symbols pfr looks for in a CPython (_PyRuntime,
 * the code, str and bytes types, Py_Version = 3.11), with nothing of CPython behind them. The
 * program reaches them through the functions below, never directly: a direct reference from the
 * executable would move them into it (copy relocations), away from where the library's own
 * symbols say they are. */
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT _Alignas(64) uint8_t _PyRuntime[8192];
EXPORT _Alignas(64) uint8_t PyCode_Type[512];
EXPORT _Alignas(64) uint8_t PyUnicode_Type[512];
EXPORT _Alignas(64) uint8_t PyBytes_Type[512];
EXPORT const uint32_t Py_Version = 0x030b04f0; /* 3.11.4 final */

EXPORT uint8_t *fake_py_runtime(void)
{
    return _PyRuntime;
}

EXPORT uint8_t *fake_py_code_type(void)
{
    return PyCode_Type;
}

EXPORT uint8_t *fake_py_str_type(void)
{
    return PyUnicode_Type;
}

EXPORT uint8_t *fake_py_bytes_type(void)
{
    return PyBytes_Type;
}
