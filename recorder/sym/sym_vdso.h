/*
 * sym_vdso: the kernel's vDSO image, copied from our own process. Every 64-bit process on one
 * kernel maps the same image, so its symbols name [vdso] frames of any process.
 */
#ifndef PFR_SYM_VDSO_H
#define PFR_SYM_VDSO_H

#include <stddef.h>

/* A malloc'd copy of our vDSO (caller frees) and its size, or NULL when there is none. */
void *pfr_sym_vdso_copy(size_t *size);

#endif
