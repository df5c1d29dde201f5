/* podspec.c - Pod object -> pod_info; decision annotations. See podspec.h. */
#include "cluster/podspec.h"
#include "cluster/podparts.h"
#include "lib/jscan.h"
#include "lib/jsonset.h"
#include "lib/quantity.h"
#include "lib/strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static const char *string_field(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Quantities arrive as strings ("50", "1Ki") or, from hand-written YAML and
 * some clients, as bare numbers; both are accepted, as the API server does. */
static qty_status parse_int_quantity(const cJSON *v, int64_t *out)
{
    if (cJSON_IsString(v))
        return quantity_parse_int(v->valuestring, strlen(v->valuestring), out);
    if (!cJSON_IsNumber(v))
        return QTY_ERR_SYNTAX;
    double d = v->valuedouble;
    if (d < 0)
        return QTY_ERR_NEGATIVE;
    if (d != floor(d))
        return QTY_ERR_FRACTION;
    if (d >= 9.2e18)
        return QTY_ERR_RANGE;
    *out = (int64_t)d;
    return QTY_OK;
}

/* Extended resources have requests equal to limits; limits are the source of
 * truth, requests are read only when a container names no limits at all. */
static const cJSON *container_amounts(const cJSON *container)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(container, "resources");
    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(res, "limits");
    if (cJSON_IsObject(limits) && limits->child)
        return limits;
    const cJSON *requests = cJSON_GetObjectItemCaseSensitive(res, "requests");
    return cJSON_IsObject(requests) ? requests : NULL;
}

static int read_amount(const cJSON *v, const char *resource, int64_t *value, const char *cname, struct strbuf *err)
{
    qty_status st = parse_int_quantity(v, value);
    bool past_cap = st == QTY_OK && *value > GPU_AMOUNT_MAX;
    if (past_cap)
        st = QTY_ERR_RANGE;
    if (st == QTY_OK)
        return 0;
    strbuf_printf(err, "container \"%s\": %s ", cname, resource);
    if (cJSON_IsString(v))
        strbuf_json_string(err, v->valuestring);
    else
        strbuf_puts(err, "value");
    strbuf_printf(err, " is invalid: %s", quantity_status_text(st));
    if (past_cap)
        strbuf_printf(err, " (at most %" PRId64 ")", GPU_AMOUNT_MAX);
    return -1;
}

static int read_raw_amounts(const cJSON *amounts, const char *cname, struct gpu_amounts *a, struct strbuf *err)
{
    gpu_amounts_clear(a);
    for (int k = 0, n = gpu_amount_key_count(); amounts && k < n; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(amounts, gpu_amount_key_name(k));
        int64_t value;
        if (!v)
            continue;
        if (read_amount(v, gpu_amount_key_name(k), &value, cname, err) != 0)
            return -1;
        gpu_amounts_set(a, k, value);
    }
    for (const cJSON *v = amounts ? amounts->child : NULL; v; v = v->next) {
        int64_t value;
        if (!v->string || !gpu_amount_prefixed(v->string, strlen(v->string)))
            continue;
        if (read_amount(v, v->string, &value, cname, err) != 0 ||
            gpu_amounts_set_prefixed(a, v->string, strlen(v->string), value, cname, err) != 0)
            return -1;
    }
    return 0;
}

/* The wrong JSON type in a list of containers, or NULL. */
static const char *list_shape_error(const cJSON *list, const char *const why[4])
{
    if (list && !cJSON_IsArray(list) && !cJSON_IsNull(list))
        return why[0];
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next) {
        if (!cJSON_IsObject(c))
            return why[1];
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
        if (!res || cJSON_IsNull(res))
            continue;
        if (!cJSON_IsObject(res))
            return why[2];
        const cJSON *limits = cJSON_GetObjectItemCaseSensitive(res, "limits");
        const cJSON *requests = cJSON_GetObjectItemCaseSensitive(res, "requests");
        if ((limits && !cJSON_IsObject(limits) && !cJSON_IsNull(limits)) ||
            (requests && !cJSON_IsObject(requests) && !cJSON_IsNull(requests)))
            return why[3];
    }
    return NULL;
}

/* A Pod whose GPU-relevant fields have the wrong JSON types would otherwise
 * look like a pod without GPUs and pass every node. */
static const char *shape_error(const cJSON *spec)
{
    static const char *const app[4] = {"spec.containers must be an array", "spec.containers[] entries must be objects",
                                       "spec.containers[].resources must be an object",
                                       "spec.containers[].resources.limits and .requests must be objects"};
    static const char *const init[4] = {"spec.initContainers must be an array",
                                        "spec.initContainers[] entries must be objects",
                                        "spec.initContainers[].resources must be an object",
                                        "spec.initContainers[].resources.limits and .requests must be objects"};
    if (spec && !cJSON_IsObject(spec))
        return "spec must be an object";
    const char *bad = list_shape_error(cJSON_GetObjectItemCaseSensitive(spec, "containers"), app);
    return bad ? bad : list_shape_error(cJSON_GetObjectItemCaseSensitive(spec, "initContainers"), init);
}

/* Does the container name a managed GPU resource in limits or requests? */
static bool names_gpu_resource(const cJSON *container)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(container, "resources");
    const cJSON *sets[2] = {cJSON_GetObjectItemCaseSensitive(res, "limits"),
                            cJSON_GetObjectItemCaseSensitive(res, "requests")};
    for (int k = 0; k < 2; k++)
        for (const cJSON *v = cJSON_IsObject(sets[k]) ? sets[k]->child : NULL; v; v = v->next)
            if (v->string && gpu_family_names_resource(v->string, strlen(v->string)))
                return true;
    return false;
}

static int classify_container(const cJSON *container, struct container_request *c, struct strbuf *err)
{
    struct gpu_amounts a;
    if (read_raw_amounts(container_amounts(container), c->name, &a, err) != 0)
        return -1;
    return gpu_family_classify(&a, c, err);
}

/* Read the containers of list into reqs (n of them): names, and requests
 * until one is invalid (that one becomes the pod's request_error). */
static int read_container_list(const cJSON *list, struct container_request *reqs, bool init, struct pod_info *pod)
{
    struct strbuf err;
    strbuf_init(&err);
    int i = 0;
    for (const cJSON *c = list ? list->child : NULL; c; c = c->next, i++) {
        struct container_request *req = &reqs[i];
        const char *name = string_field(c, "name");
        const char *restart = init ? string_field(c, "restartPolicy") : NULL;
        req->name = pod_container_name(name, name ? strlen(name) : 0, i);
        req->sidecar = restart && strcmp(restart, "Always") == 0;
        if (!req->name)
            goto oom;
        pod->names_gpu |= names_gpu_resource(c);
        if (!pod->request_error && classify_container(c, req, &err) != 0) {
            pod->request_error = strbuf_detach(&err, NULL);
            if (!pod->request_error)
                goto oom;
        }
        if (!init && req->family)
            pod->uses_gpu = true;
    }
    strbuf_free(&err);
    return 0;
oom:
    strbuf_free(&err);
    return -1;
}

static int parse_init_containers(const cJSON *spec, struct pod_info *pod)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(spec, "initContainers");
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    pod->ninit = n;
    if (n == 0)
        return 0;
    struct container_request *init = calloc((size_t)n, sizeof(*init));
    if (!init)
        return -1;
    int rc = read_container_list(list, init, true, pod);
    if (rc == 0)
        rc = pod_place_init_containers(pod, init, n);
    for (int j = 0; j < n; j++)
        free(init[j].name);
    free(init);
    return rc;
}

static int parse_containers(const cJSON *spec, struct pod_info *pod)
{
    const char *bad = shape_error(spec);
    if (bad)
        return (pod->request_error = strdup(bad)) ? 0 : -1;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(spec, "containers");
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    pod->ncontainers = n;
    if (n > 0 && !(pod->containers = calloc((size_t)n, sizeof(*pod->containers))))
        return -1;
    if ((n > 0 && read_container_list(list, pod->containers, false, pod) != 0) || parse_init_containers(spec, pod) != 0)
        return -1;
    return pod_check_whole_gpu_limit(pod);
}

static const char *annotation_of(const void *ann, const char *key)
{
    return string_field(ann, key);
}

static int parse_decision(const cJSON *meta, struct pod_info *pod)
{
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    return cJSON_IsObject(ann) ? pod_decision_read(annotation_of, ann, pod, &pod->decision) : 0;
}

static int read_hami(const cJSON *meta, struct pod_info *pod)
{
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    return pod_read_hami(pod, cJSON_IsObject(ann) ? ann : NULL);
}

static char *make_key(const char *ns, const char *name)
{
    return strbuf_join2(ns, '/', name);
}

static void set_error(char **err, const char *msg)
{
    if (err)
        *err = strdup(msg);
}

struct pod_info *pod_info_from_json(const cJSON *obj, char **err)
{
    if (err)
        *err = NULL;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const char *name = string_field(meta, "name");
    if (!cJSON_IsObject(obj) || !cJSON_IsObject(meta) || !name || !*name) {
        set_error(err, "pod has no metadata.name");
        return NULL;
    }
    const char *ns = string_field(meta, "namespace");
    if (!ns || !*ns)
        ns = "default";
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
    const char *phase = string_field(status, "phase");
    const char *node = string_field(spec, "nodeName");

    struct pod_info *pod = calloc(1, sizeof(*pod));
    if (!pod)
        goto oom;
    pod->ns = strdup(ns);
    pod->name = strdup(name);
    pod->key = make_key(ns, name);
    pod->uid = dup_or_null(string_field(meta, "uid"));
    pod->resource_version = dup_or_null(string_field(meta, "resourceVersion"));
    pod->node_name = (node && *node) ? strdup(node) : NULL;
    pod->terminal = phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
    pod->terminating = string_field(meta, "deletionTimestamp") != NULL;
    if (!pod->ns || !pod->name || !pod->key || (node && *node && !pod->node_name))
        goto oom;
    if (parse_containers(spec, pod) != 0 || parse_decision(meta, pod) != 0 || read_hami(meta, pod) != 0)
        goto oom;
    return pod;
oom:
    pod_info_free(pod);
    set_error(err, "out of memory");
    return NULL;
}

static void decision_free(struct pod_decision *d)
{
    free(d->node);
    free(d->proof);
    for (int i = 0; i < d->nidx && d->idx; i++)
        free(d->idx[i]);
    free(d->idx);
    free(d->idx_count);
}

void pod_info_free(struct pod_info *pod)
{
    if (!pod)
        return;
    for (int i = 0; i < pod->ncontainers && pod->containers; i++)
        free(pod->containers[i].name);
    free(pod->containers);
    decision_free(&pod->decision);
    hami_pod_free(pod->hami);
    free(pod->key);
    free(pod->ns);
    free(pod->name);
    free(pod->uid);
    free(pod->resource_version);
    free(pod->node_name);
    free(pod->request_error);
    free(pod);
}

/* Container i's minors under its keys: the tencent.com one only for an app
 * container of a vcuda pod (GPU-Manager serves app containers only). */
static int set_indices(cJSON *ann, const struct pod_info *pod, int i, const int *idx, int count, bool vcuda)
{
    struct strbuf list;
    strbuf_init(&list);
    for (int k = 0; k < count; k++) {
        if (k)
            strbuf_putc(&list, ',');
        strbuf_put_i64(&list, idx[k]);
    }
    char key[96];
    bool app = !pod || i >= pod->ncontainers || pod->containers[i].init_slot == 0;
    int rc = strbuf_failed(&list) ? -1 : 0;
    if (rc == 0 && vcuda && app)
        rc = json_set_string(ann, pod_index_key(key, sizeof(key), ANN_TENCENT_IDX_PREFIX, i), list.data);
    if (rc == 0)
        rc = json_set_string(ann,
                             app ? pod_index_key(key, sizeof(key), ANN_GQA_IDX_PREFIX, i)
                                 : pod_gqa_index_key(key, sizeof(key), pod, i),
                             list.data);
    strbuf_free(&list);
    return rc;
}

static int write_decision(cJSON *ann, const struct pod_info *pod, const char *node, int64_t time_ns, int ncontainers,
                          int *const *idx, const int *idx_count, bool vcuda)
{
    char when[24];
    snprintf(when, sizeof(when), "%" PRId64, time_ns);
    if (vcuda && (json_set_string(ann, ANN_TENCENT_NODE, node) || json_set_string(ann, ANN_TENCENT_ASSIGNED, "false") ||
                  json_set_string(ann, ANN_TENCENT_TIME, when)))
        return -1;
    if (json_set_string(ann, ANN_GQA_NODE, node) || json_set_string(ann, ANN_GQA_TIME, when))
        return -1;
    for (int i = 0; i < ncontainers; i++)
        if (idx[i] && set_indices(ann, pod, i, idx[i], idx_count[i], vcuda) != 0)
            return -1;
    return 0;
}

int decision_annotations(cJSON *ann, const char *node, int64_t time_ns, int ncontainers, int *const *idx,
                         const int *idx_count, bool vcuda)
{
    return write_decision(ann, NULL, node, time_ns, ncontainers, idx, idx_count, vcuda);
}

int pod_decision_annotations(cJSON *ann, const struct pod_info *d, bool vcuda)
{
    const struct pod_decision *dec = &d->decision;
    int n = dec->nidx < d->ncontainers ? dec->nidx : d->ncontainers;
    return write_decision(ann, d, dec->node, dec->time_ns, n, dec->idx, dec->idx_count, vcuda);
}

static int copy_containers(struct pod_info *dst, const struct pod_info *src)
{
    dst->ncontainers = src->ncontainers;
    if (src->ncontainers == 0)
        return 0;
    dst->containers = calloc((size_t)src->ncontainers, sizeof(*dst->containers));
    if (!dst->containers)
        return -1;
    for (int i = 0; i < src->ncontainers; i++) {
        dst->containers[i] = src->containers[i];
        dst->containers[i].name = strdup(src->containers[i].name);
        if (!dst->containers[i].name)
            return -1;
    }
    return 0;
}

static int copy_decision(struct pod_decision *d, int n, const char *node, int64_t time_ns, int *const *idx,
                         const int *idx_count)
{
    d->node = dup_or_null(node);
    d->time_ns = time_ns;
    d->nidx = n;
    if (node && !d->node)
        return -1;
    if (n == 0)
        return 0;
    d->idx = calloc((size_t)n, sizeof(*d->idx));
    d->idx_count = calloc((size_t)n, sizeof(*d->idx_count));
    if (!d->idx || !d->idx_count)
        return -1;
    /* A pod that never carried index annotations has no table at all. */
    for (int i = 0; idx && idx_count && i < n; i++) {
        if (!idx[i] || idx_count[i] == 0)
            continue;
        d->idx[i] = malloc(sizeof(int) * (size_t)idx_count[i]);
        if (!d->idx[i])
            return -1;
        memcpy(d->idx[i], idx[i], sizeof(int) * (size_t)idx_count[i]);
        d->idx_count[i] = idx_count[i];
    }
    return 0;
}

struct pod_info *pod_info_with_decision(const struct pod_info *src, const char *node, int64_t time_ns, int *const *idx,
                                        const int *idx_count)
{
    struct pod_info *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->key = strdup(src->key);
    p->ns = strdup(src->ns);
    p->name = strdup(src->name);
    p->uid = dup_or_null(src->uid);
    p->resource_version = dup_or_null(src->resource_version);
    p->node_name = dup_or_null(src->node_name);
    p->request_error = dup_or_null(src->request_error);
    p->terminal = src->terminal;
    p->terminating = src->terminating;
    p->uses_gpu = src->uses_gpu;
    p->names_gpu = src->names_gpu;
    p->ninit = src->ninit;
    p->hami = src->hami ? hami_pod_clone(src->hami) : NULL;
    if (!p->key || !p->ns || !p->name || (src->uid && !p->uid) || (src->node_name && !p->node_name) ||
        (src->hami && !p->hami) || (src->resource_version && !p->resource_version) ||
        (src->request_error && !p->request_error) || copy_containers(p, src) != 0 ||
        copy_decision(&p->decision, src->ncontainers, node, time_ns, idx, idx_count) != 0) {
        pod_info_free(p);
        return NULL;
    }
    return p;
}

struct pod_info *pod_info_clone(const struct pod_info *src)
{
    const struct pod_decision *d = &src->decision;
    struct pod_info *p = pod_info_with_decision(src, d->node, d->time_ns, d->idx, d->idx_count);
    if (p)
        p->decision.assigned = d->assigned;
    if (p && d->proof && !(p->decision.proof = strdup(d->proof))) {
        pod_info_free(p);
        return NULL;
    }
    return p;
}

/* ---- slim pods from text -------------------------------------------------- */

/* A NUL-terminated copy of a plain (escape-free) token, from cJSON's
 * allocator (it frees a string item's value), or NULL. */
static char *plain_dup(const struct jscan_str *str)
{
    char *p = cJSON_malloc(str->len + 1);
    if (p) {
        memcpy(p, str->ptr, str->len);
        p[str->len] = '\0';
    }
    return p;
}

/* A string item holding a plain token's text, or NULL: one allocation,
 * the item with its text right after it. The text is marked a reference
 * (cJSON_IsReference), so cJSON_Delete frees the block once, as the item;
 * cJSON_Duplicate copies the text like any other. Two allocations per
 * string were a fifth of a watch event's. */
static cJSON *plain_string_item(const struct jscan_str *str)
{
    if (str->len > SIZE_MAX - sizeof(cJSON) - 1)
        return NULL;
    cJSON *item = cJSON_malloc(sizeof(cJSON) + str->len + 1);
    if (!item)
        return NULL;
    memset(item, 0, sizeof(*item));
    item->type = cJSON_String | cJSON_IsReference;
    item->valuestring = (char *)(item + 1);
    memcpy(item->valuestring, str->ptr, str->len);
    item->valuestring[str->len] = '\0';
    return item;
}

/* The slim tree's own member names are string literals: they are added
 * as cJSON constant keys (cJSON_AddItemToObjectCS), which cJSON neither
 * copies nor frees; a copy per member was a third of a watch event's
 * allocations. Every `name` below is such a literal. */
static int add_member(cJSON *obj, const char *literal, cJSON *item)
{
    if (item && cJSON_AddItemToObjectCS(obj, literal, item))
        return 0;
    cJSON_Delete(item);
    return -1;
}

/* Copy a string value (escapes decoded) into obj[name]. */
static int slim_string(struct jscan *s, cJSON *obj, const char *name)
{
    struct jscan_str str;
    if (jscan_peek(s) != JSCAN_STRING)
        return jscan_skip_value(s);
    if (jscan_string(s, &str) != 0)
        return -1;
    if (!str.has_escapes)
        return add_member(obj, name, plain_string_item(&str));
    char *v = jscan_str_dup(&str);
    int rc = v ? add_member(obj, name, cJSON_CreateString(v)) : -1;
    free(v);
    return rc;
}

/* Parse a value fully (small parts: annotations, resources). */
static int slim_value(struct jscan *s, cJSON *obj, const char *name)
{
    struct jscan_span span;
    if (jscan_value_span(s, &span) != 0)
        return -1;
    return add_member(obj, name, cJSON_ParseWithLength(span.ptr, span.len));
}

/* One member of a plain object: a string (taken here) or an object (walked
 * by build_plain). 1 when added, 0 when not plain, -1 on error. */
static int build_plain(struct jscan *s, cJSON *into, int depth);

static int plain_member(struct jscan *s, const struct jscan_str *key, cJSON *into, int depth)
{
    enum jscan_type t = jscan_peek(s);
    if (key->has_escapes || (t != JSCAN_STRING && t != JSCAN_OBJECT))
        return 0;
    char *name = plain_dup(key);
    cJSON *item = NULL;
    int r = -1;
    if (name && t == JSCAN_OBJECT) {
        item = cJSON_CreateObject();
        r = item ? build_plain(s, item, depth + 1) : -1;
    } else if (name) {
        struct jscan_str str;
        r = jscan_string(s, &str) != 0 ? -1 : str.has_escapes ? 0 : 1;
        item = r == 1 ? plain_string_item(&str) : NULL;
        if (r == 1 && !item)
            r = -1;
    }
    if (r == 1 && cJSON_AddItemToObjectCS(into, name, item)) {
        item->type &= ~cJSON_StringIsConst; /* the item owns its copy of the key: cJSON_Delete frees it */
        return 1;
    }
    if (r == 1)
        r = -1;
    cJSON_Delete(item);
    cJSON_free(name);
    return r;
}

static int build_plain(struct jscan *s, cJSON *into, int depth)
{
    if (depth > 4 || jscan_enter_object(s) != 0)
        return depth > 4 ? 0 : -1;
    struct jscan_str key;
    int r;
    while ((r = jscan_next_key(s, &key)) == 1) {
        int m = plain_member(s, &key, into, depth);
        if (m != 1)
            return m;
    }
    return r == 0 ? 1 : -1;
}

/* Annotations and resources, built while they are scanned when they hold
 * only strings without escapes and objects of such (what the API server
 * sends), instead of scanning their text twice (here and in cJSON). Any
 * other value is parsed by cJSON from its text as before, so both give
 * the same tree (fuzz_pod compares them). */
static int slim_plain(struct jscan *s, cJSON *obj, const char *name)
{
    if (jscan_peek(s) != JSCAN_OBJECT)
        return slim_value(s, obj, name);
    struct jscan probe = *s; /* a copy: the value is scanned again from s when not plain */
    cJSON *v = cJSON_CreateObject();
    int r = v ? build_plain(&probe, v, 0) : -1;
    if (r == 1 && cJSON_AddItemToObjectCS(obj, name, v)) {
        *s = probe;
        return 0;
    }
    cJSON_Delete(v);
    return slim_value(s, obj, name); /* not plain, or failed: as before, with the scanner's own error */
}

typedef int (*slim_member_fn)(struct jscan *s, const struct jscan_str *key, cJSON *into);

/* The object value at s (the caller saw '{'), with what `member` keeps of
 * it; anything else is validated and skipped. NULL on error. */
static cJSON *walk_object(struct jscan *s, slim_member_fn member)
{
    cJSON *into = cJSON_CreateObject();
    if (!into || jscan_enter_object(s) != 0) {
        cJSON_Delete(into);
        return NULL;
    }
    struct jscan_str key;
    int r;
    while ((r = jscan_next_key(s, &key)) == 1)
        if (member(s, &key, into) != 0)
            break;
    if (r != 0) {
        cJSON_Delete(into);
        return NULL;
    }
    return into;
}

/* parent[name] = the object value at s walked by `member`; a value of
 * another type is skipped. */
static int slim_object(struct jscan *s, cJSON *parent, const char *name, slim_member_fn member)
{
    if (jscan_peek(s) != JSCAN_OBJECT)
        return jscan_skip_value(s);
    return add_member(parent, name, walk_object(s, member));
}

static int metadata_member(struct jscan *s, const struct jscan_str *key, cJSON *into)
{
    static const char *const strings[] = {"name", "namespace", "uid", "resourceVersion", "deletionTimestamp"};
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
        if (jscan_key_is(key, strings[i]))
            return slim_string(s, into, strings[i]);
    if (jscan_key_is(key, "annotations"))
        return slim_plain(s, into, "annotations");
    return jscan_skip_value(s);
}

static int container_member(struct jscan *s, const struct jscan_str *key, cJSON *into)
{
    if (jscan_key_is(key, "name"))
        return slim_string(s, into, "name");
    if (jscan_key_is(key, "resources"))
        return slim_plain(s, into, "resources");
    if (jscan_key_is(key, "restartPolicy"))
        return slim_string(s, into, "restartPolicy");
    return jscan_skip_value(s);
}

/* spec[literal]: the list of containers or init containers. */
static int slim_containers(struct jscan *s, cJSON *spec, const char *literal)
{
    if (jscan_peek(s) != JSCAN_ARRAY)
        return slim_value(s, spec, literal); /* a wrong type stays visible to the parser */
    cJSON *list = cJSON_CreateArray();
    if (add_member(spec, literal, list) != 0 || jscan_enter_array(s) != 0)
        return -1;
    int e;
    while ((e = jscan_next_element(s)) == 1) {
        /* An element that is not an object fails the slim parse, as it always has. */
        cJSON *c = jscan_peek(s) == JSCAN_OBJECT ? walk_object(s, container_member) : NULL;
        if (!c || !cJSON_AddItemToArray(list, c)) {
            cJSON_Delete(c);
            return -1;
        }
    }
    return e;
}

static int spec_member(struct jscan *s, const struct jscan_str *key, cJSON *into)
{
    if (jscan_key_is(key, "nodeName"))
        return slim_string(s, into, "nodeName");
    if (jscan_key_is(key, "containers"))
        return slim_containers(s, into, "containers");
    if (jscan_key_is(key, "initContainers"))
        return slim_containers(s, into, "initContainers");
    return jscan_skip_value(s);
}

static int status_member(struct jscan *s, const struct jscan_str *key, cJSON *into)
{
    return jscan_key_is(key, "phase") ? slim_string(s, into, "phase") : jscan_skip_value(s);
}

static int pod_member(struct jscan *s, const struct jscan_str *key, cJSON *into)
{
    if (jscan_key_is(key, "metadata"))
        return slim_object(s, into, "metadata", metadata_member);
    if (jscan_key_is(key, "spec"))
        return slim_object(s, into, "spec", spec_member);
    if (jscan_key_is(key, "status"))
        return slim_object(s, into, "status", status_member);
    if (jscan_key_is(key, "kind"))
        return slim_string(s, into, "kind");
    return jscan_skip_value(s);
}

/* The slim Pod at s's position; whole: nothing but whitespace may follow. */
static cJSON *slim_pod(struct jscan *s, bool whole)
{
    cJSON *pod = jscan_peek(s) == JSCAN_OBJECT ? walk_object(s, pod_member) : NULL;
    if (pod && whole && jscan_finish(s) != 0) {
        cJSON_Delete(pod);
        return NULL;
    }
    return pod;
}

cJSON *pod_slim_from_text(const char *text, size_t len)
{
    struct jscan s;
    jscan_init(&s, text, len);
    return slim_pod(&s, true);
}

cJSON *pod_slim_from_prefix(const char *text, size_t len, size_t *used)
{
    struct jscan s;
    jscan_init(&s, text, len);
    cJSON *pod = slim_pod(&s, false);
    *used = pod ? (size_t)(s.pos - text) : 0;
    return pod;
}
