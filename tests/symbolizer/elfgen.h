/* Builds tiny ELF64 shared objects in memory with known symbols, for the ELF reader's unit tests
 * and the fuzz seeds. Layout: one PT_LOAD at 0, a GNU build-id note, .text at 0x100-0x200. */
#ifndef PFR_SYM_ELFGEN_H
#define PFR_SYM_ELFGEN_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

enum elfgen_variant {
    ELFGEN_SYMTAB,     /* .symtab + .strtab */
    ELFGEN_DYNSYM,     /* the same table as .dynsym + .dynstr (a stripped library) */
    ELFGEN_NOSECTIONS, /* no section headers: build-id only through PT_NOTE */
    ELFGEN_COUNT
};

#define ELFGEN_TEXT 0x100u
#define ELFGEN_BUILD_ID                                                                            \
    "\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef\xfe\xdc\xba\x98"
#define ELFGEN_ID_LEN   20
#define ELFGEN_MAX_SIZE 4096

/* An x86-64 ET_DYN ELF header: program headers right after it, section headers at shoff. */
Elf64_Ehdr pfr_elfgen_ehdr(uint64_t shoff, unsigned phnum, unsigned shnum, unsigned shstrndx);

/* Writes the file into buf (ELFGEN_MAX_SIZE bytes); returns its size. Symbols:
 * func_a 0x100 size 0x20 (global; a local alias "alias_a" at the same address), func_b 0x120
 * size 0 (extends to func_c), func_c 0x180 size 0x40 (weak), data_x 0x1c0 (an object). */
size_t pfr_sym_elfgen_build(uint8_t *buf, enum elfgen_variant v);

/* A Go 1.18-format .gopclntab (ptrSize 8, text at GOPCLNGEN_TEXT) with two functions:
 * main.f at text+0x00..0x20 (file /src/x.go, line 10 then 11 from +0x10) and main.g at
 * text+0x20..0x40 (line 20; its first 8 bytes are an inlined call). Returns its size. */
#define GOPCLNGEN_TEXT     0x1000u
#define GOPCLNGEN_MAX_SIZE 512
size_t pfr_gopclngen_build(uint8_t *buf);

#endif
