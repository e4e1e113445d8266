/* Fuzz target for what pfr-shipper reads from outside: config files (INI), and the network's
 * answers (Retry-After, ClickHouse's schema, survey and LastSeen answers and exception codes,
 * answer snippets for logs with secrets redacted, HTML pages told apart), plus the pprof re-timing
 * walk. The first byte picks the parser. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/clickhouse/ch_schema.h"
#include "sinks/clickhouse/ch_error_codes.h"
#include "sinks/clickhouse/ch_lastseen.h"
#include "config.h"
#include "sinks/coroot_conventions.h"
#include "http.h"
#include "fmt.h"
#include "pfr_units.h"
#include "pfr_time.h"
#include "redact.h"
#include "retry.h"
#include "sink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1 << 20))
        return 0;
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    char err[256], out[512];
    switch (data[0] % 6) {
    case 0: {
        pfr_shipper_conf c = {0};
        pfr_shipper_conf_parse_ini(&c, s, err, sizeof(err));
        pfr_shipper_conf_free(&c);
        break;
    }
    case 1: {
        pfr_retry_after_ms(s, 1714557600);
        int64_t ms, t;
        uint64_t v;
        pfr_parse_duration(s, &ms, err, sizeof(err));
        pfr_parse_size(s, &v, err, sizeof(err));
        pfr_time_parse(s, 1714557600ll * 1000000000, &t, err, sizeof(err));
        break;
    }
    case 2: {
        pfr_ch_check_columns(s, err, sizeof(err));
        bool rep, found;
        pfr_ch_dedup_window(s, "profiling_samples", &rep, &found);
        pfr_ch_layout l;
        pfr_ch_layout_read(s, &l);
        pfr_ch_layout_clustered(&l, err, sizeof(err));
        /* an answer to the stacks' LastSeen question */
        pfr_ch_columns c = {0};
        pfr_ch_lastseen *ls = NULL;
        pfr_buf q = {0};
        pfr_ch_columns_stack(&c, "a", 1, 5);
        pfr_ch_columns_stack(&c, "b", 2, 5);
        if (!c.err && pfr_ch_lastseen_new(&c, 0, &ls) == 0 &&
            pfr_ch_lastseen_query(ls, "profiling_stacks", 8, &q) == 0)
            pfr_ch_lastseen_apply(ls, s, err, sizeof(err));
        pfr_ch_lastseen_free(ls);
        pfr_buf_free(&q);
        pfr_ch_columns_free(&c);
        break;
    }
    case 3: {
        /* An answer's way into a message: its exception code, secrets redacted, cut, quoted. */
        pfr_ch_verdict_of(400, pfr_ch_exception_code(s, s));
        pfr_secrets k = {0};
        pfr_secrets_add(&k, "key");
        pfr_secrets_add(&k, "k");
        pfr_secrets_add_basic(&k, "u", "key");
        size_t n = pfr_redact(s, strlen(s), &k);
        n = pfr_redact_cut(s, n, &k);
        pfr_http_snippet(s, n, out, sizeof(out));
        /* and how it is judged: an HTML page or not, and the gist of its quote */
        pfr_http_resp resp = {.status = 400, .body = s, .body_len = n};
        pfr_http_snippet(s, n, resp.quote, sizeof(resp.quote));
        char gist[PFR_HTTP_QUOTE_MAX];
        if (pfr_sink_page_answer(&resp))
            pfr_sink_page_title(resp.quote, gist, sizeof(gist));
        pfr_text_printable(s);
        pfr_secrets_free(&k);
        break;
    }
    case 4: {
        uint8_t *o;
        size_t ol;
        if (pfr_pprof_retime(data + 1, size - 1, 5, 10, false, 1, &o, &ol) == 0)
            free(o);
        break;
    }
    case 5: {
        char r[512];
        pfr_url_redact(s, r, sizeof(r));
        char *e = pfr_url_escape(s);
        free(e);
        break;
    }
    }
    free(s);
    return 0;
}
