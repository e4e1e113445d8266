/* calltree workload entry: run the known call tree for argv[1] seconds (default 5). */
#include <stdlib.h>

void pfr_work_loop(double seconds);

int main(int argc, char **argv)
{
    pfr_work_loop(argc > 1 ? atof(argv[1]) : 5.0);
    return 0;
}
