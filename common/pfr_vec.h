/* pfr_vec: growing a malloc'ed array by doubling, shared by every module that builds tables. */
#ifndef PFR_VEC_H
#define PFR_VEC_H

#include <stddef.h>

/* Grow the array *vecp (a pointer to the array pointer) of elem-sized items to hold at least
 * need items: capacity doubles from 8, overflow-checked. 0, or -ENOMEM leaving it as it was. */
int pfr_vec_grow(void *vecp, size_t *cap, size_t need, size_t elem);

/* Make room for need items in vec (an lvalue array pointer) of capacity cap. 0 or -ENOMEM. */
#define PFR_VEC_RESERVE(vec, cap, need)                                                            \
    ((size_t)(need) <= (cap) ? 0 : pfr_vec_grow(&(vec), &(cap), (need), sizeof(*(vec))))

#endif
