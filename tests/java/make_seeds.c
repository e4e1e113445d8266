/* Writes the synthetic seeds of fuzz_jfr (run by hand when the format's use changes):
 *   jfr_make_seeds CORPUS_DIR
 * The corpus also holds real.jfr, a short recording of tests/java/workload by the JDK's own
 * Flight Recorder (docs/java.md says how it was made). */
#include <stdio.h>
#include <stdlib.h>

#include "jfrgen.h"

static void save(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: jfr_make_seeds CORPUS_DIR\n");
        return 2;
    }
    jg one = {0}, two = {0};
    pfr_jg_std_chunk(&one);
    save(argv[1], "std.jfr", one.b, one.n);
    pfr_jg_bytes(&two, one.b, one.n);
    pfr_jg_bytes(&two, one.b, one.n - 40);
    save(argv[1], "second-cut.jfr", two.b, two.n);
    pfr_jg_free(&one);
    pfr_jg_free(&two);
    return 0;
}
