/* host: the identity every profile carries (host.name, host.id). */
#ifndef PFR_RECORDER_HOST_H
#define PFR_RECORDER_HOST_H

#include <stddef.h>

typedef struct pfr_host {
    char name[256]; /* hostname */
    char id[64];    /* /etc/machine-id (or /var/lib/dbus/machine-id); "" if neither is readable */
} pfr_host;

/* Fill h. etc_root is "" (or NULL) on a real host, a directory prefix in tests. Never fails:
 * unknown fields are left empty. */
void pfr_host_identify(pfr_host *h, const char *etc_root);

/* Copy the first word of a machine-id file's text to out if it is 32 hex digits: returns 1, else 0.
 */
int pfr_host_parse_machine_id(const char *text, char *out, size_t outlen);

#endif
