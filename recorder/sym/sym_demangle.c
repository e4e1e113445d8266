#include "sym_demangle.h"

#include <libiberty/demangle.h>
#include <string.h>

char *pfr_sym_demangle(const char *name)
{
    /* Only Itanium (_Z) and Rust v0 (_R) manglings: libiberty's auto mode would also try other
     * schemes on plain names, and a Go or C name must stay as it is. */
    if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
        return NULL;
    return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
}
