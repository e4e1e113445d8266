/* Shared between the renderers only. */
#ifndef PFR_RENDER_INTERNAL_H
#define PFR_RENDER_INTERNAL_H

#include <jansson.h>

#include "pfr_render.h"

/* The JSON document of pfr_render_json(); frames narrower than min_width (a share of the
 * total, 0 = keep all) are left out. *out is owned by the caller (json_decref). */
int pfr_render_json_doc(const pfr_tree *t, const pfr_render_opts *o, const char *meta_json,
                        double min_width, json_t **out);

/* The same document as the text json_dumps(doc, flags) would give (flags: JSON_COMPACT,
 * JSON_REAL_PRECISION, JSON_ESCAPE_SLASH), without building it: what pfr_render_json and the HTML
 * renderer use. *out (NUL-terminated, *outlen bytes) is the caller's to free. */
int pfr_render_json_text(const pfr_tree *t, const pfr_render_opts *o, const char *meta_json,
                         double min_width, size_t flags, char **out, size_t *outlen);
/* The same written to out (nothing written on error). No newline at the end. */
int pfr_render_json_write(FILE *out, const pfr_tree *t, const pfr_render_opts *o,
                          const char *meta_json, double min_width, size_t flags);

/* A JSON string of text that may not be UTF-8 (names from binaries and scraped profiles): bytes
 * that do not start well-formed UTF-8 become U+FFFD. NULL only when out of memory. */
json_t *pfr_json_text(const char *s);
/* json_object_set_new() under a key that may not be UTF-8 either (same replacement); value is
 * taken over. 0, or -1 with value released. */
int pfr_json_set_text_key(json_t *obj, const char *key, json_t *value);

/* Width of node in display units (side 0 value, or the diff width of both rates). */
double pfr_render_node_width(const pfr_tree_node *n, const pfr_render_opts *o);

/* Write s escaped for XML/HTML text and attribute values. */
void pfr_render_xml_escape(FILE *out, const char *s);

#endif
