/* libFuzzer target: every name (any bytes but NUL) printed in JSON form and in folded form reads
 * back to its bytes (pfr_names.h); the JSON form is UTF-8 and a plain name is printed as it is;
 * the folded form has no ';' and no control character; reading any text never crashes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfr_names.h"
#include "pfr_render.h"
#include "pfr_utf8.h"

static void check_utf8(const char *s)
{
    int32_t cp;
    for (size_t n = strlen(s), i = 0, len; i < n; i += len)
        if (!(len = pfr_utf8_seq((const unsigned char *)s + i, n - i, &cp)))
            abort();
}

static void check_reads_back(const char *printed, pfr_name_form f, const char *name)
{
    pfr_buf b = {0};
    if (pfr_name_read(printed, strlen(printed), f, &b) < 0 || b.len != strlen(name) ||
        (b.len && memcmp(b.data, name, b.len) != 0))
        abort();
    pfr_buf_free(&b);
}

static void check_json(const char *name)
{
    int err;
    char *printed = pfr_name_json(name, &err);
    if (err)
        abort();
    const char *p = printed ? printed : name;
    check_utf8(p);
    check_reads_back(p, PFR_NAME_JSON, name);
    char *parsed = pfr_name_parse(p, PFR_NAME_JSON, &err);
    if (err || strcmp(parsed ? parsed : p, name) != 0 || (!printed && parsed))
        abort();
    free(parsed);
    free(printed);
}

static void check_folded(const char *name)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        abort();
    pfr_text_put(f, name, PFR_TEXT_SEMICOLON);
    fclose(f);
    for (size_t i = 0; i < len; i++)
        if (text[i] == ';' || (unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            abort();
    check_utf8(text);
    check_reads_back(text, PFR_NAME_FOLDED, name);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[4096];
    if (size >= sizeof(name))
        size = sizeof(name) - 1;
    memcpy(name, data, size);
    name[size] = '\0'; /* a name ends at its first NUL, as in the ring */
    check_json(name);
    check_folded(name);
    int err;
    free(pfr_name_parse(name, PFR_NAME_FOLDED, &err)); /* any text reads as something */
    return 0;
}
