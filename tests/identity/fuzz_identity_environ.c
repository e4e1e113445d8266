/* libFuzzer: what a process's own files say about it, which that process writes: its
 * environment (consent to profiling), its command line (a gVisor sandbox's id), and the unit
 * names of system services. The streamed consent reader must answer as the whole-text one for
 * any split of the text. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_identity.h"
#include "pfr_system_service.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    bool whole = pfr_identity_environ_opts_out(text, size);
    /* split at a point the input picks (its first byte), and byte by byte */
    size_t cut = size ? data[0] % (size + 1) : 0;
    pfr_identity_consent c;
    pfr_identity_consent_init(&c);
    pfr_identity_consent_feed(&c, text, cut);
    pfr_identity_consent_feed(&c, text + cut, size - cut);
    if (pfr_identity_consent_refused(&c) != whole)
        __builtin_trap();
    pfr_identity_consent_init(&c);
    for (size_t i = 0; i < size; i++)
        pfr_identity_consent_feed(&c, text + i, 1);
    if (pfr_identity_consent_refused(&c) != whole)
        __builtin_trap();
    /* "disabled" must be in the text for a refusal */
    if (whole && !memmem(text, size, "disabled", 8))
        __builtin_trap();

    char rid[PFR_IDENTITY_RUNTIME_ID_LEN + 1];
    if (pfr_identity_gvisor_rid(text, size, rid) && strlen(rid) != PFR_IDENTITY_RUNTIME_ID_LEN)
        __builtin_trap();

    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char unit[256];
    if (pfr_system_service_unit(s, unit, sizeof(unit)) == 0 && strlen(unit) > strlen(s))
        __builtin_trap();
    pfr_system_service_is(s, s, s, NULL);
    char err[128];
    if (pfr_system_service_prefixes_check(s, err, sizeof(err)) == 0)
        pfr_system_service_is("systemd-journald.service", NULL, NULL, s);
    free(s);
    return 0;
}
