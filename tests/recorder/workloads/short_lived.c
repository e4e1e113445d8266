/* A short-lived process: spins argv[1] milliseconds (default 50) and exits. */
#include <stdlib.h>

void pfr_short_spin(double ms);

int main(int argc, char **argv)
{
    pfr_short_spin(argc > 1 ? atof(argv[1]) : 50.0);
    return 0;
}
