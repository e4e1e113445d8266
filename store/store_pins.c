/*
 * Pins (store_pins.h): the pins table's rows, which chunks they keep, what they cost, and which
 * one the budget gives up first. No policy of when: the writer's eviction (store_write.c) and
 * the public calls (store_pin_api.c) decide.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_pins.h"
#include "store_util.h"

/* A pin's labels as one text column: "k=v" lines (keys have no '=', no line has a newline). */
static int labels_text(const pfr_kv *kv, size_t n, pfr_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            pfr_buf_put(out, "\n", 1);
        pfr_buf_put(out, kv[i].key, strlen(kv[i].key));
        pfr_buf_put(out, "=", 1);
        pfr_buf_put(out, kv[i].value, strlen(kv[i].value));
    }
    pfr_buf_put(out, "", 1);
    return pfr_buf_err(out);
}

static size_t count_lines(const char *t)
{
    if (!*t)
        return 0;
    size_t n = 1;
    for (; *t; t++)
        n += *t == '\n';
    return n;
}

static char *dup_into(char **at, const unsigned char *src, size_t n)
{
    char *d = *at;
    if (n)
        memcpy(d, src, n);
    d[n] = 0;
    *at += n + 1;
    return d;
}

/* One row (id, from, to, created, service, labels, reason, origin) into p, its strings in one
 * allocation. */
static int pin_row(sqlite3_stmt *st, struct store_pin *p)
{
    const unsigned char *col[4];
    size_t len[4], total = 0;
    for (int i = 0; i < 4; i++) {
        col[i] = sqlite3_column_text(st, 4 + i);
        len[i] = (size_t)sqlite3_column_bytes(st, 4 + i);
        total += len[i] + 1;
    }
    size_t nl = col[1] ? count_lines((const char *)col[1]) : 0;
    *p = (struct store_pin){
        .id = sqlite3_column_int64(st, 0),
        .from_ns = sqlite3_column_int64(st, 1),
        .to_ns = sqlite3_column_int64(st, 2),
        .created_ns = sqlite3_column_int64(st, 3),
    };
    p->mem = malloc(nl * sizeof(pfr_kv) + total);
    if (!p->mem)
        return -ENOMEM;
    p->labels = (pfr_kv *)p->mem;
    char *at = p->mem + nl * sizeof(pfr_kv);
    p->service = col[0] ? dup_into(&at, col[0], len[0]) : NULL;
    char *lab = dup_into(&at, col[1] ? col[1] : (const unsigned char *)"", col[1] ? len[1] : 0);
    p->reason = dup_into(&at, col[2] ? col[2] : (const unsigned char *)"", col[2] ? len[2] : 0);
    p->origin = dup_into(&at, col[3] ? col[3] : (const unsigned char *)"", col[3] ? len[3] : 0);
    p->automatic = strncmp(p->origin, "trigger:", 8) == 0;
    for (char *line = lab; nl && line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        char *eq = strchr(line, '=');
        if (eq) { /* a line without '=' is damage: left out (the pin then keeps more) */
            *eq = 0;
            p->labels[p->nlabels++] = (pfr_kv){line, eq + 1};
        }
        line = next;
    }
    return 0;
}

int pfr_st_pins_load(struct store_db *d, struct store_pins *out)
{
    *out = (struct store_pins){0};
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(d->db,
                           "SELECT id, from_ns, to_ns, created_ns, service, labels, reason, origin"
                           " FROM pins ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return pfr_st_db_err(d);
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (VEC_RESERVE(out->v, out->cap, out->n + 1)) {
            rc = -ENOMEM;
            break;
        }
        if ((rc = pin_row(st, &out->v[out->n])) != 0)
            break;
        out->n++;
    }
    if (!rc && step != SQLITE_DONE)
        rc = pfr_store_errno(step);
    sqlite3_finalize(st);
    if (rc)
        pfr_st_pins_free(out);
    return rc;
}

void pfr_st_pins_free(struct store_pins *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].mem);
    free(p->v);
    *p = (struct store_pins){0};
}

void pfr_st_pins_drop(struct store_pins *p, size_t i)
{
    if (i >= p->n)
        return;
    free(p->v[i].mem);
    memmove(&p->v[i], &p->v[i + 1], (p->n - i - 1) * sizeof(p->v[0]));
    p->n--;
}

static bool pin_keeps(const struct store_pin *pin, const struct rstream *r, int64_t start_ns,
                      int64_t end_ns)
{
    if (pin->from_ns >= end_ns || pin->to_ns <= start_ns)
        return false;
    if (!pin->service && !pin->nlabels)
        return true; /* the whole ring's range, even streams whose row is damaged */
    if (!r)
        return false;
    pfr_store_filter f = {.service = pin->service, .labels = pin->labels, .nlabels = pin->nlabels};
    return pfr_st_stream_matches(r, &f);
}

bool pfr_st_pins_protects(const struct store_pins *p, const struct rstream *r, int64_t start_ns,
                          int64_t end_ns)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (pin_keeps(&p->v[i], r, start_ns, end_ns))
            return true;
    return false;
}

int pfr_st_pins_bytes(struct store_dict *dict, struct store_pins *p, uint64_t *total)
{
    *total = 0;
    if (p->n == 0)
        return 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t i = 0; i < p->n; i++) {
        p->v[i].bytes = 0;
        lo = p->v[i].from_ns < lo ? p->v[i].from_ns : lo;
        hi = p->v[i].to_ns > hi ? p->v[i].to_ns : hi;
    }
    int rc = pfr_st_streams_refresh(dict);
    if (rc)
        return rc;
    /* Metadata only (the payloads are in chunk_data): a scan of the rows overlapping the pins'
     * span, each matched against every pin. */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(dict->sql->db,
                           "SELECT stream_id, start_ns, end_ns, nbytes FROM chunks"
                           " WHERE end_ns > ?1 AND start_ns < ?2",
                           -1, &st, NULL) != SQLITE_OK)
        return pfr_st_db_err(dict->sql);
    sqlite3_bind_int64(st, 1, lo);
    sqlite3_bind_int64(st, 2, hi);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const struct rstream *r = pfr_st_stream_get(dict, sqlite3_column_int64(st, 0));
        int64_t a = sqlite3_column_int64(st, 1), b = sqlite3_column_int64(st, 2);
        uint64_t nb = (uint64_t)sqlite3_column_int64(st, 3);
        bool any = false;
        for (size_t i = 0; i < p->n; i++)
            if (pin_keeps(&p->v[i], r, a, b)) {
                p->v[i].bytes += nb;
                any = true;
            }
        if (any)
            *total += nb;
    }
    rc = step == SQLITE_DONE ? 0 : pfr_store_errno(step);
    sqlite3_finalize(st);
    return rc;
}

long pfr_st_pins_victim(const struct store_pins *p, bool manual_too)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].automatic)
            return (long)i;
    return manual_too && p->n ? 0 : -1;
}

static int bad(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
    return -EINVAL;
}

int pfr_st_pins_validate(const pfr_pin_in *in, char *err, size_t errlen)
{
    if (!in)
        return bad(err, errlen, "no pin");
    if (in->from_ns > in->to_ns)
        return bad(err, errlen, "the range's start (--from) is after its end (--to)");
    if (in->from_ns == in->to_ns)
        return bad(err, errlen, "the range is empty (--from equals --to)");
    size_t rl = in->reason ? strlen(in->reason) : 0;
    if (rl == 0)
        return bad(err, errlen, "a pin needs a reason (--reason TEXT)");
    if (rl > PFR_PIN_REASON_MAX) {
        char msg[128];
        snprintf(msg, sizeof(msg), "the reason is %zu bytes, longer than the %d a pin keeps", rl,
                 PFR_PIN_REASON_MAX);
        return bad(err, errlen, msg);
    }
    size_t ol = in->origin ? strlen(in->origin) : 0;
    if (ol == 0 || ol > PFR_PIN_ORIGIN_MAX ||
        (strncmp(in->origin, "manual:", 7) != 0 && strncmp(in->origin, "trigger:", 8) != 0))
        return bad(err, errlen, "a pin's origin is \"manual:<user>\" or \"trigger:<kind>\"");
    if (in->service && !in->service[0])
        return bad(err, errlen, "an empty service name");
    if (in->nlabels > PFR_PIN_LABELS_MAX)
        return bad(err, errlen, "too many labels (at most 16)");
    for (size_t i = 0; i < in->nlabels; i++) {
        const pfr_kv *kv = &in->labels[i];
        if (!kv->key || !kv->key[0] || !kv->value || strpbrk(kv->key, "=\n") ||
            strchr(kv->value, '\n'))
            return bad(err, errlen, "a label is key=value, the key not empty, no newline");
    }
    return 0;
}

int pfr_st_pins_insert(struct store_db *d, const pfr_pin_in *in, int64_t created_ns, uint64_t bytes,
                       int64_t *id_out)
{
    pfr_buf lab = {0};
    int rc = labels_text(in->labels, in->nlabels, &lab);
    sqlite3_stmt *st = NULL;
    if (!rc && sqlite3_prepare_v2(d->db,
                                  "INSERT INTO pins(from_ns, to_ns, service, labels, reason,"
                                  " origin, created_ns, bytes) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
                                  -1, &st, NULL) != SQLITE_OK)
        rc = pfr_st_db_err(d);
    if (!rc) {
        sqlite3_bind_int64(st, 1, in->from_ns);
        sqlite3_bind_int64(st, 2, in->to_ns);
        if (in->service)
            sqlite3_bind_text(st, 3, in->service, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, (const char *)lab.data, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, in->reason, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, in->origin, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, created_ns);
        sqlite3_bind_int64(st, 8, (int64_t)bytes);
        rc = pfr_st_step_done(st);
    }
    if (!rc && id_out)
        *id_out = sqlite3_last_insert_rowid(d->db);
    sqlite3_finalize(st);
    pfr_buf_free(&lab);
    return rc;
}

int pfr_st_pins_set_range(struct store_db *d, int64_t id, int64_t from_ns, int64_t to_ns,
                          uint64_t bytes)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(d->db,
                           "UPDATE pins SET from_ns = ?2, to_ns = ?3, bytes = ?4 WHERE id = ?1", -1,
                           &st, NULL) != SQLITE_OK)
        return pfr_st_db_err(d);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, from_ns);
    sqlite3_bind_int64(st, 3, to_ns);
    sqlite3_bind_int64(st, 4, (int64_t)bytes);
    int rc = pfr_st_step_done(st);
    if (!rc && sqlite3_changes(d->db) == 0)
        rc = -ENOENT;
    sqlite3_finalize(st);
    return rc;
}

int pfr_st_pins_delete(struct store_db *d, int64_t id)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(d->db, "DELETE FROM pins WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
        return pfr_st_db_err(d);
    sqlite3_bind_int64(st, 1, id);
    int rc = pfr_st_step_done(st);
    if (!rc && sqlite3_changes(d->db) == 0)
        rc = -ENOENT;
    sqlite3_finalize(st);
    return rc;
}
