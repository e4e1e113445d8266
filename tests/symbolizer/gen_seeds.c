/* Writes the generated fuzz seeds (see elfgen.h) into a corpus directory. Run by hand when
 * elfgen changes: sym_gen_seeds tests/symbolizer/corpus */
#include <stdio.h>

#include "elfgen.h"

int main(int argc, char **argv)
{
    static const char *names[ELFGEN_COUNT] = {"gen-symtab.elf", "gen-dynsym.elf",
                                              "gen-nosections.elf"};
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    for (int v = 0; v < ELFGEN_COUNT; v++) {
        uint8_t buf[ELFGEN_MAX_SIZE];
        size_t len = pfr_sym_elfgen_build(buf, (enum elfgen_variant)v);
        char path[4096];
        snprintf(path, sizeof(path), "%s/elf/%s", argv[1], names[v]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
            perror(path);
            return 1;
        }
    }
    uint8_t buf[GOPCLNGEN_MAX_SIZE];
    size_t len = pfr_gopclngen_build(buf);
    char path[4096];
    snprintf(path, sizeof(path), "%s/gopcln/gen-go118.bin", argv[1]);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}
