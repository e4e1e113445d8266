/* Host identity: hostname and machine id. */
#include "host.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int pfr_host_parse_machine_id(const char *text, char *out, size_t outlen)
{
    size_t n = 0;
    while (text[n] && !isspace((unsigned char)text[n]))
        n++;
    if (n != 32 || outlen < 33)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)text[i]))
            return 0;
    memcpy(out, text, n);
    out[n] = '\0';
    return 1;
}

static int read_machine_id(const char *path, char *out, size_t outlen)
{
    char buf[128] = "";
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return pfr_host_parse_machine_id(buf, out, outlen);
}

void pfr_host_identify(pfr_host *h, const char *etc_root)
{
    static const char *const files[] = {"/etc/machine-id", "/var/lib/dbus/machine-id"};
    memset(h, 0, sizeof(*h));
    if (!etc_root)
        etc_root = "";
    if (gethostname(h->name, sizeof(h->name) - 1) != 0)
        h->name[0] = '\0';
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s%s", etc_root, files[i]);
        if (read_machine_id(path, h->id, sizeof(h->id)))
            break;
    }
}
