/* POST /pin's query: outside input, checked whole before anything is pinned. */
#include "pfr_triggers.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pfr_time.h"

static const char *arg(const pfr_pin_arg *args, size_t n, const char *key, int *count)
{
    const char *v = NULL;
    *count = 0;
    for (size_t i = 0; i < n; i++)
        if (args[i].key && strcmp(args[i].key, key) == 0) {
            v = args[i].value ? args[i].value : "";
            (*count)++;
        }
    return v;
}

static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

/* A duration of pfr_time.h, or 0 ("0", "0s": nothing before or after) */
static int duration(const char *v, int64_t *out, char *why, size_t whylen)
{
    if (strcmp(v, "0") == 0 || strcmp(v, "0s") == 0) {
        *out = 0;
        return 0;
    }
    return pfr_duration_parse(v, out, why, whylen);
}

static int window(const pfr_pin_arg *args, size_t n, int64_t now_ns, const pfr_triggers_config *cfg,
                  pfr_pin_request *req, char *err, size_t errlen)
{
    int cf, ct, cb, ca;
    const char *from = arg(args, n, "from", &cf), *to = arg(args, n, "to", &ct);
    const char *before = arg(args, n, "before", &cb), *after = arg(args, n, "after", &ca);
    char why[512];
    if ((from || to) && (before || after)) {
        snprintf(err, errlen, "give from/to or before/after, not both");
        return -EINVAL;
    }
    if (from || to) {
        if (!from || !to) {
            snprintf(err, errlen, "from and to go together");
            return -EINVAL;
        }
        if (pfr_time_parse(from, now_ns, &req->from_ns, why, sizeof(why))) {
            snprintf(err, errlen, "from: %s", why);
            return -EINVAL;
        }
        if (pfr_time_parse(to, now_ns, &req->to_ns, why, sizeof(why))) {
            snprintf(err, errlen, "to: %s", why);
            return -EINVAL;
        }
        if (req->from_ns > req->to_ns) {
            snprintf(err, errlen, "from is after to");
            return -EINVAL;
        }
        return 0;
    }
    int64_t b = cfg->before_ns, a = cfg->after_ns;
    if (before && duration(before, &b, why, sizeof(why))) {
        snprintf(err, errlen, "before: %s", why);
        return -EINVAL;
    }
    if (after && duration(after, &a, why, sizeof(why))) {
        snprintf(err, errlen, "after: %s", why);
        return -EINVAL;
    }
    req->from_ns = now_ns - b;
    req->to_ns = now_ns + a;
    return 0;
}

int pfr_pin_query_parse(const pfr_pin_arg *args, size_t nargs, int64_t now_ns,
                        const pfr_triggers_config *cfg, pfr_pin_request *req, char *err,
                        size_t errlen)
{
    static const char *const known[] = {"service", "reason", "from", "to", "before", "after"};
    memset(req, 0, sizeof(*req));
    req->kind = PFR_PIN_EXTERNAL;
    req->events = 1;
    for (size_t i = 0; i < nargs; i++) {
        bool ok = false;
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]) && args[i].key; k++)
            ok |= strcmp(args[i].key, known[k]) == 0;
        if (!ok) {
            snprintf(err, errlen,
                     "unknown parameter '%.64s' (service, reason, from, to, before, "
                     "after)",
                     args[i].key ? args[i].key : "");
            return -EINVAL;
        }
    }
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
        int count;
        arg(args, nargs, known[k], &count);
        if (count > 1) {
            snprintf(err, errlen, "%s is given %d times", known[k], count);
            return -EINVAL;
        }
    }
    int count;
    const char *reason = arg(args, nargs, "reason", &count);
    if (!reason || !reason[0]) {
        snprintf(err, errlen, "reason is required (what happened, e.g. the alert's name)");
        return -EINVAL;
    }
    size_t rlen = strlen(reason);
    if (rlen > PFR_PIN_REASON_MAX) {
        snprintf(err, errlen, "reason is %zu bytes, more than %d", rlen, PFR_PIN_REASON_MAX);
        return -EINVAL;
    }
    if (!printable(reason)) {
        snprintf(err, errlen, "reason holds control characters");
        return -EINVAL;
    }
    const char *service = arg(args, nargs, "service", &count);
    if (service && (strlen(service) >= sizeof(req->service) || !printable(service))) {
        snprintf(err, errlen, "service is longer than %zu bytes or holds control characters",
                 sizeof(req->service) - 1);
        return -EINVAL;
    }
    int rc = window(args, nargs, now_ns, cfg, req, err, errlen);
    if (rc)
        return rc;
    snprintf(req->service, sizeof(req->service), "%s", service ? service : "");
    snprintf(req->reason, sizeof(req->reason), "%s", reason);
    return 0;
}
