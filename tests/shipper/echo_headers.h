/* echo_headers: a request's headers as text, for the test servers' "echo" faults (a server or
 * proxy that quotes the request, credentials included, back in its error answer). Included by
 * coroot_server.c and ch_front.c, each one program. */
#ifndef PFR_TEST_ECHO_HEADERS_H
#define PFR_TEST_ECHO_HEADERS_H

#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

struct echo_buf {
    char *b;
    size_t cap;
};

static enum MHD_Result echo_one(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
    (void)kind;
    struct echo_buf *e = cls;
    size_t n = strlen(e->b);
    snprintf(e->b + n, e->cap - n, "%s: %s\r\n", k, v ? v : "");
    return MHD_YES;
}

/* Append "Name: value\r\n" for every header of c to the NUL-terminated b (cap bytes, cut). */
static void echo_headers(struct MHD_Connection *c, char *b, size_t cap)
{
    struct echo_buf e = {b, cap};
    MHD_get_connection_values(c, MHD_HEADER_KIND, echo_one, &e);
}

#endif
