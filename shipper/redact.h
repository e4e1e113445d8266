/* redact: keeping a sink's secrets and a server's hostile bytes out of what the shipper writes
 * down (log, state file, status). A server's answer is untrusted text: it may echo the
 * request's headers (the API key, an Authorization header) or carry bytes that forge log lines.
 *
 * A pfr_secrets owns copies of the secrets (wiped when freed); the other functions work in the
 * caller's buffers and never allocate. */
#ifndef PFR_SHIP_REDACT_H
#define PFR_SHIP_REDACT_H

#include <stddef.h>

#define PFR_SECRETS_MAX 6

typedef struct pfr_secrets {
    char *v[PFR_SECRETS_MAX]; /* owned, non-empty */
    size_t n;
} pfr_secrets;

/* Add a copy of s (NULL or "" is ignored, as is a secret already there or one past the
 * table). 0 or -ENOMEM. */
int pfr_secrets_add(pfr_secrets *k, const char *s);
/* Add base64("user:password"): how the pair travels in an "Authorization: Basic" header.
 * 0 or -ENOMEM. */
int pfr_secrets_add_basic(pfr_secrets *k, const char *user, const char *password);
/* Wipe and free every secret; k is empty again. */
void pfr_secrets_free(pfr_secrets *k);

/* Replace, in s[0..len), every occurrence of a secret by "***" (shorter secrets by as many
 * '*'), in place, longest secrets first. @return the new length (never more than len); s is
 * NUL-terminated at it when there was room (len < its size). */
size_t pfr_redact(char *s, size_t len, const pfr_secrets *k);
/* s[0..len) was cut from a longer text: drop an end that is the start of a secret (the rest of
 * it was cut off, so pfr_redact could not see it). @return the new length. */
size_t pfr_redact_cut(const char *s, size_t len, const pfr_secrets *k);
/* Replace every byte of the NUL-terminated s that is not printable ASCII by '?', in place. */
void pfr_text_printable(char *s);

#endif
