/* recorder.c - decisions written to the API server. See recorder.h. */
#include "extender/live/recorder.h"
#include "cluster/hami_decision.h"
#include "extender/decide/metrics.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Idle API clients kept for reuse: a kube_client is one connection and is
 * not shared, so each write in flight takes its own. */
#define RECORDER_MAX_IDLE 32

struct recorder {
    const struct kube_config *cfg;
    pthread_mutex_t lock; /* guards idle[]; a leaf, never held across I/O */
    struct kube_client *idle[RECORDER_MAX_IDLE];
    int nidle;
    struct decision_sink sink;
};

/* A client for one request sequence: an idle one, else a new one. */
static struct kube_client *take_client(struct recorder *r, char **err)
{
    struct kube_client *c = NULL;
    pthread_mutex_lock(&r->lock);
    if (r->nidle > 0)
        c = r->idle[--r->nidle];
    pthread_mutex_unlock(&r->lock);
    return c ? c : kube_client_new(r->cfg, err);
}

static void give_client(struct recorder *r, struct kube_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&r->lock);
    bool kept = r->nidle < RECORDER_MAX_IDLE;
    if (kept)
        r->idle[r->nidle++] = c;
    pthread_mutex_unlock(&r->lock);
    if (!kept)
        kube_client_free(c);
}

/* Does a container's family want GPU-Manager's tencent.com keys written too? */
static bool uses_vcuda(const struct pod_info *pod)
{
    for (int i = 0; i < pod->ncontainers; i++) {
        const struct gpu_family *f = pod->containers[i].family;
        if (f && (f->flags & GPU_FAMILY_GPU_MANAGER_KEYS))
            return true;
    }
    return false;
}

static char *pod_path(const struct pod_info *pod, const char *suffix)
{
    char *ns = kube_escape(pod->ns), *name = kube_escape(pod->name);
    struct strbuf sb;
    strbuf_init(&sb);
    if (ns && name)
        strbuf_printf(&sb, "/api/v1/namespaces/%s/pods/%s%s", ns, name, suffix);
    free(ns);
    free(name);
    return ns && name ? strbuf_detach(&sb, NULL) : (strbuf_free(&sb), NULL);
}

/* The merge patch of annotations and, when not NULL, labels (both taken). */
static char *patch_with_labels(cJSON *annotations, cJSON *labels, const char *resource_version)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
    char *text = NULL;
    if (meta && (!resource_version || cJSON_AddStringToObject(meta, "resourceVersion", resource_version)) &&
        cJSON_AddItemToObject(meta, "annotations", annotations)) {
        annotations = NULL;
        if (!labels || cJSON_AddItemToObject(meta, "labels", labels)) {
            labels = NULL;
            text = cJSON_PrintUnformatted(root);
        }
    }
    cJSON_Delete(labels);
    cJSON_Delete(annotations);
    cJSON_Delete(root);
    return text;
}

static char *patch_with(cJSON *annotations, const char *resource_version)
{
    return patch_with_labels(annotations, NULL, resource_version);
}

/* A pod HAMi could serve gets HAMi's hami.io/vgpu-node label with its
 * decision, as HAMi's PatchPodAnnotations sets it, or loses an earlier
 * attempt's; NULL (no labels) for other pods, or on allocation failure
 * with *failed set. */
static cJSON *hami_labels(const struct pod_info *d, bool decided, bool *failed)
{
    *failed = false;
    if (!d->hami)
        return NULL;
    cJSON *labels = cJSON_CreateObject();
    const char *node = decided && d->hami->has_alloc ? d->decision.node : NULL;
    if (!labels || hami_decision_label(labels, node) != 0) {
        cJSON_Delete(labels);
        *failed = true;
        return NULL;
    }
    return labels;
}

/* HAMi's decision keys set to null: a merge patch then removes them. */
static int null_hami_decision(cJSON *ann)
{
    for (int i = 0; i < HAMI_DECISION_KEY_COUNT; i++)
        if (!cJSON_AddNullToObject(ann, hami_decision_keys[i]))
            return -1;
    return 0;
}

/* A pod HAMi could serve gets HAMi's decision annotations with the devices
 * chosen, or (decided elsewhere) loses an earlier attempt's. */
static int hami_part(cJSON *ann, const struct pod_info *d)
{
    if (!d->hami)
        return 0;
    if (!d->hami->has_alloc)
        return null_hami_decision(ann);
    char *allocation = hami_alloc_encode(&d->hami->alloc);
    int rc = allocation ? hami_decision_annotations(ann, d->decision.node, d->decision.time_ns, allocation) : -1;
    free(allocation);
    if (rc == 0 && d->hami->bind_phase_ns > 0) /* bind placement: the plugin's mark in the same write */
        rc = hami_bind_annotations(ann, d->hami->bind_phase_ns);
    return rc == 0 ? hami_decision_mig_annotation(ann, d->hami) : rc;
}

static int null_key(cJSON *ann, const char *prefix, int i)
{
    char key[96];
    snprintf(key, sizeof(key), "%s%d", prefix, i);
    return cJSON_AddNullToObject(ann, key) ? 0 : -1;
}

/* The decision's proof (cluster/proof.h), and null for every decision key
 * the decision does not write (the tencent.com ones of a pod without vcuda
 * shares, the index keys of containers without GPUs): the reader would
 * take ones the pod's creator wrote for part of the decision, and the
 * decision would then be unproven and hold nothing. */
static int proof_part(cJSON *ann, const struct pod_info *d)
{
    static const char *const tencent[] = {ANN_TENCENT_NODE, ANN_TENCENT_ASSIGNED, ANN_TENCENT_TIME};
    bool vcuda = uses_vcuda(d);
    if (d->decision.proof && !cJSON_AddStringToObject(ann, ANN_GQA_PROOF, d->decision.proof))
        return -1;
    for (size_t i = 0; !vcuda && i < sizeof(tencent) / sizeof(tencent[0]); i++)
        if (!cJSON_AddNullToObject(ann, tencent[i]))
            return -1;
    for (int i = 0; i < d->ncontainers; i++) {
        bool written = d->decision.idx && i < d->decision.nidx && d->decision.idx[i];
        if ((!vcuda || !written) && null_key(ann, ANN_TENCENT_IDX_PREFIX, i) != 0)
            return -1;
        if (!written && null_key(ann, ANN_GQA_IDX_PREFIX, i) != 0)
            return -1;
    }
    return 0;
}

static char *patch_body(const struct pod_info *d, const char *resource_version)
{
    cJSON *ann = cJSON_CreateObject();
    bool failed = false;
    cJSON *labels = ann ? hami_labels(d, true, &failed) : NULL;
    if (!ann || failed || pod_decision_annotations(ann, d, uses_vcuda(d)) != 0 || hami_part(ann, d) != 0 ||
        proof_part(ann, d) != 0) {
        cJSON_Delete(ann);
        cJSON_Delete(labels);
        return NULL;
    }
    return patch_with_labels(ann, labels, resource_version);
}

/* Every decision key set to null: a merge patch then removes them. */
static char *clear_body(const struct pod_info *pod)
{
    static const char *const keys[] = {ANN_TENCENT_NODE, ANN_TENCENT_ASSIGNED, ANN_TENCENT_TIME,
                                       ANN_GQA_NODE,     ANN_GQA_TIME,         ANN_GQA_PROOF};
    cJSON *ann = cJSON_CreateObject();
    bool ok = ann != NULL;
    for (size_t i = 0; ok && i < sizeof(keys) / sizeof(keys[0]); i++)
        ok = cJSON_AddNullToObject(ann, keys[i]) != NULL;
    for (int i = 0; ok && i < pod->ncontainers; i++) {
        char key[96];
        snprintf(key, sizeof(key), ANN_TENCENT_IDX_PREFIX "%d", i);
        ok = cJSON_AddNullToObject(ann, key) != NULL;
        snprintf(key, sizeof(key), ANN_GQA_IDX_PREFIX "%d", i);
        ok = ok && cJSON_AddNullToObject(ann, key) != NULL;
        if (ok && pod->containers[i].init_slot > 0) { /* an init container's own key */
            snprintf(key, sizeof(key), ANN_GQA_INIT_IDX_PREFIX "%d", pod->containers[i].init_slot - 1);
            ok = cJSON_AddNullToObject(ann, key) != NULL;
        }
    }
    ok = ok && (!pod->hami || null_hami_decision(ann) == 0);
    bool failed = false;
    cJSON *labels = ok ? hami_labels(pod, false, &failed) : NULL;
    if (!ok || failed) {
        cJSON_Delete(ann);
        return NULL;
    }
    return patch_with_labels(ann, labels, NULL);
}

static void set_err(char **err, const char *msg)
{
    if (err && !*err)
        *err = strdup(msg ? msg : "unknown error");
}

/* After a 409: the pod as it is now must still be the same, unbound pod.
 * Returns its resourceVersion (malloc'd) or NULL with *err. */
static char *recheck_pod(struct kube_client *client, const struct pod_info *want, char **err)
{
    char *path = pod_path(want, "");
    struct kube_response resp = {0};
    char *rv = NULL;
    if (!path || kube_request(client, "GET", path, NULL, NULL, 0, RECORDER_TIMEOUT_MS, &resp) != 0 ||
        resp.status != 200) {
        set_err(err, resp.status == 404 ? "the pod no longer exists" : resp.error);
    } else {
        cJSON *obj = cJSON_Parse(resp.body);
        struct pod_info *cur = obj ? pod_info_from_json(obj, err) : NULL;
        if (cur && cur->node_name)
            set_err(err, "the pod was bound meanwhile");
        else if (cur && want->uid && cur->uid && strcmp(want->uid, cur->uid) != 0)
            set_err(err, "the pod was deleted and created again");
        else if (cur)
            rv = cur->resource_version ? strdup(cur->resource_version) : NULL;
        pod_info_free(cur);
        cJSON_Delete(obj);
    }
    free(path);
    kube_response_free(&resp);
    return rv;
}

static int patch_pod(struct kube_client *client, const struct pod_info *pod, const char *body, enum api_write what,
                     char **err)
{
    char *path = pod_path(pod, "");
    struct kube_response resp = {0};
    int rc = -1, sent = 0;
    if (!path)
        set_err(err, "out of memory");
    else if ((sent = kube_request(client, "PATCH", path, "application/merge-patch+json", body, strlen(body),
                                  RECORDER_TIMEOUT_MS, &resp)) != 0)
        rc = (set_err(err, resp.error), DECISION_MAYBE_WRITTEN); /* no answer: it may land yet */
    else
        rc = resp.status == 200 ? 0 : resp.status == 409 ? 1 : (set_err(err, resp.error), -1);
    if (path)
        metrics_count_api_write(what, sent, resp.status, resp.error);
    free(path);
    kube_response_free(&resp);
    return rc;
}

static int record(void *ctx, const struct pod_info *decided, char **err)
{
    struct recorder *r = ctx;
    struct kube_client *client = take_client(r, err);
    if (!client)
        return -1;
    char *rv = decided->resource_version ? strdup(decided->resource_version) : NULL;
    int rc = -1;
    for (int attempt = 0; attempt <= RECORDER_CONFLICT_RETRIES; attempt++) {
        char *body = patch_body(decided, rv);
        rc = body ? patch_pod(client, decided, body, WRITE_DECISION_PATCH, err) : (set_err(err, "out of memory"), -1);
        free(body);
        if (rc != 1 || attempt == RECORDER_CONFLICT_RETRIES)
            break;
        log_info("pod %s changed since it was read (409); reading it again", decided->key);
        free(rv);
        if (!(rv = recheck_pod(client, decided, err))) {
            rc = -1;
            break;
        }
    }
    if (rc == 1)
        set_err(err, "the pod kept changing (409 Conflict on every attempt)");
    give_client(r, client);
    free(rv);
    return rc == 0 || rc == DECISION_MAYBE_WRITTEN ? rc : -1;
}

static int clear(void *ctx, const struct pod_info *pod, char **err)
{
    struct recorder *r = ctx;
    char *body = clear_body(pod);
    struct kube_client *client = body ? take_client(r, err) : NULL;
    int rc = client ? patch_pod(client, pod, body, WRITE_CLEAR, err) : (set_err(err, "out of memory"), -1);
    give_client(r, client);
    free(body);
    return rc == 0 ? 0 : -1;
}

/* The Binding; with annotations (taken) in its metadata the API server
 * merges them into the pod in the same write that sets nodeName. */
static char *binding_body(const struct pod_info *pod, const char *node, cJSON *annotations)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *target = cJSON_AddObjectToObject(root, "target");
    char *text = NULL;
    if (meta && annotations && cJSON_AddItemToObject(meta, "annotations", annotations))
        annotations = NULL;
    if (meta && target && !annotations && cJSON_AddStringToObject(root, "apiVersion", "v1") &&
        cJSON_AddStringToObject(root, "kind", "Binding") && cJSON_AddStringToObject(meta, "name", pod->name) &&
        cJSON_AddStringToObject(meta, "namespace", pod->ns) &&
        (!pod->uid || cJSON_AddStringToObject(meta, "uid", pod->uid)) &&
        cJSON_AddStringToObject(target, "apiVersion", "v1") && cJSON_AddStringToObject(target, "kind", "Node") &&
        cJSON_AddStringToObject(target, "name", node))
        text = cJSON_PrintUnformatted(root);
    cJSON_Delete(annotations);
    cJSON_Delete(root);
    return text;
}

static int post_binding(struct recorder *r, const struct pod_info *pod, const char *node, cJSON *annotations,
                        char **err)
{
    char *path = pod_path(pod, "/binding");
    char *body = binding_body(pod, node, annotations);
    struct kube_response resp = {0};
    struct kube_client *client = path && body ? take_client(r, err) : NULL;
    int rc = -1, sent = 0;
    if (client) {
        sent = kube_request(client, "POST", path, "application/json", body, strlen(body), RECORDER_TIMEOUT_MS, &resp);
        metrics_count_api_write(WRITE_BINDING, sent, resp.status, resp.error);
    }
    if (!path || !body)
        set_err(err, "out of memory");
    else if (client && sent != 0)
        rc = (set_err(err, resp.error), DECISION_MAYBE_WRITTEN); /* no answer: it may land yet */
    else if (client && resp.status != 201 && resp.status != 200)
        set_err(err, resp.error);
    else if (client) /* else *err says why there is none */
        rc = 0;
    give_client(r, client);
    kube_response_free(&resp);
    free(path);
    free(body);
    return rc;
}

static int bind(void *ctx, const struct pod_info *pod, const char *node, char **err)
{
    return post_binding(ctx, pod, node, NULL, err);
}

/* One write for the whole decision: the Binding carries the decision
 * annotations (set, never removed: a Binding cannot delete a key, which is
 * why a HAMi allocation, or a pod with HAMi decision keys from before, is
 * not written this way: placement.c, hami_writes). */
static int bind_decided(void *ctx, const struct pod_info *decided, const char *node, char **err)
{
    cJSON *ann = cJSON_CreateObject();
    /* No nulls here (a Binding's annotations are strings; a null would be
     * written as ""): placement sends only pods without earlier decision
     * keys this way (placement.c, one_write). */
    if (!ann || pod_decision_annotations(ann, decided, uses_vcuda(decided)) != 0 ||
        (decided->decision.proof && !cJSON_AddStringToObject(ann, ANN_GQA_PROOF, decided->decision.proof))) {
        cJSON_Delete(ann);
        set_err(err, "out of memory");
        return -1;
    }
    return post_binding(ctx, decided, node, ann, err);
}

/* GET the pod, slimmed to what the extender reads as the watch's pods are. */
static int fetch(void *ctx, const char *ns, const char *name, cJSON **pod, char **err)
{
    struct recorder *r = ctx;
    struct pod_info probe = {.ns = (char *)ns, .name = (char *)name};
    char *path = pod_path(&probe, "");
    struct kube_response resp = {0};
    struct kube_client *client = path ? take_client(r, err) : NULL;
    int found = -1;
    *pod = NULL;
    if (!path)
        set_err(err, "out of memory");
    else if (!client) /* *err says why */
        found = -1;
    else if (kube_request(client, "GET", path, NULL, NULL, 0, RECORDER_FETCH_TIMEOUT_MS, &resp) != 0)
        set_err(err, resp.error);
    else if (resp.status == 404)
        found = 0;
    else if (resp.status != 200)
        set_err(err, resp.error);
    else if (!(*pod = pod_slim_from_text(resp.body ? resp.body : "", resp.body_len)))
        set_err(err, "the API server answered something that is not a Pod");
    else
        found = 1;
    give_client(r, client);
    kube_response_free(&resp);
    free(path);
    return found;
}

/* ---- HAMi: the node lock and bind-phase annotations ----------------------------------- */

/* Any merge patch of the pod's annotations (no precondition). */
static int annotate(void *ctx, const struct pod_info *pod, cJSON *annotations, char **err)
{
    struct recorder *r = ctx;
    char *body = patch_with(annotations, NULL);
    struct kube_client *client = body ? take_client(r, err) : NULL;
    int rc = client ? patch_pod(client, pod, body, WRITE_HAMI_PHASE, err) : (set_err(err, "out of memory"), -1);
    if (rc == 1)
        set_err(err, "409 Conflict");
    give_client(r, client);
    free(body);
    return rc == 0 ? 0 : -1;
}

static char *node_path(const char *node)
{
    char *name = kube_escape(node);
    char *path = name ? strbuf_format("/api/v1/nodes/%s", name) : NULL;
    free(name);
    return path;
}

/* The node's resourceVersion and lock value (NULL: none), both malloc'd. 0 or -1. */
static int read_lock(struct kube_client *client, const char *path, char **rv, char **value, char **err)
{
    struct kube_response resp = {0};
    int rc = -1;
    *rv = *value = NULL;
    if (kube_request(client, "GET", path, NULL, NULL, 0, RECORDER_TIMEOUT_MS, &resp) != 0 || resp.status != 200) {
        set_err(err, resp.error);
    } else {
        cJSON *node = cJSON_Parse(resp.body);
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
        const cJSON *version = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
        const cJSON *lock = cJSON_GetObjectItemCaseSensitive(ann, HAMI_NODE_LOCK_ANNOTATION);
        if (!cJSON_IsString(version))
            set_err(err, "the API server answered a Node without metadata.resourceVersion");
        else if (!(*rv = strdup(version->valuestring)) ||
                 (cJSON_IsString(lock) && !(*value = strdup(lock->valuestring))))
            set_err(err, "out of memory");
        else
            rc = 0;
        cJSON_Delete(node);
    }
    kube_response_free(&resp);
    if (rc != 0) {
        free(*rv);
        free(*value);
        *rv = *value = NULL;
    }
    return rc;
}

/* What one attempt at changing a node's lock decided. */
enum lock_step {
    LOCK_DONE = 0,     /* written, or nothing to write */
    LOCK_CONFLICT = 1, /* the Node changed under the write (409): read again */
    LOCK_REFUSED = 2,  /* another holder's lock stays: *err says whose */
    LOCK_FAILED = -1,  /* *err says why */
};

/* Set (value) or remove (NULL) the lock, conditional on rv: done, a conflict (409), or failed. */
static enum lock_step write_lock(struct kube_client *client, const char *path, const char *rv, const char *value,
                                 char **err)
{
    cJSON *ann = cJSON_CreateObject();
    if (ann && !(value ? cJSON_AddStringToObject(ann, HAMI_NODE_LOCK_ANNOTATION, value)
                       : cJSON_AddNullToObject(ann, HAMI_NODE_LOCK_ANNOTATION))) {
        cJSON_Delete(ann);
        ann = NULL;
    }
    char *body = ann ? patch_with(ann, rv) : NULL;
    struct kube_response resp = {0};
    enum lock_step rc = LOCK_FAILED;
    int sent = 0;
    if (!body)
        set_err(err, "out of memory");
    else if ((sent = kube_request(client, "PATCH", path, "application/merge-patch+json", body, strlen(body),
                                  RECORDER_TIMEOUT_MS, &resp)) != 0)
        set_err(err, resp.error);
    else if (resp.status == 200 || resp.status == 409)
        rc = resp.status == 200 ? LOCK_DONE : LOCK_CONFLICT;
    else
        set_err(err, resp.error);
    if (body)
        metrics_count_api_write(WRITE_HAMI_LOCK, sent, resp.status, resp.error);
    kube_response_free(&resp);
    free(body);
    return rc;
}

/* Does the pod a lock names still exist? HAMi takes over a lock whose
 * owner is gone. Only a clear 404 says it is gone. */
static bool owner_gone(struct kube_client *client, const struct hami_lock *lock)
{
    struct pod_info probe = {.ns = (char *)lock->ns, .name = (char *)lock->name};
    char *path = lock->has_owner ? pod_path(&probe, "") : NULL;
    struct kube_response resp = {0};
    bool gone =
        path && kube_request(client, "GET", path, NULL, NULL, 0, RECORDER_TIMEOUT_MS, &resp) == 0 && resp.status == 404;
    kube_response_free(&resp);
    free(path);
    return gone;
}

/* Why the found lock is not ours to take (NULL: it may be taken). */
static char *lock_refusal(struct kube_client *client, const char *node, const char *value, const struct pod_info *pod,
                          int64_t now)
{
    struct hami_lock lock;
    switch (hami_lock_check(value, now, hami_get_config()->lock_timeout_ns, pod->ns, pod->name)) {
    case HAMI_LOCK_HELD:
        hami_lock_parse(value, &lock);
        if (owner_gone(client, &lock)) {
            log_info("node %s: taking over the HAMi node lock of %s/%s, which no longer exists", node, lock.ns,
                     lock.name);
            return NULL;
        }
        return strbuf_format("node %s is locked for HAMi (hami.io/mutex.lock: \"%.200s\"); retry once HAMi's "
                             "device plugin has allocated that pod",
                             node, value);
    case HAMI_LOCK_UNREADABLE:
        return strbuf_format("node %s carries a hami.io/mutex.lock that does not read as \"TIME,NAMESPACE,NAME\"; "
                             "it is not taken over (remove it if no HAMi scheduler holds it)",
                             node);
    default:
        return NULL;
    }
}

/* Given the lock as read (value, NULL when there is none, at the Node's
 * resourceVersion rv), decide and write it for pod. */
typedef enum lock_step (*lock_change)(struct kube_client *client, const char *path, const char *node, const char *rv,
                                      const char *value, const struct pod_info *pod, char **err);

/* Read the node's lock and apply change, again after every 409 up to the
 * retry limit. No lock of ours is held: the API server's resourceVersion
 * precondition is what keeps two writers apart. */
static enum lock_step change_node_lock(struct recorder *r, const char *node, const struct pod_info *pod,
                                       lock_change change, const char *verb, char **err)
{
    char *path = node_path(node);
    struct kube_client *client = path ? take_client(r, err) : NULL;
    enum lock_step step = LOCK_FAILED;
    if (!path)
        set_err(err, "out of memory");
    for (int attempt = 0; client && attempt <= RECORDER_CONFLICT_RETRIES; attempt++) {
        char *rv = NULL, *value = NULL;
        step = read_lock(client, path, &rv, &value, err) == 0 ? change(client, path, node, rv, value, pod, err)
                                                              : LOCK_FAILED;
        free(rv);
        free(value);
        if (step != LOCK_CONFLICT)
            break;
    }
    if (step == LOCK_CONFLICT && err && !*err)
        *err = strbuf_format("the node kept changing (409 Conflict on every attempt to %s it)", verb);
    give_client(r, client);
    free(path);
    return step;
}

static enum lock_step take_lock(struct kube_client *client, const char *path, const char *node, const char *rv,
                                const char *value, const struct pod_info *pod, char **err)
{
    int64_t now = clock_realtime_ns();
    char mine[600];
    if (value && hami_lock_check(value, now, INT64_MAX, pod->ns, pod->name) == HAMI_LOCK_OURS)
        return LOCK_DONE; /* a retried bind: the lock is already ours */
    char *refusal = lock_refusal(client, node, value, pod, now);
    if (refusal) {
        set_err(err, refusal);
        free(refusal);
        return LOCK_REFUSED;
    }
    if (hami_lock_value(mine, sizeof(mine), now, pod->ns, pod->name) != 0) {
        set_err(err, "the pod's name is too long for a node lock");
        return LOCK_FAILED;
    }
    return write_lock(client, path, rv, mine, err);
}

static enum lock_step release_lock(struct kube_client *client, const char *path, const char *node, const char *rv,
                                   const char *value, const struct pod_info *pod, char **err)
{
    (void)node;
    if (!value || hami_lock_check(value, 0, INT64_MAX, pod->ns, pod->name) != HAMI_LOCK_OURS)
        return LOCK_DONE; /* gone, or another holder's now: not ours to remove */
    return write_lock(client, path, rv, NULL, err);
}

static int lock_node(void *ctx, const char *node, const struct pod_info *pod, char **err)
{
    enum lock_step step = change_node_lock(ctx, node, pod, take_lock, "lock", err);
    return step == LOCK_DONE ? 0 : step == LOCK_FAILED ? -1 : 1;
}

static int unlock_node(void *ctx, const char *node, const struct pod_info *pod, char **err)
{
    return change_node_lock(ctx, node, pod, release_lock, "unlock", err) == LOCK_DONE ? 0 : -1;
}

struct recorder *recorder_new(const struct kube_config *cfg, char **err)
{
    struct recorder *r = calloc(1, sizeof(*r));
    if (!r || pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        set_err(err, "out of memory");
        return NULL;
    }
    r->cfg = cfg;
    /* Check the configuration now rather than at the first decision. */
    struct kube_client *first = kube_client_new(cfg, err);
    if (!first) {
        recorder_free(r);
        return NULL;
    }
    give_client(r, first);
    r->sink = (struct decision_sink){record, clear, bind, fetch, r, lock_node, unlock_node, annotate, bind_decided};
    return r;
}

void recorder_free(struct recorder *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nidle; i++)
        kube_client_free(r->idle[i]);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

const struct decision_sink *recorder_sink(struct recorder *r)
{
    return &r->sink;
}
