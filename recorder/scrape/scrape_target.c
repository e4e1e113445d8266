/* Targets: names of endpoints and sources, validation of URLs and labels, the config line
 * parser, and the "want" records every discovery source produces. */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scrape_internal.h"

static const char *const endpoint_names[PFR_SCRAPE_NUM_ENDPOINTS] = {"cpu", "heap", "goroutine",
                                                                     "block", "mutex"};

const char *pfr_scrape_endpoint_name(enum pfr_scrape_endpoint e)
{
    return (unsigned)e < PFR_SCRAPE_NUM_ENDPOINTS ? endpoint_names[e] : NULL;
}

int pfr_scrape_parse_endpoints(const char *list, unsigned *mask, char *err, size_t errlen)
{
    unsigned m = 0;
    const char *p = list ? list : "";
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        size_t n = strcspn(p, ", \t");
        bool found = false;
        if (n == 3 && strncmp(p, "all", 3) == 0) {
            m |= PFR_SCRAPE_ALL_ENDPOINTS;
            found = true;
        }
        for (int i = 0; i < PFR_SCRAPE_NUM_ENDPOINTS && !found; i++) {
            if (strlen(endpoint_names[i]) == n && strncmp(p, endpoint_names[i], n) == 0) {
                m |= 1u << i;
                found = true;
            }
        }
        if (!found) {
            pfr_scrape_errf(err, errlen,
                            "unknown profile endpoint '%.*s' (cpu, heap, goroutine, block, "
                            "mutex or all)",
                            (int)(n > 40 ? 40 : n), p);
            return -EINVAL;
        }
        p += n;
    }
    if (!m) {
        pfr_scrape_errf(err, errlen, "no profile endpoint listed");
        return -EINVAL;
    }
    *mask = m;
    return 0;
}

const char *pfr_scrape_source_name(enum pfr_scrape_source s)
{
    switch (s) {
    case PFR_SCRAPE_STATIC:
        return "static";
    case PFR_SCRAPE_KUBERNETES:
        return "kubernetes";
    case PFR_SCRAPE_LOCAL:
        return "local";
    }
    return "unknown";
}

int pfr_scrape_parse_local_mode(const char *s, enum pfr_scrape_local_mode *out)
{
    if (!s)
        return -EINVAL;
    if (strcasecmp(s, "auto") == 0)
        *out = PFR_SCRAPE_LOCAL_AUTO;
    else if (strcasecmp(s, "on") == 0 || strcasecmp(s, "true") == 0 || strcmp(s, "1") == 0)
        *out = PFR_SCRAPE_LOCAL_ON;
    else if (strcasecmp(s, "off") == 0 || strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
        *out = PFR_SCRAPE_LOCAL_OFF;
    else
        return -EINVAL;
    return 0;
}

int pfr_scrape_parse_netns_mode(const char *s, enum pfr_scrape_netns_mode *out)
{
    if (!s)
        return -EINVAL;
    if (strcasecmp(s, "auto") == 0 || strcasecmp(s, "on") == 0 || strcasecmp(s, "true") == 0 ||
        strcmp(s, "1") == 0)
        *out = PFR_SCRAPE_NETNS_AUTO;
    else if (strcasecmp(s, "off") == 0 || strcasecmp(s, "false") == 0 || strcmp(s, "0") == 0)
        *out = PFR_SCRAPE_NETNS_OFF;
    else
        return -EINVAL;
    return 0;
}

bool pfr_scrape_label_key_ok(const char *k)
{
    if (!k || !*k || strlen(k) > SC_MAX_LABEL)
        return false;
    if (!(isalpha((unsigned char)k[0]) || k[0] == '_'))
        return false;
    for (const char *p = k + 1; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '.'))
            return false;
    return true;
}

bool pfr_scrape_label_value_ok(const char *v)
{
    if (!v || !*v || strlen(v) > SC_MAX_LABEL)
        return false;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p <= ' ' || *p == 0x7f)
            return false;
    return true;
}

/* ---- wants ---- */

void pfr_scrape_want_free(struct sc_want *w)
{
    if (!w)
        return;
    free(w->base);
    free(w->service);
    for (size_t i = 0; i < w->nlabels; i++) {
        free((char *)w->labels[i].key);
        free((char *)w->labels[i].value);
    }
    free(w->labels);
    free(w->key);
    memset(w, 0, sizeof(*w));
}

void pfr_scrape_wantlist_clear(struct sc_wantlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        pfr_scrape_want_free(&l->v[i]);
    l->n = 0;
}

void pfr_scrape_wantlist_free(struct sc_wantlist *l)
{
    pfr_scrape_wantlist_clear(l);
    free(l->v);
    l->v = NULL;
    l->cap = 0;
}

int pfr_scrape_wantlist_push(struct sc_wantlist *l, struct sc_want *w)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 8;
        struct sc_want *nv = realloc(l->v, ncap * sizeof(*nv));
        if (!nv) {
            pfr_scrape_want_free(w);
            return -ENOMEM;
        }
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = *w;
    memset(w, 0, sizeof(*w));
    return 0;
}

int pfr_scrape_wantlist_push_copy(struct sc_wantlist *l, const struct sc_want *w)
{
    struct sc_want c = *w;
    c.base = strdup(w->base);
    c.service = strdup(w->service);
    c.key = strdup(w->key);
    c.labels = calloc(w->nlabels ? w->nlabels : 1, sizeof(pfr_kv));
    c.nlabels = 0;
    bool ok = c.base && c.service && c.key && c.labels;
    for (size_t i = 0; ok && i < w->nlabels; i++) {
        c.labels[i].key = strdup(w->labels[i].key);
        c.labels[i].value = strdup(w->labels[i].value);
        c.nlabels++;
        ok = c.labels[i].key && c.labels[i].value;
    }
    if (!ok) {
        pfr_scrape_want_free(&c);
        return -ENOMEM;
    }
    return pfr_scrape_wantlist_push(l, &c);
}

ssize_t pfr_scrape_wantlist_find(const struct sc_wantlist *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0)
            return (ssize_t)i;
    return -1;
}

/* Normalise url into <scheme>://<host>:<port><path>/debug/pprof and host:port. */
static int normalize_url(const char *url, char **base, char **instance, char *err, size_t errlen)
{
    *base = *instance = NULL;
    if (!url || !*url || strlen(url) > SC_MAX_URL) {
        pfr_scrape_errf(err, errlen, "target URL is empty or longer than %d bytes", SC_MAX_URL);
        return -EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)url; *p; p++) {
        if (*p <= ' ' || *p == 0x7f) {
            pfr_scrape_errf(err, errlen, "target URL contains a space or control character");
            return -EINVAL;
        }
    }
    CURLU *u = curl_url();
    if (!u)
        return -ENOMEM;
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *full = NULL, *x = NULL;
    char *newpath = NULL;
    int rc = -EINVAL;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (uc != CURLUE_OK) {
        pfr_scrape_errf(err, errlen, "bad target URL '%.200s': %s", url, curl_url_strerror(uc));
        goto out;
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
        pfr_scrape_errf(err, errlen, "target URL '%.200s' is not http or https", url);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &x, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_QUERY, &x, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_FRAGMENT, &x, 0) == CURLUE_OK) {
        pfr_scrape_errf(err, errlen, "target URL '%.200s' may not have a user, query or fragment",
                        url);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        pfr_scrape_errf(err, errlen, "target URL '%.200s' has no host", url);
        goto out;
    }
    size_t pl = strlen(path);
    while (pl > 0 && path[pl - 1] == '/')
        pl--;
    static const char suffix[] = "/debug/pprof";
    bool has = pl >= sizeof(suffix) - 1 &&
               memcmp(path + pl - (sizeof(suffix) - 1), suffix, sizeof(suffix) - 1) == 0;
    if (asprintf(&newpath, "%.*s%s", (int)pl, path, has ? "" : suffix) < 0) {
        newpath = NULL;
        rc = -ENOMEM;
        goto out;
    }
    if (curl_url_set(u, CURLUPART_PATH, newpath, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_PORT, port, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK) {
        pfr_scrape_errf(err, errlen, "target URL '%.200s' cannot be rebuilt", url);
        goto out;
    }
    char *inst = NULL;
    if (asprintf(&inst, "%s:%s", host, port) < 0) {
        rc = -ENOMEM;
        goto out;
    }
    *base = strdup(full);
    *instance = inst;
    rc = *base ? 0 : -ENOMEM;
    if (rc) {
        free(inst);
        *instance = NULL;
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(full);
    curl_free(x);
    free(newpath);
    curl_url_cleanup(u);
    return rc;
}

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const pfr_kv *)a)->key, ((const pfr_kv *)b)->key);
}

static int make_key(struct sc_want *w)
{
    size_t len = strlen(w->base) + strlen(w->service) + 64;
    for (size_t i = 0; i < w->nlabels; i++)
        len += strlen(w->labels[i].key) + strlen(w->labels[i].value) + 2;
    char *k = malloc(len);
    if (!k)
        return -ENOMEM;
    /* \x1f cannot occur in any part: URLs, services and labels have no control characters */
    size_t o = (size_t)snprintf(k, len, "%d\x1f%s\x1f%s", (int)w->source, w->base, w->service);
    for (size_t i = 0; i < w->nlabels; i++)
        o += (size_t)snprintf(k + o, len - o, "\x1f%s=%s", w->labels[i].key, w->labels[i].value);
    snprintf(k + o, len - o, "\x1f%d:%llu", (int)w->pid, (unsigned long long)w->starttime);
    w->key = k;
    return 0;
}

int pfr_scrape_want_make(struct sc_want *w, const char *url, const char *service,
                         const pfr_kv *labels, size_t nlabels, enum pfr_scrape_source source,
                         pid_t pid, uint64_t starttime, char *err, size_t errlen)
{
    memset(w, 0, sizeof(*w));
    if (!service || !pfr_scrape_label_value_ok(service)) {
        pfr_scrape_errf(err, errlen, "target '%.200s': service name missing or invalid",
                        url ? url : "");
        return -EINVAL;
    }
    if (nlabels > SC_MAX_LABELS) {
        pfr_scrape_errf(err, errlen, "target '%.200s': more than %d labels", url, SC_MAX_LABELS);
        return -EINVAL;
    }
    bool have_instance = false;
    for (size_t i = 0; i < nlabels; i++) {
        if (!pfr_scrape_label_key_ok(labels[i].key) ||
            !pfr_scrape_label_value_ok(labels[i].value)) {
            pfr_scrape_errf(err, errlen, "target '%.200s': bad label '%.64s'", url ? url : "",
                            labels[i].key ? labels[i].key : "");
            return -EINVAL;
        }
        if (strcmp(labels[i].key, "service.name") == 0) {
            pfr_scrape_errf(err, errlen,
                            "target '%.200s': use service= rather than a service.name label",
                            url ? url : "");
            return -EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(labels[i].key, labels[j].key) == 0) {
                pfr_scrape_errf(err, errlen, "target '%.200s': label '%.64s' given twice", url,
                                labels[i].key);
                return -EINVAL;
            }
        }
        if (strcmp(labels[i].key, "instance") == 0)
            have_instance = true;
    }
    char *instance = NULL;
    int rc = normalize_url(url, &w->base, &instance, err, errlen);
    if (rc)
        return rc;
    w->source = source;
    w->pid = pid;
    w->starttime = starttime;
    w->service = strdup(service);
    w->labels = calloc(nlabels + 1, sizeof(pfr_kv));
    if (!w->service || !w->labels)
        goto nomem;
    for (size_t i = 0; i < nlabels; i++) {
        w->labels[i].key = strdup(labels[i].key);
        w->labels[i].value = strdup(labels[i].value);
        w->nlabels++;
        if (!w->labels[i].key || !w->labels[i].value)
            goto nomem;
    }
    if (!have_instance) {
        w->labels[w->nlabels].key = strdup("instance");
        w->labels[w->nlabels].value = instance;
        instance = NULL;
        w->nlabels++;
        if (!w->labels[w->nlabels - 1].key)
            goto nomem;
    }
    free(instance);
    instance = NULL;
    qsort(w->labels, w->nlabels, sizeof(pfr_kv), kv_cmp);
    if (make_key(w))
        goto nomem;
    return 0;
nomem:
    free(instance);
    pfr_scrape_want_free(w);
    return -ENOMEM;
}

/* ---- the config line ---- */

int pfr_scrape_parse_target(const char *line, pfr_scrape_target **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!line) {
        pfr_scrape_errf(err, errlen, "empty target");
        return -EINVAL;
    }
    size_t linelen = strlen(line);
    if (linelen > 8192) {
        pfr_scrape_errf(err, errlen, "target line longer than 8192 bytes");
        return -EINVAL;
    }
    /* One block: the struct, the label array, then a copy of the line cut into tokens. */
    size_t ntok = 0;
    for (size_t i = 0; i < linelen; i++)
        if (!isspace((unsigned char)line[i]) && (i == 0 || isspace((unsigned char)line[i - 1])))
            ntok++;
    if (ntok == 0) {
        pfr_scrape_errf(err, errlen, "empty target");
        return -EINVAL;
    }
    size_t size = sizeof(pfr_scrape_target) + ntok * sizeof(pfr_kv) + linelen + 1;
    pfr_scrape_target *t = calloc(1, size);
    if (!t)
        return -ENOMEM;
    pfr_kv *labels = (pfr_kv *)(t + 1);
    char *text = (char *)(labels + ntok);
    memcpy(text, line, linelen + 1);

    char *save = NULL;
    size_t nl = 0;
    int rc = 0;
    for (char *tok = strtok_r(text, " \t\r\n\v\f", &save); tok;
         tok = strtok_r(NULL, " \t\r\n\v\f", &save)) {
        if (!t->url) {
            t->url = tok;
            continue;
        }
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1]) {
            pfr_scrape_errf(err, errlen, "'%.64s': expected key=value after the URL", tok);
            rc = -EINVAL;
            break;
        }
        *eq = '\0';
        if (strcmp(tok, "service") == 0 || strcmp(tok, "service.name") == 0) {
            if (t->service) {
                pfr_scrape_errf(err, errlen, "service given twice");
                rc = -EINVAL;
                break;
            }
            t->service = eq + 1;
            continue;
        }
        labels[nl].key = tok;
        labels[nl].value = eq + 1;
        nl++;
    }
    if (!rc && !t->service) {
        pfr_scrape_errf(err, errlen, "target '%.200s': service=NAME is required", t->url);
        rc = -EINVAL;
    }
    if (!rc) {
        /* validate everything the way pfr_scrape_add_target will */
        struct sc_want w;
        t->labels = labels;
        t->nlabels = nl;
        rc = pfr_scrape_want_make(&w, t->url, t->service, labels, nl, PFR_SCRAPE_STATIC, 0, 0, err,
                                  errlen);
        pfr_scrape_want_free(&w);
    }
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}
