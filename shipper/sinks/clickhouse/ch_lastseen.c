#include "sinks/clickhouse/ch_lastseen.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pfr_ch_lastseen {
    const pfr_ch_columns *c;
    uint32_t *order; /* row indices sorted by (service, Hash) */
    size_t pos;      /* the next row of order to ask about */
    size_t from, to; /* the rows of order the last query asked about */
    uint32_t *qsvc;  /* the last query's services: position - 1 -> service index */
    size_t nqsvc;
    int64_t refresh; /* a row's LastSeen minus this: the end of its chunk */
    uint8_t *skip;   /* per row as added */
    int64_t *stored; /* per row as added */
};

static int key_cmp(const void *a, const void *b, void *ctx)
{
    const pfr_ch_columns *c = ctx;
    const struct pfr_strow *x = &c->strows[*(const uint32_t *)a];
    const struct pfr_strow *y = &c->strows[*(const uint32_t *)b];
    if (x->svc != y->svc)
        return x->svc < y->svc ? -1 : 1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

int pfr_ch_lastseen_new(const pfr_ch_columns *c, int64_t refresh_ns, pfr_ch_lastseen **out)
{
    pfr_ch_lastseen *l = calloc(1, sizeof(*l));
    size_t n = c->nstrows;
    if (!l)
        return -ENOMEM;
    l->c = c;
    l->refresh = refresh_ns > 0 ? refresh_ns : 0;
    l->order = malloc((n + 1) * sizeof(*l->order));
    l->qsvc = malloc((n + 1) * sizeof(*l->qsvc));
    l->skip = calloc(n + 1, 1);
    l->stored = malloc((n + 1) * sizeof(*l->stored));
    if (!l->order || !l->qsvc || !l->skip || !l->stored) {
        pfr_ch_lastseen_free(l);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        l->order[i] = (uint32_t)i;
        l->stored[i] = INT64_MIN;
    }
    qsort_r(l->order, n, sizeof(*l->order), key_cmp, (void *)c);
    *out = l;
    return 0;
}

void pfr_ch_lastseen_free(pfr_ch_lastseen *l)
{
    if (!l)
        return;
    free(l->order);
    free(l->qsvc);
    free(l->skip);
    free(l->stored);
    free(l);
}

const uint8_t *pfr_ch_lastseen_skip(const pfr_ch_lastseen *l)
{
    return l->skip;
}

const int64_t *pfr_ch_lastseen_stored(const pfr_ch_lastseen *l)
{
    return l->stored;
}

/* A SQL string literal. */
static void put_literal(pfr_buf *b, const char *s)
{
    pfr_buf_putc(b, '\'');
    for (; *s; s++) {
        if (*s == '\'' || *s == '\\')
            pfr_buf_putc(b, '\\');
        pfr_buf_putc(b, *s);
    }
    pfr_buf_putc(b, '\'');
}

/* The last query's services, as a list: "'a', 'b'". */
static void put_services(pfr_buf *b, const pfr_ch_lastseen *l)
{
    for (size_t i = 0; i < l->nqsvc; i++) {
        if (i)
            pfr_buf_puts(b, ", ");
        put_literal(b, pfr_ch_columns_service(l->c, l->qsvc[i]));
    }
}

/* Text of a query beyond which no key is added (ClickHouse's max_query_size: 256 KiB). */
#define QUERY_BYTES (192u << 10)

static bool same_key(const pfr_ch_columns *c, uint32_t a, uint32_t b)
{
    return c->strows[a].svc == c->strows[b].svc && c->strows[a].hash == c->strows[b].hash;
}

/* The rows of order from l->pos that the next query asks about: up to max_keys keys and
 * QUERY_BYTES of text (at least one key); their services go to qsvc. Returns the end. */
static size_t next_range(pfr_ch_lastseen *l, const char *table, size_t max_keys)
{
    const pfr_ch_columns *c = l->c;
    size_t est = 400 + strlen(table), end = l->pos, keys = 0;
    uint32_t last_svc = UINT32_MAX;
    for (; end < c->nstrows; end++) {
        uint32_t i = l->order[end];
        if (end > l->pos && same_key(c, l->order[end - 1], i))
            continue;
        /* a Hash twice (alone, in a pair), a service twice (escaped, quoted) */
        size_t more = 2 * 24;
        if (c->strows[i].svc != last_svc)
            more += 2 * (2 * strlen(pfr_ch_columns_service(c, c->strows[i].svc)) + 4);
        if (keys && (keys == max_keys || est + more > QUERY_BYTES))
            break;
        est += more;
        keys++;
        if (c->strows[i].svc != last_svc)
            l->qsvc[l->nqsvc++] = last_svc = c->strows[i].svc;
    }
    return end;
}

int pfr_ch_lastseen_query(pfr_ch_lastseen *l, const char *table, size_t max_keys, pfr_buf *out)
{
    const pfr_ch_columns *c = l->c;
    pfr_buf_reset(out);
    l->from = l->to = l->pos;
    l->nqsvc = 0;
    if (l->pos >= c->nstrows)
        return 0;
    size_t end = next_range(l, table, max_keys ? max_keys : 1);
    pfr_buf_puts(out, "SELECT indexOf([");
    put_services(out, l);
    pfr_buf_puts(out, "], ServiceName) AS s, Hash, toUnixTimestamp64Nano(max(LastSeen)) FROM ");
    pfr_buf_puts(out, table);
    pfr_buf_puts(out, " WHERE ServiceName IN (");
    put_services(out, l);
    pfr_buf_puts(out, ") AND Hash IN (");
    for (size_t i = l->pos; i < end; i++)
        if (i == l->pos || !same_key(c, l->order[i - 1], l->order[i]))
            pfr_buf_printf(out, "%s%" PRIu64, i > l->pos ? "," : "", c->strows[l->order[i]].hash);
    pfr_buf_puts(out, ") AND (s, Hash) IN (");
    size_t k = 0;
    for (size_t i = l->pos, q = 0; i < end; i++) {
        const struct pfr_strow *r = &c->strows[l->order[i]];
        if (i > l->pos && same_key(c, l->order[i - 1], l->order[i]))
            continue;
        while (l->qsvc[q] != r->svc)
            q++;
        pfr_buf_printf(out, "%s(%zu,%" PRIu64 ")", k++ ? "," : "", q + 1, r->hash);
    }
    pfr_buf_puts(out, ") GROUP BY s, Hash FORMAT TabSeparated");
    if (out->oom)
        return -ENOMEM;
    l->to = l->pos = end;
    return 0;
}

/* Flag the asked rows of key (svc, hash) whose chunk ns covers (or whose LastSeen is not after
 * it), noting ns for each. */
static long flag_key(pfr_ch_lastseen *l, uint32_t svc, uint64_t hash, int64_t ns)
{
    const pfr_ch_columns *c = l->c;
    size_t lo = l->from, hi = l->to;
    while (lo < hi) { /* the first asked row not below the key */
        size_t mid = lo + (hi - lo) / 2;
        const struct pfr_strow *r = &c->strows[l->order[mid]];
        if (r->svc < svc || (r->svc == svc && r->hash < hash))
            lo = mid + 1;
        else
            hi = mid;
    }
    long n = 0;
    for (; lo < l->to; lo++) {
        uint32_t i = l->order[lo];
        const struct pfr_strow *r = &c->strows[i];
        if (r->svc != svc || r->hash != hash)
            break;
        l->stored[i] = ns;
        if (r->last_seen - l->refresh <= ns && !l->skip[i]) {
            l->skip[i] = 1;
            n++;
        }
    }
    return n;
}

/* One unsigned decimal field ending at the delimiter end: 0 or -EINVAL. */
static int field_u64(const char **p, char end, uint64_t *v)
{
    const char *s = *p;
    char *e;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    unsigned long long x = strtoull(s, &e, 10);
    if (errno || *e != end)
        return -EINVAL; /* an answer cut short ends without its newline: refused too */
    *v = x;
    *p = *e ? e + 1 : e;
    return 0;
}

long pfr_ch_lastseen_apply(pfr_ch_lastseen *l, const char *ans, char *what, size_t whatlen)
{
    long flagged = 0;
    size_t line = 0;
    for (const char *p = ans ? ans : ""; *p;) {
        line++;
        uint64_t s, hash, ns;
        const char *q = p;
        if (field_u64(&q, '\t', &s) || field_u64(&q, '\t', &hash) || field_u64(&q, '\n', &ns) ||
            s > l->nqsvc || ns > INT64_MAX) {
            snprintf(what, whatlen, "line %zu of the stacks' LastSeen is not \"s\\tHash\\tns\"",
                     line);
            return -EINVAL;
        }
        p = q;
        if (s == 0)
            continue; /* a service not asked about: cannot be, but nothing to flag */
        flagged += flag_key(l, l->qsvc[s - 1], hash, (int64_t)ns);
    }
    return flagged;
}
