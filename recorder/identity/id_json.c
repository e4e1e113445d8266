/* jansson helpers shared by pfr_identity's parsers (id_internal.h). */
#include <jansson.h>
#include <stdio.h>

#include "id_internal.h"

json_t *pfr_identity_json_load(const char *json, size_t len, const char *what, char *err,
                               size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!root)
        snprintf(err, errlen, "%s: %s (line %d)", what, je.text, je.line);
    return root;
}

const char *pfr_identity_json_str(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}
