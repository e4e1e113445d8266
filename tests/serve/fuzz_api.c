/* libFuzzer target: any request to the API (endpoint and query string) gets a JSON answer with a
 * 2xx, 4xx or 503 status, never a crash, a leak or a 500. Input: "ENDPOINT?k=v&k=v..." (the path
 * after /api/), run against a small ring made once in /tmp: the "shift" service and the
 * Coroot-style and hostile service names of ring_fixture.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "pfr_serve.h"
#include "ring_fixture.h"

#define T0 (1714564800LL * FX_S)

static char ring_dir[64];
static char ring_path[128];

static void remove_ring(void)
{
    unlink(ring_path);
    char wal[160];
    snprintf(wal, sizeof(wal), "%s-wal", ring_path);
    unlink(wal);
    snprintf(wal, sizeof(wal), "%s-shm", ring_path);
    unlink(wal);
    rmdir(ring_dir);
}

static const char *ring(void)
{
    if (ring_path[0])
        return ring_path;
    snprintf(ring_dir, sizeof(ring_dir), "/tmp/pfr-fuzz-serve-XXXXXX");
    if (!mkdtemp(ring_dir))
        abort();
    snprintf(ring_path, sizeof(ring_path), "%s/ring.db", ring_dir);
    pfr_store *s = pfr_fx_open(ring_path);
    if (pfr_fx_shift_ring(s, "app", T0, 12) != 0 || pfr_fx_names_ring(s, T0, 12) != 0)
        abort();
    pfr_store_close(s);
    atexit(remove_ring);
    return ring_path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char buf[1024], path[sizeof(buf) + 8];
    pfr_kv args[64];
    size_t nargs = 0;
    if (size >= sizeof(buf))
        size = sizeof(buf) - 1;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *q = strchr(buf, '?');
    if (q)
        *q++ = '\0';
    snprintf(path, sizeof(path), "/api/%s", buf);
    for (char *save = NULL, *kv = q ? strtok_r(q, "&", &save) : NULL; kv && nargs < 64;
         kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (eq)
            *eq++ = '\0';
        args[nargs++] = (pfr_kv){.key = kv, .value = eq ? eq : ""};
    }
    pfr_serve_api api = {.store_path = ring(), .limits = pfr_serve_limits_resolve(NULL)};
    pfr_serve_response r;
    if (pfr_serve_api_call(&api, path, args, nargs, T0 + 120 * FX_S, &r) != 0 || !r.body)
        abort();
    json_error_t err;
    json_t *doc = json_loadb(r.body, r.len, 0, &err);
    if (!doc || r.status == 500 || (r.status >= 300 && r.status < 400) ||
        (r.status != 200 && !json_is_string(json_object_get(doc, "error")))) {
        fprintf(stderr, "%s -> %u %.300s\n", path, r.status, r.body);
        abort();
    }
    json_decref(doc);
    pfr_serve_response_free(&r);
    return 0;
}
