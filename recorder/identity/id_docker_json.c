/*
 * Docker's container JSON -> id_meta: the answer of GET /containers/<id>/json and the on-disk
 * <docker root>/containers/<id>/config.v2.json share the fields used here (Name, Config.Labels,
 * Config.Env). A field of the wrong type makes the whole document an error, as it makes
 * Docker's Go client fail.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "id_internal.h"

static int bad(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "docker container JSON: %s", what);
    return -EBADMSG;
}

static int take_labels(json_t *labels, struct id_meta *m, char *err, size_t errlen)
{
    if (!labels || json_is_null(labels))
        return 0;
    if (!json_is_object(labels))
        return bad(err, errlen, "Config.Labels is not an object");
    const char *key;
    json_t *v;
    json_object_foreach(labels, key, v)
    {
        if (!json_is_string(v))
            return bad(err, errlen, "a label is not a string");
        pfr_identity_meta_label(m, key, json_string_value(v));
    }
    return 0;
}

static int take_env(json_t *env, struct id_meta *m, char *err, size_t errlen)
{
    if (!env || json_is_null(env))
        return 0;
    if (!json_is_array(env))
        return bad(err, errlen, "Config.Env is not an array");
    size_t i;
    json_t *v;
    json_array_foreach(env, i, v)
    {
        if (!json_is_string(v))
            return bad(err, errlen, "an Env entry is not a string");
        pfr_identity_meta_env_entry(m, json_string_value(v), json_string_length(v));
    }
    return 0;
}

static int take_doc(json_t *root, struct id_meta *m, char *err, size_t errlen)
{
    if (!json_is_object(root))
        return bad(err, errlen, "not an object");
    json_t *name = json_object_get(root, "Name");
    if (name && !json_is_null(name)) {
        if (!json_is_string(name))
            return bad(err, errlen, "Name is not a string");
        const char *s = json_string_value(name);
        if (pfr_identity_copy(m->name, sizeof(m->name), s[0] == '/' ? s + 1 : s) != 0)
            m->too_long = true;
    }
    json_t *config = json_object_get(root, "Config");
    if (!config || json_is_null(config))
        return 0;
    if (!json_is_object(config))
        return bad(err, errlen, "Config is not an object");
    int rc = take_labels(json_object_get(config, "Labels"), m, err, errlen);
    return rc ? rc : take_env(json_object_get(config, "Env"), m, err, errlen);
}

int pfr_identity_docker_parse(const char *json, size_t len, struct id_meta *m, char *err,
                              size_t errlen)
{
    memset(m, 0, sizeof(*m));
    json_t *root = pfr_identity_json_load(json, len, "docker container JSON", err, errlen);
    if (!root)
        return -EBADMSG;
    int rc = take_doc(root, m, err, errlen);
    json_decref(root);
    if (rc)
        memset(m, 0, sizeof(*m));
    return rc;
}
