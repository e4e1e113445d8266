/* TEMPORARY (branch hjvm only, deleted at merge): the JFR conversion's contract (pfr_jfr.h)
 * without its parser, so the JVM source links before the parser lands. Every recording is
 * refused: the source counts and logs a conversion error. */
#include <errno.h>
#include <stdio.h>

#include "pfr_jfr.h"

int pfr_jfr_to_profiles(const uint8_t *buf, size_t len, const pfr_jfr_opts *opts,
                        pfr_jfr_profiles *out, char *err, size_t errlen)
{
    (void)buf;
    (void)len;
    (void)opts;
    (void)out;
    snprintf(err, errlen, "no JFR parser in this build (stub)");
    return -ENOSYS;
}

void pfr_jfr_profiles_free(pfr_jfr_profiles *p)
{
    (void)p;
}
