/* leaderlabel.c - routing to the leader by a label on its pod. See leaderlabel.h. */
#include "extender/live/leaderlabel.h"
#include "extender/decide/metrics.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

struct leader_label {
    struct kube_client *client;
    char *ns, *pod;
    struct leader_callbacks callbacks;
};

char *leader_label_patch(bool set)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
    cJSON *labels = meta ? cJSON_AddObjectToObject(meta, "labels") : NULL;
    bool ok = labels && (set ? cJSON_AddStringToObject(labels, LEADER_LABEL, "true") != NULL
                             : cJSON_AddNullToObject(labels, LEADER_LABEL) != NULL);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* Set or remove the label on pod name of our namespace. 0, or -1 (logged). */
static int label_pod(struct leader_label *l, const char *name, bool set)
{
    char *ns = kube_escape(l->ns), *pod = kube_escape(name);
    char *path = ns && pod ? strbuf_format("/api/v1/namespaces/%s/pods/%s", ns, pod) : NULL;
    char *body = leader_label_patch(set);
    struct kube_response resp = {0};
    int rc = -1, sent = 0;
    if (path && body) {
        sent = kube_request(l->client, "PATCH", path, "application/merge-patch+json", body, strlen(body),
                            LEADER_LABEL_TIMEOUT_MS, &resp);
        metrics_count_api_write(WRITE_LEADER_LABEL, sent, resp.status, resp.error);
    }
    if (!path || !body)
        log_error("leader label: out of memory");
    else if (sent != 0 || resp.status != 200)
        log_warn("leader label: %s it %s pod %s/%s failed: %s", set ? "setting" : "removing", set ? "on" : "from",
                 l->ns, name, resp.error ? resp.error : "unknown error");
    else
        rc = 0;
    kube_response_free(&resp);
    free(body);
    free(path);
    free(pod);
    free(ns);
    return rc;
}

/* The other pods of our namespace that carry the label: a previous leader
 * that died with it. 0, or -1 when they could not all be listed or cleared. */
static int clear_others(struct leader_label *l)
{
    char *ns = kube_escape(l->ns), *sel = kube_escape(LEADER_LABEL "=true");
    char *path = ns && sel ? strbuf_format("/api/v1/namespaces/%s/pods?labelSelector=%s", ns, sel) : NULL;
    struct kube_response resp = {0};
    int rc = -1;
    if (path && kube_request(l->client, "GET", path, NULL, NULL, 0, LEADER_LABEL_TIMEOUT_MS, &resp) == 0 &&
        resp.status == 200) {
        cJSON *list = cJSON_ParseWithLength(resp.body ? resp.body : "", resp.body_len);
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items"), *item;
        rc = cJSON_IsArray(items) ? 0 : -1;
        cJSON_ArrayForEach(item, items)
        {
            const cJSON *meta = cJSON_GetObjectItemCaseSensitive(item, "metadata");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
            if (!cJSON_IsString(name) || strcmp(name->valuestring, l->pod) == 0)
                continue;
            log_info("leader label: pod %s/%s still carries it (a previous leader); removing it", l->ns,
                     name->valuestring);
            if (label_pod(l, name->valuestring, false) != 0)
                rc = -1;
        }
        cJSON_Delete(list);
    } else {
        log_warn("leader label: listing the pods that carry it failed: %s", resp.error ? resp.error : "out of memory");
    }
    kube_response_free(&resp);
    free(path);
    free(sel);
    free(ns);
    return rc;
}

static int on_started(void *ctx)
{
    struct leader_label *l = ctx;
    /* Own label first: the Service then has an endpoint at once. */
    int rc = label_pod(l, l->pod, true);
    if (rc == 0)
        log_info("leader label: set on pod %s/%s; the extender Service routes here", l->ns, l->pod);
    if (clear_others(l) != 0)
        rc = -1;
    return rc;
}

static void on_stopped(void *ctx)
{
    struct leader_label *l = ctx;
    if (label_pod(l, l->pod, false) == 0)
        log_info("leader label: removed from pod %s/%s", l->ns, l->pod);
}

struct leader_label *leader_label_new(const struct kube_config *kube, const char *ns, const char *pod, char **err)
{
    struct leader_label *l = calloc(1, sizeof(*l));
    if (!l || !(l->ns = strdup(ns)) || !(l->pod = strdup(pod))) {
        leader_label_free(l);
        *err = strdup("out of memory");
        return NULL;
    }
    if (!(l->client = kube_client_new(kube, err))) {
        leader_label_free(l);
        return NULL;
    }
    l->callbacks = (struct leader_callbacks){.started = on_started, .stopped = on_stopped, .ctx = l};
    return l;
}

void leader_label_free(struct leader_label *l)
{
    if (!l)
        return;
    kube_client_free(l->client);
    free(l->ns);
    free(l->pod);
    free(l);
}

const struct leader_callbacks *leader_label_callbacks(struct leader_label *l)
{
    return &l->callbacks;
}
