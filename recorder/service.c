/* Service naming: see service.h for the rule. Pure string functions, no I/O. */
#include "service.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum pfr_rule_kind kind;
} rule_kinds[] = {
    {"comm", PFR_RULE_COMM},
    {"exe", PFR_RULE_EXE},
    {"cgroup", PFR_RULE_CGROUP},
    {"container", PFR_RULE_CONTAINER},
};

/* Next whitespace-separated word of *s into a new string; NULL at the end. */
static char *next_word(const char **s)
{
    const char *p = *s;
    while (*p && isspace((unsigned char)*p))
        p++;
    if (!*p)
        return NULL;
    const char *b = p;
    while (*p && !isspace((unsigned char)*p))
        p++;
    *s = p;
    return strndup(b, (size_t)(p - b));
}

int pfr_service_rules_add(pfr_service_rules *rules, const char *text, char *err, size_t errlen)
{
    const char *s = text;
    char *w[4] = {NULL, NULL, NULL, NULL};
    int n = 0;
    while (n < 4 && (w[n] = next_word(&s)) != NULL)
        n++;
    int rc = 0;
    if (n != 3) {
        snprintf(err, errlen, "service rule '%s': expected KIND PATTERN SERVICE", text);
        rc = -EINVAL;
        goto out;
    }
    size_t k;
    for (k = 0; k < sizeof(rule_kinds) / sizeof(rule_kinds[0]); k++)
        if (strcmp(w[0], rule_kinds[k].name) == 0)
            break;
    if (k == sizeof(rule_kinds) / sizeof(rule_kinds[0])) {
        snprintf(err, errlen, "service rule '%s': unknown kind '%s' (comm, exe, cgroup, container)",
                 text, w[0]);
        rc = -EINVAL;
        goto out;
    }
    pfr_service_rule *v = realloc(rules->v, (rules->n + 1) * sizeof(*v));
    if (!v) {
        rc = -ENOMEM;
        goto out;
    }
    rules->v = v;
    v[rules->n].kind = rule_kinds[k].kind;
    v[rules->n].pattern = w[1];
    v[rules->n].service = w[2];
    w[1] = w[2] = NULL;
    rules->n++;
out:
    for (int i = 0; i < 4; i++)
        free(w[i]);
    return rc;
}

void pfr_service_rules_free(pfr_service_rules *rules)
{
    for (size_t i = 0; i < rules->n; i++) {
        free(rules->v[i].pattern);
        free(rules->v[i].service);
    }
    free(rules->v);
    rules->v = NULL;
    rules->n = 0;
}

int pfr_service_rules_copy(pfr_service_rules *dst, const pfr_service_rules *src)
{
    dst->v = NULL;
    dst->n = 0;
    if (src->n == 0)
        return 0;
    dst->v = calloc(src->n, sizeof(*dst->v));
    if (!dst->v)
        return -ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        dst->v[i].kind = src->v[i].kind;
        dst->v[i].pattern = strdup(src->v[i].pattern);
        dst->v[i].service = strdup(src->v[i].service);
        dst->n++;
        if (!dst->v[i].pattern || !dst->v[i].service) {
            pfr_service_rules_free(dst);
            return -ENOMEM;
        }
    }
    return 0;
}

static bool is_hex_run(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* A path component that names a container: an optional runtime prefix, 64 hex digits, an
 * optional ".scope". "libpod-conmon-<id>.scope" is podman's monitor, not the container. */
static bool component_container_id(const char *c, size_t len, char *id)
{
    static const char *const prefixes[] = {"docker-", "cri-containerd-", "crio-",
                                           "libpod-", "containerd-",     ""};
    if (len >= 14 && strncmp(c, "libpod-conmon-", 14) == 0)
        return false;
    if (len >= 12 && strncmp(c, "crio-conmon-", 12) == 0)
        return false;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t pl = strlen(prefixes[i]);
        if (len < pl + 64 || strncmp(c, prefixes[i], pl) != 0)
            continue;
        const char *h = c + pl;
        size_t rest = len - pl - 64;
        if (!is_hex_run(h, 64))
            continue;
        if (rest == 0 || (rest == 6 && strncmp(h + 64, ".scope", 6) == 0)) {
            for (size_t j = 0; j < 64; j++)
                id[j] = (char)tolower((unsigned char)h[j]);
            id[64] = '\0';
            return true;
        }
    }
    return false;
}

bool pfr_container_id_from_cgroup(const char *cgroup, char *id)
{
    id[0] = '\0';
    if (!cgroup)
        return false;
    bool found = false;
    const char *p = cgroup;
    /* the innermost matching component wins (nested runtimes) */
    while (*p) {
        while (*p == '/')
            p++;
        const char *b = p;
        while (*p && *p != '/')
            p++;
        if (p > b && component_container_id(b, (size_t)(p - b), id))
            found = true;
    }
    if (!found)
        id[0] = '\0';
    return found;
}

bool pfr_systemd_unit_from_cgroup(const char *cgroup, char *unit, size_t unitlen)
{
    static const char suffix[] = ".service";
    const size_t sl = sizeof(suffix) - 1;
    bool found = false;
    if (unitlen)
        unit[0] = '\0';
    if (!cgroup)
        return false;
    const char *p = cgroup;
    while (*p) {
        while (*p == '/')
            p++;
        const char *b = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - b);
        if (len > sl && strncmp(p - sl, suffix, sl) == 0) {
            size_t nl = len - sl;
            /* user@1000.service is the user manager, not an application: keep looking below it,
             * but use it if nothing more specific follows */
            snprintf(unit, unitlen, "%.*s", (int)nl, b);
            found = true;
        }
    }
    return found;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool rule_matches(const pfr_service_rule *r, const pfr_process_facts *f,
                         const char *runtime_id)
{
    const char *subj[2] = {NULL, NULL};
    switch (r->kind) {
    case PFR_RULE_COMM:
        subj[0] = f->comm;
        break;
    case PFR_RULE_EXE:
        subj[0] = f->exe;
        break;
    case PFR_RULE_CGROUP:
        subj[0] = f->cgroup;
        break;
    case PFR_RULE_CONTAINER:
        subj[0] = runtime_id[0] ? runtime_id : NULL;
        subj[1] = f->coroot_id && f->coroot_id[0] ? f->coroot_id : NULL;
        break;
    }
    for (int i = 0; i < 2; i++)
        if (subj[i] && fnmatch(r->pattern, subj[i], 0) == 0)
            return true;
    return false;
}

void pfr_service_name(const pfr_service_rules *rules, const pfr_process_facts *f, char *service,
                      size_t servicelen, char *container_id)
{
    char runtime_id[PFR_RUNTIME_ID_MAX + 1];
    bool coroot = f->coroot_id && f->coroot_id[0];
    pfr_container_id_from_cgroup(f->cgroup, runtime_id);
    snprintf(container_id, PFR_CONTAINER_ID_MAX + 1, "%s", coroot ? f->coroot_id : "");
    for (size_t i = 0; rules && i < rules->n; i++) {
        if (rule_matches(&rules->v[i], f, runtime_id)) {
            snprintf(service, servicelen, "%s", rules->v[i].service);
            return;
        }
    }
    if (f->kthread) {
        snprintf(service, servicelen, "kernel");
        return;
    }
    if (coroot) {
        const char *s =
            f->coroot_service && f->coroot_service[0] ? f->coroot_service : f->coroot_id;
        snprintf(service, servicelen, "%s", s);
        return;
    }
    if (runtime_id[0]) {
        snprintf(service, servicelen, "%.12s", runtime_id);
        return;
    }
    if (pfr_systemd_unit_from_cgroup(f->cgroup, service, servicelen))
        return;
    if (f->exe && f->exe[0] && base_name(f->exe)[0]) {
        snprintf(service, servicelen, "%s", base_name(f->exe));
        return;
    }
    if (f->comm && f->comm[0]) {
        snprintf(service, servicelen, "%s", f->comm);
        return;
    }
    snprintf(service, servicelen, "unknown");
}
