/* Writes the seed corpora of the two fuzz targets (run by hand when the formats change):
 *   make_seeds CORPUS_DIR   (writes CORPUS_DIR/walk and CORPUS_DIR/elf) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "elfgen.h"
#include "fakemem.h"

static void save(const char *dir, const char *name, const void *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* fuzz_goheap_walk maps its input at 0x10000 with runtime.mbuckets first */
static void walk_seed(const char *dir, const char *name, int n, int loop, uint64_t bad_nstk)
{
    fakemem f;
    pfr_fakemem_init(&f, 0x10000, 64 + (size_t)n * 240);
    for (int i = 0; i < n; i++) {
        uint64_t pcs[3] = {0x401000 + (uint64_t)i, 0x402000, 0x403000};
        pfr_fakemem_bucket(&f, 64 << (i % 4), pcs, (uint32_t)(1 + i % 3), (uint64_t)(10 + i),
                           (uint64_t)i);
    }
    uint64_t head = pfr_fakemem_get64(&f, f.mbuckets);
    if (loop && n > 1)
        pfr_fakemem_put64(&f, pfr_fakemem_get64(&f, head + FAKE_ALLNEXT) + FAKE_ALLNEXT, head);
    if (bad_nstk)
        pfr_fakemem_put64(&f, head + FAKE_NSTK, bad_nstk);
    /* the last bytes (an unused future cycle of the oldest record) pick generous limits */
    f.len = f.len < 64 + 8 ? 64 + 8 : f.len;
    f.buf[f.len - 1] = 0x3f;
    f.buf[f.len - 2] = 0x7f;
    f.buf[f.len - 3] = 0x80;
    save(dir, name, f.buf, f.len);
    pfr_fakemem_free(&f);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    char walk[1024], elf[1024];
    snprintf(walk, sizeof(walk), "%s/walk", argv[1]);
    snprintf(elf, sizeof(elf), "%s/elf", argv[1]);
    mkdir(argv[1], 0755);
    mkdir(walk, 0755);
    mkdir(elf, 0755);
    walk_seed(walk, "list3", 3, 0, 0);
    walk_seed(walk, "list12", 12, 0, 0);
    walk_seed(walk, "loop", 6, 1, 0);
    walk_seed(walk, "absurd_nstk", 4, 0, 1ull << 40);
    walk_seed(walk, "empty", 0, 0, 0);
    static const struct {
        const char *name;
        elfgen_opts o;
    } elfs[] = {
        {"go_symbols",
         {.go = true, .version = "go1.21.13", .symtab = true, .with_targets = true, .fillers = 3}},
        {"go_stripped", {.go = true, .version = "go1.19.8"}},
        {"go_pie",
         {.go = true, .version = "go1.23.5", .symtab = true, .with_targets = true, .e_type = 3}},
        {"not_go", {.symtab = true, .with_targets = true}},
    };
    for (size_t i = 0; i < sizeof(elfs) / sizeof(elfs[0]); i++) {
        uint8_t *img;
        size_t len;
        if (pfr_goheap_elfgen_build(&elfs[i].o, &img, &len) < 0)
            return 1;
        save(elf, elfs[i].name, img, len);
        free(img);
    }
    return 0;
}
