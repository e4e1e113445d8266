#include "pfr_vec.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int pfr_vec_grow(void *vecp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return -ENOMEM;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem)
        return -ENOMEM;
    /* vecp points to a pointer of any object type: read and write it as bytes */
    void *old;
    memcpy(&old, vecp, sizeof(old));
    void *nv = realloc(old, ncap * elem);
    if (!nv)
        return -ENOMEM;
    memcpy(vecp, &nv, sizeof(nv));
    *cap = ncap;
    return 0;
}
