/* Calls a libc function through the PLT: the symbolizer names the stub "puts@plt". */
#include <stdio.h>

int main(void)
{
    return puts("pfr") < 0;
}
