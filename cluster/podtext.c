/* podtext.c - a watched Pod straight from its text. See podtext.h. */
#include "cluster/podtext.h"
#include "cluster/podparts.h"
#include "lib/jscan.h"
#include "lib/quantity.h"
#include "lib/strbuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Past these a pod is declined, not cut short: the cJSON way has no limit. */
#define TEXT_MAX_CONTAINERS 16
#define TEXT_MAX_NOTES 24
#define TEXT_NOTE_BYTES 2048

/* A string field where the text holds it; set once at most. */
struct field {
    const char *ptr;
    size_t len;
    bool set;
};

struct amounts_text {
    bool seen;   /* the object was there */
    int members; /* of any key: an empty limits object falls back to requests */
    struct field v[GPU_AMOUNT_KEYS_MAX];
};

struct container_text {
    struct field name, restart;
    bool init; /* of spec.initContainers */
    bool resources;
    struct amounts_text limits, requests;
};

/* An annotation a pod_info can depend on: its key and value copied,
 * NUL-terminated, into the scratch space. */
struct note {
    const char *key, *value;
    size_t key_len;
    bool hami; /* under hami.io/ or nvidia.com/: HAMi's */
};

/* Where the fields are. Only what the walk reached is initialised. */
struct pod_text {
    bool metadata, spec, status, annotations, containers, init_containers;
    bool names_gpu; /* a managed GPU resource is named in limits or requests */
    struct field name, ns, uid, rv, deletion, node, phase;
    bool hami_notes; /* an annotation under hami.io/ or nvidia.com/ */
    int ncontainers, nnotes;
    size_t scratch_used;
    struct note notes[TEXT_MAX_NOTES];
    struct container_text c[TEXT_MAX_CONTAINERS];
    char scratch[TEXT_NOTE_BYTES];
};

/* ---- the walk ------------------------------------------------------------ */

typedef bool (*member_fn)(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at);

/* The object at s, each member handed to fn; keys with escapes decline. */
static bool walk(struct jscan *s, member_fn fn, struct pod_text *t, void *at)
{
    if (jscan_peek(s) != JSCAN_OBJECT || jscan_enter_object(s) != 0)
        return false;
    struct jscan_str key;
    int r;
    while ((r = jscan_next_key(s, &key)) == 1)
        if (key.has_escapes || !fn(s, &key, t, at))
            return false;
    return r == 0;
}

static bool skip(struct jscan *s)
{
    return jscan_skip_value(s) == 0;
}

/* A member read twice would be read once by the cJSON way: decline. */
static bool once(bool *seen)
{
    if (*seen)
        return false;
    *seen = true;
    return true;
}

static bool take_string(struct jscan *s, struct field *f)
{
    struct jscan_str str;
    if (f->set || jscan_peek(s) != JSCAN_STRING || jscan_string(s, &str) != 0 || str.has_escapes)
        return false;
    *f = (struct field){str.ptr, str.len, true};
    return true;
}

static bool amount_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    struct amounts_text *a = at;
    a->members++;
    /* walk() declined keys with escapes: the text is the name. */
    int k = gpu_amount_key_of(key->ptr, key->len);
    if (k >= 0) {
        t->names_gpu = true;
        return take_string(s, &a->v[k]);
    }
    /* A family's prefixed names (nvidia.com/mig-<profile>) are rare: such
     * a pod is declined here and read the cJSON way. */
    if (gpu_amount_prefixed(key->ptr, key->len))
        return false;
    t->names_gpu |= gpu_family_names_resource(key->ptr, key->len); /* interest-only names: never an amount read */
    return skip(s);
}

static bool resources_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    struct container_text *c = at;
    if (jscan_key_is(key, "limits"))
        return once(&c->limits.seen) && walk(s, amount_member, t, &c->limits);
    if (jscan_key_is(key, "requests"))
        return once(&c->requests.seen) && walk(s, amount_member, t, &c->requests);
    return skip(s);
}

/* Annotations and resources are the parts the cJSON way hands to cJSON's
 * own parser when they hold an escape anywhere (podspec.c's slim_plain).
 * cJSON refuses some escapes the scanner takes (a lone \ud800), so such a
 * part is declined whole: a backslash in its text, read or skipped. */
static bool walk_unescaped(struct jscan *s, member_fn fn, struct pod_text *t, void *at)
{
    if (jscan_peek(s) != JSCAN_OBJECT)
        return false;
    const char *start = s->pos;
    return walk(s, fn, t, at) && !memchr(start, '\\', (size_t)(s->pos - start));
}

static bool container_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    struct container_text *c = at;
    if (jscan_key_is(key, "name"))
        return take_string(s, &c->name);
    if (jscan_key_is(key, "resources"))
        return once(&c->resources) && walk_unescaped(s, resources_member, t, c);
    if (jscan_key_is(key, "restartPolicy"))
        return take_string(s, &c->restart);
    return skip(s);
}

static bool read_containers(struct jscan *s, struct pod_text *t, bool init)
{
    if (jscan_peek(s) != JSCAN_ARRAY || jscan_enter_array(s) != 0)
        return false;
    int e;
    while ((e = jscan_next_element(s)) == 1) {
        if (t->ncontainers == TEXT_MAX_CONTAINERS)
            return false;
        struct container_text *c = &t->c[t->ncontainers++];
        memset(c, 0, sizeof(*c));
        c->init = init;
        if (!walk(s, container_member, t, c))
            return false;
    }
    return e == 0;
}

static bool has_prefix(const struct jscan_str *key, const char *prefix)
{
    size_t n = strlen(prefix);
    return key->len >= n && memcmp(key->ptr, prefix, n) == 0;
}

static const char *scratch_copy(struct pod_text *t, const char *ptr, size_t len)
{
    if (len >= sizeof(t->scratch) - t->scratch_used)
        return NULL;
    char *out = t->scratch + t->scratch_used;
    memcpy(out, ptr, len);
    out[len] = '\0';
    t->scratch_used += len + 1;
    return out;
}

static bool noted(const struct pod_text *t, const struct jscan_str *key)
{
    for (int i = 0; i < t->nnotes; i++)
        if (t->notes[i].key_len == key->len && memcmp(t->notes[i].key, key->ptr, key->len) == 0)
            return true;
    return false;
}

/* Annotations under the prefixes of the decision (podparts.h) and of HAMi
 * are kept; the others cannot change a pod_info and are only scanned. */
static bool note_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    (void)at;
    bool hami = has_prefix(key, "hami.io/") || has_prefix(key, "nvidia.com/");
    if (!hami && !has_prefix(key, "tencent.com/") && !has_prefix(key, "gpu-admission.io/"))
        return skip(s);
    struct field v = {0};
    if (!take_string(s, &v) || noted(t, key) || t->nnotes == TEXT_MAX_NOTES)
        return false;
    struct note *n = &t->notes[t->nnotes];
    n->key = scratch_copy(t, key->ptr, key->len);
    n->key_len = key->len;
    n->hami = hami;
    n->value = n->key ? scratch_copy(t, v.ptr, v.len) : NULL;
    if (!n->value)
        return false;
    t->nnotes++;
    t->hami_notes |= hami;
    return true;
}

static bool metadata_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    (void)at;
    if (jscan_key_is(key, "name"))
        return take_string(s, &t->name);
    if (jscan_key_is(key, "namespace"))
        return take_string(s, &t->ns);
    if (jscan_key_is(key, "uid"))
        return take_string(s, &t->uid);
    if (jscan_key_is(key, "resourceVersion"))
        return take_string(s, &t->rv);
    if (jscan_key_is(key, "deletionTimestamp"))
        return take_string(s, &t->deletion);
    if (jscan_key_is(key, "annotations"))
        return once(&t->annotations) && walk_unescaped(s, note_member, t, NULL);
    return skip(s);
}

static bool spec_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    (void)at;
    if (jscan_key_is(key, "nodeName"))
        return take_string(s, &t->node);
    if (jscan_key_is(key, "containers"))
        return once(&t->containers) && read_containers(s, t, false);
    if (jscan_key_is(key, "initContainers"))
        return once(&t->init_containers) && read_containers(s, t, true);
    return skip(s);
}

static bool status_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    (void)at;
    return jscan_key_is(key, "phase") ? take_string(s, &t->phase) : skip(s);
}

static bool pod_member(struct jscan *s, const struct jscan_str *key, struct pod_text *t, void *at)
{
    (void)at;
    if (jscan_key_is(key, "metadata"))
        return once(&t->metadata) && walk(s, metadata_member, t, NULL);
    if (jscan_key_is(key, "spec"))
        return once(&t->spec) && walk(s, spec_member, t, NULL);
    if (jscan_key_is(key, "status"))
        return once(&t->status) && walk(s, status_member, t, NULL);
    return skip(s);
}

/* ---- the pod_info -------------------------------------------------------- */

/* The text holds no NUL in a field the scanner took (control bytes are
 * refused), so strndup copies it whole. */
static char *field_dup(const struct field *f)
{
    return f->set ? strndup(f->ptr, f->len) : NULL;
}

static bool field_is(const struct field *f, const char *literal)
{
    return f->set && f->len == strlen(literal) && memcmp(f->ptr, literal, f->len) == 0;
}

/* As podspec.c's read_raw_amounts; a quantity it would call invalid
 * declines, so the cJSON way words the error. */
static bool read_amounts(const struct amounts_text *set, struct gpu_amounts *a)
{
    gpu_amounts_clear(a);
    for (int k = 0, n = gpu_amount_key_count(); set && k < n; k++) {
        const struct field *f = &set->v[k];
        int64_t value;
        if (!f->set)
            continue;
        if (quantity_parse_int(f->ptr, f->len, &value) != QTY_OK || value > GPU_AMOUNT_MAX)
            return false;
        gpu_amounts_set(a, k, value);
    }
    return true;
}

/* Extended resources: limits when they name anything, else requests. */
static const struct amounts_text *container_amounts(const struct container_text *c)
{
    if (c->limits.seen && c->limits.members > 0)
        return &c->limits;
    return c->requests.seen ? &c->requests : NULL;
}

/* Read the containers of one list (init or not) into reqs, in the order of
 * the text: 1 when read, 0 when declined, -1 when memory ran out. As
 * podspec.c's read_container_list: once a request is invalid, the later
 * ones are not classified. */
static int read_list(const struct pod_text *t, bool init, struct container_request *reqs, struct pod_info *pod)
{
    struct strbuf err;
    strbuf_init(&err);
    int rc = 1;
    for (int i = 0, k = 0; i < t->ncontainers && rc == 1; i++) {
        const struct container_text *c = &t->c[i];
        if (c->init != init)
            continue;
        struct container_request *req = &reqs[k];
        struct gpu_amounts a;
        req->sidecar = init && field_is(&c->restart, "Always");
        if (!(req->name = pod_container_name(c->name.set ? c->name.ptr : NULL, c->name.len, k++)))
            rc = -1;
        else if (pod->request_error)
            continue;
        else if (!read_amounts(container_amounts(c), &a))
            rc = 0;
        else if (gpu_family_classify(&a, req, &err) != 0 && !(pod->request_error = strbuf_detach(&err, NULL)))
            rc = -1;
        if (!init && req->family)
            pod->uses_gpu = true;
    }
    strbuf_free(&err);
    return rc;
}

static int count_list(const struct pod_text *t, bool init)
{
    int n = 0;
    for (int i = 0; i < t->ncontainers; i++)
        n += t->c[i].init == init;
    return n;
}

/* The app containers, then the init containers placed with them. */
static int build_containers(const struct pod_text *t, struct pod_info *pod)
{
    int n = count_list(t, false), ninit = count_list(t, true), rc = 1;
    pod->ncontainers = n;
    pod->ninit = ninit;
    pod->names_gpu = t->names_gpu;
    if (n > 0 && !(pod->containers = calloc((size_t)n, sizeof(*pod->containers))))
        return -1;
    if (n > 0)
        rc = read_list(t, false, pod->containers, pod);
    if (rc == 1 && ninit > 0) {
        struct container_request init[TEXT_MAX_CONTAINERS];
        memset(init, 0, sizeof(init));
        rc = read_list(t, true, init, pod);
        if (rc == 1 && pod_place_init_containers(pod, init, ninit) != 0)
            rc = -1;
        for (int j = 0; j < ninit; j++)
            free(init[j].name);
    }
    return rc == 1 && pod_check_whole_gpu_limit(pod) != 0 ? -1 : rc;
}

static const char *note_of(const void *src, const char *key)
{
    const struct pod_text *t = src;
    size_t len = strlen(key);
    for (int i = 0; i < t->nnotes; i++)
        if (t->notes[i].key_len == len && memcmp(t->notes[i].key, key, len) == 0)
            return t->notes[i].value;
    return NULL;
}

/* HAMi reads its annotations from a cJSON object: one holding the noted
 * hami.io/ and nvidia.com/ ones, the only keys it looks up. */
static int read_hami(const struct pod_text *t, struct pod_info *pod)
{
    if (!t->annotations)
        return pod_read_hami(pod, NULL);
    cJSON *ann = cJSON_CreateObject();
    for (int i = 0; ann && t->hami_notes && i < t->nnotes; i++) {
        const struct note *n = &t->notes[i];
        if (n->hami && !cJSON_AddStringToObject(ann, n->key, n->value)) {
            cJSON_Delete(ann);
            ann = NULL;
        }
    }
    int rc = ann ? pod_read_hami(pod, ann) : -1;
    cJSON_Delete(ann);
    return rc;
}

/* As pod_info_from_json; NULL when declined or out of memory. */
static struct pod_info *build(const struct pod_text *t)
{
    /* No name, or an empty namespace (the cJSON way keys a deleted pod by
     * it as it is, and a listed one by "default"): the cJSON way decides. */
    if (!t->metadata || !t->name.set || t->name.len == 0 || (t->ns.set && t->ns.len == 0))
        return NULL;
    struct pod_info *pod = calloc(1, sizeof(*pod));
    if (!pod)
        return NULL;
    pod->ns = t->ns.set ? field_dup(&t->ns) : strdup("default");
    pod->name = field_dup(&t->name);
    pod->key = pod->ns && pod->name ? strbuf_join2(pod->ns, '/', pod->name) : NULL;
    pod->uid = field_dup(&t->uid);
    pod->resource_version = field_dup(&t->rv);
    pod->node_name = t->node.len ? field_dup(&t->node) : NULL;
    pod->terminal = field_is(&t->phase, "Succeeded") || field_is(&t->phase, "Failed");
    pod->terminating = t->deletion.set;
    bool ok = pod->ns && pod->name && pod->key && (!t->uid.set || pod->uid) && (!t->rv.set || pod->resource_version) &&
              (!t->node.len || pod->node_name) && build_containers(t, pod) == 1;
    if (ok && t->annotations)
        ok = pod_decision_read(note_of, t, pod, &pod->decision) == 0;
    if (ok && pod_wants_hami(pod))
        ok = read_hami(t, pod) == 0;
    if (!ok) {
        pod_info_free(pod);
        return NULL;
    }
    return pod;
}

struct pod_info *pod_info_from_text_prefix(const char *text, size_t len, size_t *used)
{
    struct pod_text t; /* about 10 kB, on the stack: no allocation per event */
    memset(&t, 0, offsetof(struct pod_text, notes));
    struct jscan s;
    jscan_init(&s, text, len);
    struct pod_info *pod = walk(&s, pod_member, &t, NULL) ? build(&t) : NULL;
    *used = pod ? (size_t)(s.pos - text) : 0;
    return pod;
}
