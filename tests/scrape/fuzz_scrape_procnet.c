/* libFuzzer: /proc/PID/net/tcp and tcp6 parsing (text of a hostile or odd /proc). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scrape_procnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (int v6 = 0; v6 < 2; v6++) {
        struct sc_listen *v = NULL;
        size_t n = 0, bad = 0;
        pfr_scrape_procnet_parse(text, v6, &v, &n, 1000, &bad);
        for (size_t i = 0; i < n; i++) {
            char host[64];
            if (v[i].port == 0 || v[i].port > 65535 || v[i].inode == 0)
                __builtin_trap();
            pfr_scrape_listen_host(&v[i], host, sizeof(host));
        }
        free(v);
    }
    free(text);
    return 0;
}
