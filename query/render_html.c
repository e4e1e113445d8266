/* HTML renderer: one self-contained page (style, script and data inline; no external URL). */
#include "render_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* JSON text inside a <script> element. '<' only occurs inside JSON strings, where \u003c reads
 * the same: with none left, no name can close the element ("</script>") or turn the rest of the
 * page into script ("<!--<script>"). */
static int write_script_json(FILE *out, const char *json, size_t len)
{
    for (const char *p = json, *end = json + len; p < end;) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        size_t n = lt ? (size_t)(lt - p) : (size_t)(end - p);
        if (fwrite(p, 1, n, out) != n || (lt && fputs("\\u003c", out) == EOF))
            return -EIO;
        p += n + (lt ? 1 : 0);
    }
    return 0;
}

int pfr_render_html(FILE *out, const pfr_tree *t, const pfr_render_opts *o, const char *meta_json)
{
    pfr_render_opts def = {0};
    if (!o)
        o = &def;
    double mw = o->min_width == 0 ? 0.0001 : o->min_width;
    char *data;
    size_t len;
    int rc = pfr_render_json_text(t, o, meta_json, mw > 0 ? mw : 0,
                                  JSON_COMPACT | JSON_ESCAPE_SLASH | JSON_REAL_PRECISION(10), &data,
                                  &len);
    if (rc < 0)
        return rc;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          out);
    pfr_render_xml_escape(out, o->title ? o->title : "Flame graph");
    fputs("</title>\n<style>\nbody{margin:8px;background:#fff}\n", out);
    fputs(pfr_asset_flame_css, out);
    fputs("</style>\n</head><body>\n<div id=\"flame\"></div>\n"
          "<script type=\"application/json\" id=\"pfr-data\">",
          out);
    rc = write_script_json(out, data, len);
    free(data);
    if (rc < 0)
        return rc;
    fputs("</script>\n<script>\n", out);
    fputs(pfr_asset_flame_js, out);
    fputs(
        "\n</script>\n<script>\nwindow.pfrFlame = PfrFlame.mount(document.getElementById('flame'),"
        " JSON.parse(document.getElementById('pfr-data').textContent), {search: ",
        out);
    json_t *s = pfr_json_text(o->search ? o->search : "");
    char *text = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_ESCAPE_SLASH) : NULL;
    rc = text ? write_script_json(out, text, strlen(text)) : -ENOMEM;
    free(text);
    json_decref(s);
    fputs("});\n</script>\n</body></html>\n", out);
    return rc < 0 ? rc : ferror(out) ? -EIO : 0;
}
