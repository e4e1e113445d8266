/*
 * Consent to profiling, from a process's environment (pfr_identity.h): the node agent's rule
 * (its proc/flags.go GetFlags), read as a stream so that a bounded buffer reads any environ.
 *
 * The agent reads /proc/PID/environ entry by entry, each ended by a NUL (a last entry without
 * one is dropped), splits each at its first '=', and for the key COROOT_EBPF_PROFILING sets
 * "profiling disabled" to whether the value contains "disabled": a later entry of the same key
 * overrides an earlier one. PFR_PROFILING is read the same way; either one disables.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "id_internal.h"

static const char *const consent_keys[PFR_CONSENT_KEYS] = {"COROOT_EBPF_PROFILING",
                                                           "PFR_PROFILING"};
static const char disabled[] = "disabled";

enum { AT_START = 0, IN_KEY, IN_VALUE, SKIP };

void pfr_identity_consent_init(pfr_identity_consent *c)
{
    memset(c, 0, sizeof(*c));
}

/* The key whose text so far is the whole of key[0..kpos) and that ends there, or -1. */
static int key_done(const pfr_identity_consent *c)
{
    for (int k = 0; k < PFR_CONSENT_KEYS; k++)
        if ((c->cand & (1u << k)) && strlen(consent_keys[k]) == c->kpos)
            return k;
    return -1;
}

/* One character of a key: the candidates whose next character it is stay. */
static void key_char(pfr_identity_consent *c, char ch)
{
    for (int k = 0; k < PFR_CONSENT_KEYS; k++) {
        const char *key = consent_keys[k];
        if ((c->cand & (1u << k)) && (c->kpos >= strlen(key) || key[c->kpos] != ch))
            c->cand &= ~(1u << k);
    }
    c->kpos++;
    if (!c->cand)
        c->state = SKIP;
}

/* One character of a value of interest: "disabled" has no proper border but its 'd's, so
 * after a mismatch the match restarts at this character. */
static void value_char(pfr_identity_consent *c, char ch)
{
    if (c->dpos == sizeof(disabled) - 1)
        return; /* already found in this value */
    if (ch == disabled[c->dpos])
        c->dpos++;
    else
        c->dpos = ch == disabled[0] ? 1 : 0;
}

static void end_entry(pfr_identity_consent *c)
{
    if (c->state == IN_VALUE)
        c->off[c->key] = c->dpos == sizeof(disabled) - 1;
    c->state = AT_START;
}

void pfr_identity_consent_feed(pfr_identity_consent *c, const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char ch = buf[i];
        if (ch == '\0') {
            end_entry(c);
            continue;
        }
        switch (c->state) {
        case AT_START:
            c->state = IN_KEY;
            c->cand = (1u << PFR_CONSENT_KEYS) - 1;
            c->kpos = 0;
            /* fall through */
        case IN_KEY:
            if (ch == '=') {
                int k = key_done(c);
                c->state = k >= 0 ? IN_VALUE : SKIP;
                c->key = k >= 0 ? (unsigned char)k : 0;
                c->dpos = 0;
            } else {
                key_char(c, ch);
            }
            break;
        case IN_VALUE:
            value_char(c, ch);
            break;
        default: /* SKIP: an entry of no interest, to its NUL */
            break;
        }
    }
}

bool pfr_identity_consent_refused(const pfr_identity_consent *c)
{
    for (int k = 0; k < PFR_CONSENT_KEYS; k++)
        if (c->off[k])
            return true;
    return false;
}

bool pfr_identity_environ_opts_out(const char *buf, size_t len)
{
    pfr_identity_consent c;
    pfr_identity_consent_init(&c);
    pfr_identity_consent_feed(&c, buf, len);
    return pfr_identity_consent_refused(&c);
}

int pfr_identity_consent_read(const char *proc_root, int pid, size_t max, bool *opted_out)
{
    char path[256], buf[4096];
    *opted_out = false;
    if (snprintf(path, sizeof(path), "%s/%d/environ", proc_root ? proc_root : "/proc", pid) >=
        (int)sizeof(path))
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    pfr_identity_consent c;
    pfr_identity_consent_init(&c);
    size_t total = 0;
    int rc = 0;
    while (total < max) {
        size_t want = max - total < sizeof(buf) ? max - total : sizeof(buf);
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        pfr_identity_consent_feed(&c, buf, (size_t)n);
        total += (size_t)n;
    }
    close(fd);
    /* past max, the entry cut there has no NUL and counts for nothing, as the agent's last
     * unterminated entry; what came before it stands */
    *opted_out = pfr_identity_consent_refused(&c);
    return rc;
}
