/* libFuzzer target: the ELF symbol reader over arbitrary bytes (truncated and forged files), both
 * from memory (names copied) and from a file (names left in the file and read on lookup; the file
 * is then cut short to check that a name read after it changed fails cleanly). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sym_elf.h"

static const uint64_t probes[] = {0, 0x100, 0x120, 0x1000, 0x401000, UINT64_MAX};

static void check_find(const struct pfr_sym_elf_syms *syms)
{
    for (size_t i = 0; i < syms->n; i++)
        if (pfr_sym_elf_find(syms, syms->v[i].addr) != &syms->v[i])
            abort(); /* every kept symbol must be found at its own start */
}

static void from_memory(const uint8_t *data, size_t size)
{
    /* libelf may convert in place: give it a private copy */
    char *copy = malloc(size ? size : 1);
    if (!copy)
        return;
    if (size)
        memcpy(copy, data, size);
    Elf *e = elf_memory(copy, size);
    struct pfr_sym_elf_info info;
    struct pfr_sym_elf_syms syms = {0};
    char err[128];
    if (e && pfr_sym_elf_read_info(e, &info, err, sizeof(err)) == 0 &&
        pfr_sym_elf_read_syms(e, &syms, 16u << 20, NULL, err, sizeof(err)) == 0) {
        char hex[2 * PFR_ELF_MAX_BUILDID + 1];
        pfr_sym_elf_id_hex(&info, hex, sizeof(hex));
        for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
            uint64_t va;
            if (pfr_sym_elf_off_to_vaddr(&info, probes[i], &va))
                pfr_sym_elf_find(&syms, va);
            const struct pfr_sym_elf_sym *s = pfr_sym_elf_find(&syms, probes[i]);
            if (s && strlen(pfr_sym_strpool_get(&syms.names, s->name)) == SIZE_MAX)
                abort();
        }
        check_find(&syms);
    }
    pfr_sym_elf_syms_free(&syms);
    if (e)
        elf_end(e);
    free(copy);
}

static void from_file(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
    if (fd < 0)
        return;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return;
    }
    /* as the symbolizer does: the headers are checked before libelf reads them */
    struct pfr_sym_budget b = {0};
    char err[128], name[256];
    int pre = pfr_sym_elf_precheck(fd, &b, err, sizeof(err));
    if (pre < 0 && pre != -ENOEXEC && (b.refused <= PFR_REFUSED_NONE || b.refused >= PFR_NREFUSALS))
        abort(); /* a refusal always says why */
    Elf *e = pre == 0 || pre == -ENOEXEC ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
    struct pfr_sym_elf_info info;
    struct pfr_sym_elf_syms syms = {0};
    if (e && pfr_sym_elf_read_info(e, &info, err, sizeof(err)) == 0 &&
        pfr_sym_elf_read_syms_fd(e, fd, &syms, 16u << 20, &b, err, sizeof(err)) == 0) {
        check_find(&syms);
        /* every kept name is there, not empty, and terminated within the buffer */
        for (size_t i = 0; i < syms.n && i < 4096; i++) {
            int n = pfr_sym_elf_read_name(&syms, fd, &syms.v[i], name, sizeof(name));
            if (n == 0 || (n > 0 && (size_t)n != strlen(name)) || (n < 0 && n != -ENAMETOOLONG))
                abort();
        }
        /* the file changes under the table: later reads fail, none crashes */
        if (syms.n && ftruncate(fd, (off_t)(size / 2)) == 0) {
            for (size_t i = 0; i < syms.n && i < 64; i++)
                if (pfr_sym_elf_read_name(&syms, fd, &syms.v[i], name, sizeof(name)) >= 0)
                    abort();
        }
    }
    pfr_sym_elf_syms_free(&syms);
    if (e)
        elf_end(e);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    elf_version(EV_CURRENT);
    from_memory(data, size);
    from_file(data, size);
    return 0;
}
