#include "redact.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int add_owned(pfr_secrets *k, char *s)
{
    for (size_t i = 0; i < k->n; i++) {
        if (!strcmp(k->v[i], s)) {
            explicit_bzero(s, strlen(s));
            free(s);
            return 0;
        }
    }
    if (k->n == PFR_SECRETS_MAX) {
        /* The table holds every form the shipper sends; more would be a programming error. */
        explicit_bzero(s, strlen(s));
        free(s);
        return 0;
    }
    k->v[k->n++] = s;
    return 0;
}

int pfr_secrets_add(pfr_secrets *k, const char *s)
{
    if (!s || !*s)
        return 0;
    char *c = strdup(s);
    return c ? add_owned(k, c) : -ENOMEM;
}

static char *base64(const unsigned char *in, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *o = 0;
    return out;
}

int pfr_secrets_add_basic(pfr_secrets *k, const char *user, const char *password)
{
    size_t ul = user ? strlen(user) : 0, pl = password ? strlen(password) : 0;
    if (!pl)
        return 0;
    unsigned char *pair = malloc(ul + 1 + pl);
    if (!pair)
        return -ENOMEM;
    if (ul)
        memcpy(pair, user, ul);
    pair[ul] = ':';
    memcpy(pair + ul + 1, password, pl);
    char *b = base64(pair, ul + 1 + pl);
    explicit_bzero(pair, ul + 1 + pl);
    free(pair);
    return b ? add_owned(k, b) : -ENOMEM;
}

void pfr_secrets_free(pfr_secrets *k)
{
    for (size_t i = 0; i < k->n; i++) {
        explicit_bzero(k->v[i], strlen(k->v[i]));
        free(k->v[i]);
        k->v[i] = NULL;
    }
    k->n = 0;
}

/* The secret at s (of the len bytes left) that is longest, or NULL. */
static const char *match_at(const char *s, size_t len, const pfr_secrets *k, size_t *mlen)
{
    const char *best = NULL;
    *mlen = 0;
    for (size_t i = 0; i < k->n; i++) {
        size_t l = strlen(k->v[i]);
        if (l <= len && l > *mlen && !memcmp(s, k->v[i], l)) {
            best = k->v[i];
            *mlen = l;
        }
    }
    return best;
}

size_t pfr_redact(char *s, size_t len, const pfr_secrets *k)
{
    if (!k || !k->n)
        return len;
    size_t r = 0, w = 0;
    while (r < len) {
        size_t ml;
        if (match_at(s + r, len - r, k, &ml)) {
            size_t stars = ml < 3 ? ml : 3;
            memset(s + w, '*', stars);
            w += stars;
            r += ml;
            continue;
        }
        s[w++] = s[r++];
    }
    if (w < len)
        s[w] = 0;
    return w;
}

size_t pfr_redact_cut(const char *s, size_t len, const pfr_secrets *k)
{
    if (!k)
        return len;
    size_t keep = len;
    for (size_t i = 0; i < k->n; i++) {
        size_t l = strlen(k->v[i]);
        /* The longest end of s that is a proper start of this secret. */
        for (size_t t = l - 1 < len ? l - 1 : len; t > 0; t--) {
            if (!memcmp(s + len - t, k->v[i], t)) {
                if (len - t < keep)
                    keep = len - t;
                break;
            }
        }
    }
    return keep;
}

void pfr_text_printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            *s = '?';
}
