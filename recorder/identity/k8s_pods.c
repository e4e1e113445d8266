/* The one client of the Kubernetes pod list (pfr_k8s_pods.h). */
#include "pfr_k8s_pods.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "id_internal.h"
#include "pfr_clock.h"

#define MS            1000000ll
#define SUBSCRIBERS   4
#define WAIT_SLACK_NS (1000 * MS) /* a waiter's bound past the fetch's own timeout */
#define MAX_BODY      (64u << 20) /* a pod list */
#define TOKEN_MAX     (64u << 10)
#define ERRLEN        256

/* A list handed out: pub first, so that a pfr_k8s_podlist * is one of these. */
struct list {
    pfr_k8s_podlist pub;
    atomic_uint refs;
    char *buf; /* the text, owned */
};

struct subscriber {
    pfr_k8s_pods_fetched_fn fn;
    void *ctx;
};

struct pfr_k8s_pods {
    /* settings (owned copies) */
    char *url;  /* the pod list's URL, or NULL when read from file */
    char *file; /* pods_json_file */
    char *token_file, *ca_file;
    bool insecure;
    int64_t timeout_ms, refresh_ns, min_refresh_ns;

    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast: a fetch asked for or ended, wake, stop */
    pthread_t thread;
    bool started;
    atomic_bool stop;
    /* under mu: */
    struct list *latest;   /* the last successful fetch's list, or NULL */
    uint64_t begun, ended; /* fetches begun and ended */
    int64_t last_begin_ns; /* when the last fetch began (0 = none yet) */
    bool asked;            /* a consumer wants a fetch now */
    int last_rc;           /* of the last fetch that ended */
    char last_err[ERRLEN]; /* its reason */
    uint64_t wake_gen;     /* bumped by pfr_k8s_pods_wake */

    pthread_mutex_t sub_mu; /* held while subscribers are called */
    struct subscriber subs[SUBSCRIBERS];
    size_t nsubs;
};

/* ---- lists ---- */

pfr_k8s_podlist *pfr_k8s_podlist_ref(const pfr_k8s_podlist *l)
{
    struct list *x = (struct list *)l;
    atomic_fetch_add(&x->refs, 1);
    return &x->pub;
}

void pfr_k8s_podlist_unref(pfr_k8s_podlist *l)
{
    struct list *x = (struct list *)l;
    if (!x || atomic_fetch_sub(&x->refs, 1) != 1)
        return;
    free(x->buf);
    free(x);
}

/* ---- options ---- */

bool pfr_k8s_pods_configured(const pfr_k8s_pods_opts *o)
{
    return o && (o->kubelet_url || o->apiserver_url || o->pods_json_file);
}

static int check_opts(const pfr_k8s_pods_opts *o, char *err, size_t errlen)
{
    if (!pfr_k8s_pods_configured(o)) {
        snprintf(err, errlen, "no kubelet URL, API server URL or pods file");
        return -EINVAL;
    }
    if (o->kubelet_url && o->apiserver_url) {
        snprintf(err, errlen, "kubelet_url and apiserver_url are exclusive");
        return -EINVAL;
    }
    if (o->apiserver_url && !o->pods_json_file && (!o->node_name || !*o->node_name)) {
        snprintf(err, errlen, "apiserver_url needs node_name");
        return -EINVAL;
    }
    if ((o->kubelet_url && !*o->kubelet_url) || (o->apiserver_url && !*o->apiserver_url) ||
        (o->pods_json_file && !*o->pods_json_file)) {
        snprintf(err, errlen, "empty Kubernetes URL or pods file");
        return -EINVAL;
    }
    return 0;
}

/* GET <kubelet>/pods, or the API server's pods of node_name. */
static int build_url(pfr_k8s_pods *p, const pfr_k8s_pods_opts *o, char *err, size_t errlen)
{
    const char *base = o->kubelet_url ? o->kubelet_url : o->apiserver_url;
    if (o->pods_json_file || !base)
        return 0;
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    if (bl == 0) {
        snprintf(err, errlen, "bad Kubernetes URL %s", base);
        return -EINVAL;
    }
    int n;
    if (o->kubelet_url) {
        n = asprintf(&p->url, "%.*s/pods", (int)bl, base);
    } else {
        char *node = curl_easy_escape(NULL, o->node_name, 0);
        if (!node)
            return -ENOMEM;
        n = asprintf(&p->url, "%.*s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", (int)bl, base,
                     node);
        curl_free(node);
    }
    if (n < 0) {
        p->url = NULL;
        return -ENOMEM;
    }
    return 0;
}

static char *dup_opt(const char *s, bool *ok)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *ok = false;
    return d;
}

static int64_t ms_or(int64_t v, int64_t def)
{
    return v > 0 ? v : def;
}

int pfr_k8s_pods_new(const pfr_k8s_pods_opts *o, pfr_k8s_pods **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = check_opts(o, err, errlen);
    if (rc)
        return rc;
    pfr_k8s_pods *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    bool ok = true;
    p->file = dup_opt(o->pods_json_file, &ok);
    p->token_file = dup_opt(o->token_file, &ok);
    p->ca_file = dup_opt(o->ca_file, &ok);
    p->insecure = o->insecure;
    p->timeout_ms = ms_or(o->timeout_ms, 10000);
    p->refresh_ns = ms_or(o->refresh_ms, 60000) * MS;
    p->min_refresh_ns = o->min_refresh_ms < 0 ? 0 : ms_or(o->min_refresh_ms, 5000) * MS;
    rc = ok ? build_url(p, o, err, errlen) : -ENOMEM;
    if (rc) {
        if (rc == -ENOMEM)
            snprintf(err, errlen, "out of memory");
        free(p->url);
        free(p->file);
        free(p->token_file);
        free(p->ca_file);
        free(p);
        return rc;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    atomic_init(&p->stop, false);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->sub_mu, NULL);
    *out = p;
    return 0;
}

/* ---- subscribers ---- */

int pfr_k8s_pods_subscribe(pfr_k8s_pods *p, pfr_k8s_pods_fetched_fn fn, void *ctx)
{
    pthread_mutex_lock(&p->sub_mu);
    int rc = p->started || p->nsubs == SUBSCRIBERS ? -EBUSY : 0;
    if (rc == 0)
        p->subs[p->nsubs++] = (struct subscriber){fn, ctx};
    pthread_mutex_unlock(&p->sub_mu);
    return rc;
}

void pfr_k8s_pods_unsubscribe(pfr_k8s_pods *p, pfr_k8s_pods_fetched_fn fn, void *ctx)
{
    pthread_mutex_lock(&p->sub_mu);
    for (size_t i = 0; i < p->nsubs; i++) {
        if (p->subs[i].fn == fn && p->subs[i].ctx == ctx) {
            p->subs[i] = p->subs[--p->nsubs];
            break;
        }
    }
    pthread_mutex_unlock(&p->sub_mu);
}

static void tell_subscribers(pfr_k8s_pods *p, const pfr_k8s_podlist *l, int rc, const char *err)
{
    pthread_mutex_lock(&p->sub_mu);
    for (size_t i = 0; i < p->nsubs; i++)
        p->subs[i].fn(p->subs[i].ctx, l, rc, err);
    pthread_mutex_unlock(&p->sub_mu);
}

/* ---- a fetch ---- */

/* The bearer token: trailing whitespace dropped; any other control character refused, as it
 * would split or end the header (the stricter of the checks the two clients had). */
static int read_token(const char *path, char **out)
{
    size_t len;
    int rc = pfr_identity_read_file(path, TOKEN_MAX, out, &len);
    if (rc)
        return rc;
    while (len > 0 && (unsigned char)(*out)[len - 1] <= ' ')
        (*out)[--len] = '\0';
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)(*out)[i] < ' ' || (*out)[i] == 0x7f) {
            free(*out);
            *out = NULL;
            return -EINVAL;
        }
    }
    return 0;
}

static int fetch(pfr_k8s_pods *p, char **body, size_t *len, char *err)
{
    if (p->file) {
        int rc = pfr_identity_read_file(p->file, MAX_BODY, body, len);
        if (rc)
            snprintf(err, ERRLEN, "%s: %s", p->file, strerror(-rc));
        return rc;
    }
    char *token = NULL;
    if (p->token_file) {
        int rc = read_token(p->token_file, &token);
        if (rc) {
            snprintf(err, ERRLEN, "token %s: %s", p->token_file, strerror(-rc));
            return rc;
        }
    }
    struct id_http_req rq = {
        .url = p->url,
        .bearer = token,
        .ca_file = p->ca_file,
        .insecure = p->insecure,
        .timeout_ms = p->timeout_ms,
        .max_body = MAX_BODY,
        .stop = &p->stop,
    };
    char why[ERRLEN - 64];
    int rc = pfr_identity_http_get(&rq, body, len, why, sizeof(why));
    free(token);
    if (rc)
        snprintf(err, ERRLEN, "pod list %s: %s", p->url, why);
    return rc;
}

/* One fetch, its list published (mu not held on entry or exit). */
static void fetch_one(pfr_k8s_pods *p)
{
    char err[ERRLEN] = "";
    char *body = NULL;
    size_t len = 0;
    int rc = fetch(p, &body, &len, err);
    struct list *l = NULL;
    if (rc == 0 && !(l = calloc(1, sizeof(*l)))) {
        free(body);
        rc = -ENOMEM;
        snprintf(err, sizeof(err), "out of memory");
    }
    pthread_mutex_lock(&p->mu);
    struct list *old = NULL;
    if (l) {
        l->buf = body;
        l->pub = (pfr_k8s_podlist){.json = body, .len = len, .seq = p->begun};
        atomic_init(&l->refs, 1);
        old = p->latest;
        p->latest = l;
    }
    p->last_rc = rc;
    snprintf(p->last_err, sizeof(p->last_err), "%s", rc ? err : "");
    p->ended++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (!atomic_load(&p->stop))
        tell_subscribers(p, l ? &l->pub : NULL, rc, err);
    pfr_k8s_podlist_unref(old ? &old->pub : NULL);
}

/* The one timer: a fetch at start, refresh_ns after the last one began, or when asked. */
static void *thread_main(void *arg)
{
    pfr_k8s_pods *p = arg;
    pthread_setname_np(pthread_self(), "pfr-k8s-pods");
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        int64_t due = p->last_begin_ns ? p->last_begin_ns + p->refresh_ns : 0;
        int64_t now = pfr_clock_mono_ns();
        if (!p->asked && now < due) {
            struct timespec ts = {.tv_sec = due / 1000000000, .tv_nsec = due % 1000000000};
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            continue;
        }
        p->asked = false;
        p->begun++;
        p->last_begin_ns = now;
        pthread_mutex_unlock(&p->mu);
        fetch_one(p);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int pfr_k8s_pods_start(pfr_k8s_pods *p)
{
    pthread_mutex_lock(&p->sub_mu); /* no subscriber joins after this */
    int rc = -pthread_create(&p->thread, NULL, thread_main, p);
    p->started = rc == 0;
    pthread_mutex_unlock(&p->sub_mu);
    return rc;
}

void pfr_k8s_pods_free(pfr_k8s_pods *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->started)
        pthread_join(p->thread, NULL);
    pfr_k8s_podlist_unref(p->latest ? &p->latest->pub : NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->sub_mu);
    free(p->url);
    free(p->file);
    free(p->token_file);
    free(p->ca_file);
    free(p);
    curl_global_cleanup();
}

/* ---- consumers ---- */

/* The fetch a consumer wanting a list no older than max_age_ns waits for (mu held): none when
 * one began within it and ended (returns ended), the one in flight when it began within it,
 * else a new one, asked for. */
static uint64_t fetch_to_wait_for(pfr_k8s_pods *p, int64_t max_age_ns, int64_t now)
{
    int64_t fresh = max_age_ns > p->min_refresh_ns ? max_age_ns : p->min_refresh_ns;
    if (p->last_begin_ns && now - p->last_begin_ns <= fresh)
        return p->begun; /* ended already, or in flight */
    p->asked = true;
    pthread_cond_broadcast(&p->cv);
    return p->begun + 1;
}

pfr_k8s_podlist *pfr_k8s_pods_get(pfr_k8s_pods *p, int64_t max_age_ns, const atomic_bool *stop,
                                  int *rc, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->mu);
    if (max_age_ns >= 0) {
        int64_t now = pfr_clock_mono_ns();
        uint64_t target = fetch_to_wait_for(p, max_age_ns, now);
        int64_t deadline = now + p->timeout_ms * MS + WAIT_SLACK_NS;
        struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
        uint64_t gen = p->wake_gen;
        while (p->ended < target && !(stop && atomic_load(stop)) && p->wake_gen == gen &&
               pthread_cond_timedwait(&p->cv, &p->mu, &ts) != ETIMEDOUT)
            ;
    }
    if (rc)
        *rc = p->last_rc;
    if (err && errlen)
        snprintf(err, errlen, "%s", p->last_err);
    pfr_k8s_podlist *l = p->latest ? pfr_k8s_podlist_ref(&p->latest->pub) : NULL;
    pthread_mutex_unlock(&p->mu);
    return l;
}

void pfr_k8s_pods_wake(pfr_k8s_pods *p)
{
    pthread_mutex_lock(&p->mu);
    p->wake_gen++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}
