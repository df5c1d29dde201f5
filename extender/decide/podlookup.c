/* podlookup.c - the copy of a pod that a decision acts on. See podlookup.h. */
#include "extender/decide/podlookup.h"
#include "extender/decide/sink.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <stdlib.h>
#include <string.h>

bool pod_same_uid(const struct pod_info *a, const char *uid)
{
    return !uid || !*uid || !a->uid || strcmp(a->uid, uid) == 0;
}

/* The cache's copy under that UID, cloned; NULL when it has none (*other
 * set when it has the name under another UID). *err only on OOM. */
static struct pod_info *cached_copy(struct cluster_cache *c, const char *key, const char *uid, char **other, char **err)
{
    cache_read_lock(c);
    const struct pod_entry *e = cache_find_pod(c, key);
    struct pod_info *pod = NULL;
    if (e && pod_same_uid(e->info, uid)) {
        if (!(pod = pod_info_clone(e->info)))
            *err = strdup("out of memory");
    } else if (e) {
        *other = strdup(e->info->uid ? e->info->uid : "");
    }
    cache_unlock(c);
    return pod;
}

/* Put pod in the cache unless it holds that UID by now. Returns the copy to
 * use: pod, or (freeing pod) the cache's own when the watch came first. */
static struct pod_info *feed(struct cluster_cache *c, struct pod_info *pod)
{
    cache_write_lock(c);
    const struct pod_entry *e = cache_find_pod(c, pod->key);
    if (e && pod_same_uid(e->info, pod->uid)) {
        struct pod_info *cached = pod_info_clone(e->info);
        if (cached) {
            pod_info_free(pod);
            pod = cached;
        }
    } else if (!pod->terminal) { /* the watch lists no finished pods and would never delete it */
        struct pod_info *copy = pod_info_clone(pod);
        if (!copy || cache_apply_pod_locked(c, copy, clock_realtime_ns()) != 0)
            log_warn("pod %s: could not add it to the cache (out of memory)", pod->key);
    }
    cache_unlock(c);
    return pod;
}

/* Offline: the request's copy is all there is. A cached pod of that name
 * under another UID is a previous incarnation: its assumption goes. */
static struct pod_info *offline_copy(struct cluster_cache *c, const struct pod_info *request, bool replace, char **err)
{
    struct pod_info *pod = pod_info_clone(request);
    struct pod_info *copy = pod && replace ? pod_info_clone(request) : NULL;
    if (!pod || (replace && !copy)) {
        pod_info_free(pod);
        pod_info_free(copy);
        *err = strdup("out of memory");
        return NULL;
    }
    if (copy) {
        cache_write_lock(c);
        const struct pod_entry *e = cache_find_pod(c, copy->key);
        if (e && !pod_same_uid(e->info, copy->uid))
            cache_apply_pod_locked(c, copy, clock_realtime_ns());
        else
            pod_info_free(copy);
        cache_unlock(c);
    }
    return pod;
}

/* Read the pod from the API server and parse it as the watch would. */
static struct pod_info *fetch(struct cluster_cache *c, const struct decision_sink *sink, const char *ns,
                              const char *name, const char *key, const char *why_read, char **err)
{
    cJSON *obj = NULL;
    char *why = NULL;
    int found = sink->fetch(sink->ctx, ns, name, &obj, &why);
    struct pod_info *pod = NULL;
    if (found > 0) {
        pod = cache_pod_from_json(c, obj, &why);
        if (!pod)
            *err = strbuf_format("pod %s as the API server has it is not usable: %s", key, why ? why : "out of memory");
    } else if (found == 0) {
        *err = strbuf_format("pod %s %s and the API server does not have it either (deleted?)", key, why_read);
    } else {
        *err = strbuf_format("pod %s %s and reading it from the API server failed: %s", key, why_read,
                             why ? why : "unknown error");
    }
    cJSON_Delete(obj);
    free(why);
    return pod;
}

struct pod_info *pod_lookup(struct cluster_cache *c, const struct decision_sink *sink, const char *ns, const char *name,
                            const char *uid, const struct pod_info *request, bool *fetched, char **err)
{
    *fetched = false;
    char *key = strbuf_join2(ns && *ns ? ns : "default", '/', name);
    char *other = NULL;
    struct pod_info *pod = key ? cached_copy(c, key, uid, &other, err) : NULL;
    if (!key)
        *err = strdup("out of memory");
    if (pod || *err)
        goto out;
    if (!sink || !sink->fetch) {
        if (request)
            pod = offline_copy(c, request, other != NULL, err);
        else if (other)
            *err = strbuf_format("pod %s has UID %s in the extender's cache, the request names %s", key, other, uid);
        else
            *err = strbuf_format("pod %s is not in the extender's cache", key);
        goto out;
    }
    pod = fetch(c, sink, ns && *ns ? ns : "default", name, key,
                other ? "has another UID in the extender's cache (deleted and created again?)"
                      : "is not in the extender's cache yet",
                err);
    if (!pod)
        goto out;
    *fetched = true;
    log_info("pod %s: read from the API server (%s)", key, other ? "another UID in the cache" : "not in the cache");
    pod = feed(c, pod);
    if (!pod_same_uid(pod, uid)) {
        *err = strbuf_format("pod %s has UID %s in the API server, the request names %s (deleted and created again?)",
                             key, pod->uid, uid);
        pod_info_free(pod);
        pod = NULL;
    }
out:
    if (!pod && !*err)
        *err = strdup("out of memory");
    free(other);
    free(key);
    return pod;
}
