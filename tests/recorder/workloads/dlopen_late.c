/* A process that loads its work late: it spins argv[2] milliseconds in its own code (so it is
 * sampled, and its mappings read, before the library is there), then dlopen()s the calltree
 * library at argv[1], runs its call tree for argv[3] seconds and exits (in the tests, mostly
 * before the recorder's next drain). Its frames in the library must still be named. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void pfr_short_spin(double ms);

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s LIBRARY SPIN_MS WORK_SECONDS\n", argv[0]);
        return 2;
    }
    pfr_short_spin(atof(argv[2]));
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    void (*work)(double) = (void (*)(double))dlsym(h, "pfr_work_loop");
    if (!work) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    work(atof(argv[3]));
    return 0;
}
