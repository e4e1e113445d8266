/* gcc at -O2: a 64-byte aligned local beside a VLA makes main realign its stack through a
 * DRAP register, whose CFI is "CFA = *(rbp - 8)" (DW_CFA_def_cfa_expression). */
#include <string.h>

__attribute__((noinline)) void uw_use(char *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

int main(int argc, char **argv)
{
    (void)argv;
    __attribute__((aligned(64))) char buf[256];
    char vla[argc * 16];
    memset(buf, argc, sizeof(buf));
    memset(vla, argc, sizeof(vla));
    uw_use(buf);
    uw_use(vla);
    return buf[3] + vla[1];
}
