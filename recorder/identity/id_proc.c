/*
 * /proc/PID/cgroup text -> the one path the node agent identifies a process by
 * (pfr_identity_cgroup_from_proc; its cgroup.NewFromProcessCgroupFile and getId), and whether the
 * text has cgroup v1 lines (pfr_identity_proc_has_v1).
 */
#include <errno.h>
#include <string.h>

#include "id_internal.h"

#define LINE_PATH_MAX 4096

/* The controllers that matter, by the key the agent files them under. */
enum { SLOT_V2 = 0, SLOT_CPU, SLOT_MEMORY, SLOT_SYSTEMD, NSLOTS };
static const char *const slot_keys[NSLOTS] = {"", "cpu", "memory", "name=systemd"};

struct slot {
    const char *path; /* raw path in the text (NULL = none) */
    size_t len;
};

static int slot_of(const char *type, size_t len)
{
    for (int i = 0; i < NSLOTS; i++)
        if (strlen(slot_keys[i]) == len && strncmp(type, slot_keys[i], len) == 0)
            return i;
    return -1;
}

/* One "hierarchy:controllers:path" line: file its path under each controller it lists. */
static void take_line(const char *line, size_t len, struct slot *slots)
{
    const char *c1 = memchr(line, ':', len);
    const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    if (!c2)
        return;
    const char *path = c2 + 1;
    size_t plen = len - (size_t)(path - line);
    /* LXC's payload cgroup counts as a whole, whatever the process made inside it */
    static const char payload[] = "/lxc.payload.";
    if (plen >= sizeof(payload) - 1 && memcmp(path, payload, sizeof(payload) - 1) == 0) {
        const char *slash = memchr(path + 1, '/', plen - 1);
        if (slash)
            plen = (size_t)(slash - path);
    }
    if (plen > LINE_PATH_MAX)
        return;
    char clean[LINE_PATH_MAX + 2];
    pfr_identity_path_clean(path, plen, clean);
    if (strcmp(clean, "/") == 0 || strcmp(clean, "/init.scope") == 0)
        return;
    struct id_split sp = {c1 + 1, c2, false};
    const char *type;
    size_t n;
    while (pfr_identity_split_next(&sp, ',', &type, &n)) {
        int s = slot_of(type, n);
        if (s >= 0) {
            slots[s].path = path;
            slots[s].len = plen;
        }
    }
}

static bool under_kubepods(const struct slot *s)
{
    if (!s->path)
        return false;
    char clean[LINE_PATH_MAX + 2];
    pfr_identity_path_clean(s->path, s->len, clean);
    return strncmp(clean, "/kubepods", 9) == 0;
}

int pfr_identity_cgroup_from_proc(const char *text, size_t len, char *out, size_t outlen)
{
    struct slot slots[NSLOTS] = {{0}};
    struct id_split sp = {text, text + len, false};
    const char *line;
    size_t n;
    while (pfr_identity_split_next(&sp, '\n', &line, &n))
        take_line(line, n, slots);
    const struct slot *pick = NULL;
    if (under_kubepods(&slots[SLOT_CPU]))
        pick = &slots[SLOT_CPU];
    else if (under_kubepods(&slots[SLOT_MEMORY]))
        pick = &slots[SLOT_MEMORY];
    else
        for (int i = 0; i < NSLOTS && !pick; i++)
            if (slots[i].path && slots[i].len)
                pick = &slots[i];
    if (!pick)
        return pfr_identity_copy(out, outlen, "");
    char clean[LINE_PATH_MAX + 2];
    pfr_identity_path_clean(pick->path, pick->len, clean);
    return pfr_identity_copy(out, outlen, clean);
}

bool pfr_identity_proc_has_v1(const char *text, size_t len)
{
    struct id_split sp = {text, text + len, false};
    const char *line;
    size_t n;
    while (pfr_identity_split_next(&sp, '\n', &line, &n)) {
        const char *c1 = memchr(line, ':', n);
        const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
        if (!c2)
            continue;
        struct id_split cs = {c1 + 1, c2, false};
        const char *type;
        size_t tn;
        while (pfr_identity_split_next(&cs, ',', &type, &tn))
            if (tn)
                return true;
    }
    return false;
}
