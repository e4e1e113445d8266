/* HTML renderer: one self-contained page (style, script and data inline; no external URL). */
#include "render_internal.h"

#include <errno.h>
#include <stdlib.h>

int pfr_render_html(FILE *out, const pfr_tree *t, const pfr_render_opts *o, const char *meta_json)
{
    pfr_render_opts def = {0};
    if (!o)
        o = &def;
    double mw = o->min_width == 0 ? 0.0001 : o->min_width;
    char *data;
    size_t len;
    /* ESCAPE_SLASH keeps "</script>" in a frame name from closing the element. */
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
    rc = fwrite(data, 1, len, out) == len ? 0 : -EIO;
    free(data);
    if (rc < 0)
        return rc;
    fputs("</script>\n<script>\n", out);
    fputs(pfr_asset_flame_js, out);
    fputs(
        "\n</script>\n<script>\nwindow.pfrFlame = PfrFlame.mount(document.getElementById('flame'),"
        " JSON.parse(document.getElementById('pfr-data').textContent), {search: ",
        out);
    json_t *s = json_string(o->search ? o->search : "");
    if (!s || json_dumpf(s, out, JSON_ENCODE_ANY | JSON_ESCAPE_SLASH))
        rc = -ENOMEM;
    json_decref(s);
    fputs("});\n</script>\n</body></html>\n", out);
    return rc < 0 ? rc : ferror(out) ? -EIO : 0;
}
