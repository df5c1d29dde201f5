/* statefile.c - offline state loader. See statefile.h. */
#include "cluster/statefile.h"
#include "lib/jscan.h"
#include "lib/strbuf.h"
#include "lib/yamljson.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *read_whole_file(const char *path, size_t *len, char **err)
{
    struct strbuf sb;
    strbuf_init(&sb);
    /* "-" is standard input, as kubectl reads "-f -". */
    int rc = strcmp(path, "-") == 0 ? strbuf_read_stream(&sb, stdin) : strbuf_read_file(&sb, path);
    if (rc != 0) {
        int e = errno;
        strbuf_free(&sb);
        strbuf_printf(&sb, "%s: %s", path, strerror(e));
        *err = strbuf_detach(&sb, NULL);
        return NULL;
    }
    return strbuf_detach(&sb, len);
}

/* ConfigMaps go first: CustomResourceLimitation defaults they carry apply
 * to the pods loaded after them. */
enum load_pass { PASS_CONFIGMAPS, PASS_OTHERS };

struct loader {
    struct cluster_cache *cache;
    const char *path;
    struct state_counts *counts;
    int64_t now;
    size_t index; /* position of the current item, for messages */
    enum load_pass pass;
};

static const char *kind_of(const cJSON *obj)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(obj, "kind");
    return cJSON_IsString(k) ? k->valuestring : "";
}

static bool in_pass(const struct loader *ld, const char *kind)
{
    return (strcmp(kind, "ConfigMap") == 0) == (ld->pass == PASS_CONFIGMAPS);
}

static int load_item(struct loader *ld, cJSON *obj, char **err)
{
    if (!in_pass(ld, kind_of(obj)))
        return 0;
    char *why = NULL;
    int rc = cache_apply_object(ld->cache, obj, ld->now, &why);
    if (rc < 0) {
        *err = strbuf_format("%s: item %zu (%s): %s", ld->path, ld->index, kind_of(obj), why ? why : "out of memory");
        free(why);
        return -1;
    }
    const char *kind = kind_of(obj);
    if (rc == 0)
        ld->counts->skipped++;
    else if (strcmp(kind, "Node") == 0)
        ld->counts->nodes++;
    else if (strcmp(kind, "Pod") == 0)
        ld->counts->pods++;
    else
        ld->counts->configmaps++;
    return 0;
}

/* A List (or XList) carries items; anything else is one object. */
static int load_value(struct loader *ld, cJSON *v, char **err)
{
    if (cJSON_IsArray(v)) {
        for (cJSON *doc = v->child; doc; doc = doc->next)
            if (load_value(ld, doc, err) != 0)
                return -1;
        return 0;
    }
    if (!cJSON_IsObject(v)) {
        *err = strbuf_format("%s: expected a Kubernetes object or a kind: List", ld->path);
        return -1;
    }
    cJSON *items = cJSON_GetObjectItemCaseSensitive(v, "items");
    if (!cJSON_IsArray(items)) {
        int rc = load_item(ld, v, err);
        ld->index++;
        return rc;
    }
    for (cJSON *item = items->child; item; item = item->next, ld->index++)
        if (load_item(ld, item, err) != 0)
            return -1;
    return 0;
}

/* The item's top-level "kind", read without building a tree. */
static bool item_kind_is_configmap(const struct jscan_span *span)
{
    struct jscan s;
    struct jscan_str key, value;
    jscan_init(&s, span->ptr, span->len);
    if (jscan_enter_object(&s) != 0)
        return false;
    while (jscan_next_key(&s, &key) == 1) {
        if (jscan_key_is(&key, "kind") && jscan_peek(&s) == JSCAN_STRING)
            return jscan_string(&s, &value) == 0 && value.len == 9 && memcmp(value.ptr, "ConfigMap", 9) == 0;
        if (jscan_skip_value(&s) != 0)
            return false;
    }
    return false;
}

/* JSON: only each element of "items" is turned into a cJSON tree. */
static int load_json_stream(struct loader *ld, const char *text, size_t len, char **err)
{
    struct jscan s;
    jscan_init(&s, text, len);
    if (jscan_peek(&s) != JSCAN_OBJECT || jscan_enter_object(&s) != 0)
        goto whole;
    struct jscan_str key;
    int r;
    while ((r = jscan_next_key(&s, &key)) == 1) {
        if (!jscan_key_is(&key, "items") || jscan_peek(&s) != JSCAN_ARRAY) {
            if (jscan_skip_value(&s) != 0)
                break;
            continue;
        }
        jscan_enter_array(&s);
        int e;
        while ((e = jscan_next_element(&s)) == 1) {
            struct jscan_span span;
            if (jscan_value_span(&s, &span) != 0)
                break;
            if (item_kind_is_configmap(&span) != (ld->pass == PASS_CONFIGMAPS)) {
                ld->index++;
                continue;
            }
            cJSON *item = cJSON_ParseWithLength(span.ptr, span.len);
            if (!item) {
                *err = strbuf_format("%s: item %zu: out of memory", ld->path, ld->index);
                return -1;
            }
            int rc = load_item(ld, item, err);
            cJSON_Delete(item);
            ld->index++;
            if (rc != 0)
                return -1;
        }
        if (e != 0)
            break;
        /* A JSON object with items is a List: the rest is metadata. */
        while ((r = jscan_next_key(&s, &key)) == 1)
            if (jscan_skip_value(&s) != 0)
                break;
        if (r == 0 && jscan_finish(&s) == 0)
            return 0;
        break;
    }
    if (s.error) {
        *err = strbuf_format("%s: malformed JSON at byte %zu: %s", ld->path, s.error_offset, s.error);
        return -1;
    }
whole:;
    cJSON *v = cJSON_ParseWithLength(text, len);
    if (!v) {
        *err = strbuf_format("%s: malformed JSON", ld->path);
        return -1;
    }
    int rc = load_value(ld, v, err);
    cJSON_Delete(v);
    return rc;
}

/* Flow-style YAML also starts with { or [, so text that is not valid JSON
 * is tried as YAML before it is refused. */
cJSON *parse_object_text(const char *text, size_t len, char **err)
{
    if (!text_looks_like_json(text, len))
        return yaml_to_json(text, len, err);
    cJSON *v = cJSON_ParseWithLength(text, len);
    if (v)
        return v;
    char *why = NULL;
    v = yaml_to_json(text, len, &why);
    if (!v)
        *err = strbuf_format("malformed JSON (and not YAML either: %s)", why ? why : "out of memory");
    free(why);
    return v;
}

/* Both passes over an already parsed value. */
static int load_tree(struct loader *ld, cJSON *v, char **err)
{
    for (ld->pass = PASS_CONFIGMAPS;; ld->pass = PASS_OTHERS) {
        ld->index = 0;
        if (load_value(ld, v, err) != 0)
            return -1;
        if (ld->pass == PASS_OTHERS)
            return 0;
    }
}

/* Both passes over JSON text, item by item. */
static int load_json(struct loader *ld, const char *text, size_t len, char **err)
{
    for (ld->pass = PASS_CONFIGMAPS;; ld->pass = PASS_OTHERS) {
        ld->index = 0;
        if (load_json_stream(ld, text, len, err) != 0)
            return -1;
        if (ld->pass == PASS_OTHERS)
            return 0;
    }
}

static int load_yaml(struct loader *ld, const char *text, size_t len, char **err)
{
    char *why = NULL;
    cJSON *v = yaml_to_json(text, len, &why);
    int rc = v ? load_tree(ld, v, err) : -1;
    if (!v)
        *err = strbuf_format("%s: %s", ld->path, why ? why : "out of memory");
    free(why);
    cJSON_Delete(v);
    return rc;
}

int statefile_load(struct cluster_cache *cache, const char *path, struct state_counts *counts, char **err)
{
    memset(counts, 0, sizeof(*counts));
    size_t len = 0;
    char *text = read_whole_file(path, &len, err);
    if (!text)
        return -1;
    struct loader ld = {cache, path, counts, clock_realtime_ns(), 0, PASS_CONFIGMAPS};
    int rc;
    if (!text_looks_like_json(text, len)) {
        rc = load_yaml(&ld, text, len, err);
    } else {
        rc = load_json(&ld, text, len, err);
        /* Not JSON from the very first item on: maybe flow-style YAML. Keep
         * the JSON message if YAML cannot read it either. A syntax error in
         * a later item is a JSON error, not YAML. */
        if (rc != 0 && ld.index == 0 && counts->nodes + counts->pods + counts->configmaps == 0) {
            char *why = NULL;
            cJSON *v = yaml_to_json(text, len, &why);
            if (v) {
                free(*err);
                *err = NULL;
                rc = load_tree(&ld, v, err);
                cJSON_Delete(v);
            }
            free(why);
        }
    }
    free(text);
    return rc;
}
