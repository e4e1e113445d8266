#include "pfr_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The one piece of process-wide state: the log threshold, set once at start-up. */
static enum pfr_log_level g_level = PFR_LOG_INFO;

void pfr_log_set_level(enum pfr_log_level lvl)
{
    g_level = lvl;
}

enum pfr_log_level pfr_log_get_level(void)
{
    return g_level;
}

int pfr_log_parse_level(const char *s, enum pfr_log_level *out)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *out = (enum pfr_log_level)i;
            return 0;
        }
    }
    return -1;
}

void pfr_log(enum pfr_log_level lvl, const char *fmt, ...)
{
    /* sd-daemon(3) priority prefixes, so journald keeps the level. */
    static const char *journal[] = {"<3>error: ", "<4>warn: ", "<6>", "<7>debug: "};
    static const char *plain[] = {"error: ", "warn: ", "", "debug: "};
    if (lvl > g_level)
        return;
    /* Under systemd, stderr goes to journald, which reads sd-daemon(3) priority prefixes. */
    const char **prefix = getenv("JOURNAL_STREAM") ? journal : plain;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    fprintf(stderr, "%s%s\n", prefix[lvl], buf);
}
