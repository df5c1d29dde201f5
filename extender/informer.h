/*
 * informer.h - keep the cache in step with the API server: list, then watch.
 *
 * Owns one resource stream per informer (nodes; pods in all namespaces
 * without the finished ones; ConfigMaps of one namespace, or one ConfigMap):
 * a list that replaces the cache's objects of that kind in one step, then a
 * watch from the list's resourceVersion with bookmarks, resumed from the last
 * resourceVersion seen after a dropped connection (backoff with jitter), and
 * a fresh list when the API server answers 410 Gone. Events are applied
 * through the same cache functions as the offline state file.
 */
#ifndef GQA_INFORMER_H
#define GQA_INFORMER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "extender/cache.h"
#include "extender/kubeclient.h"

enum informer_kind { INFORMER_NODES, INFORMER_PODS, INFORMER_CONFIGMAPS };

struct informer {
    /* configuration */
    char *name;                 /* "nodes", "pods", "configmaps/kube-public", ... */
    enum informer_kind kind;
    char *list_path;            /* collection path with its selectors */
    char *cm_namespace;         /* ConfigMaps: the namespace replaced on relist */
    char *cm_name;              /* ConfigMaps: a single object, or NULL */
    struct cluster_cache *cache;
    const struct kube_config *kube;
    int watch_timeout_s;        /* server-side timeoutSeconds, jittered per watch */
    struct informer **after;    /* list only once these have synced (bounded wait) */
    size_t nafter;

    /* state */
    pthread_t thread;
    int started;
    volatile int stop;
    atomic_int synced;          /* 1 after the first successful list */
    pthread_mutex_t lock;       /* guards the strings below */
    char resource_version[64];
    char last_error[256];
    int64_t failing_since_ns;   /* 0 while healthy */

    /* counters for /metrics and /inspect */
    atomic_uint_fast64_t events, relists, reconnects, bookmarks, errors;
};

/* Set up (not started) an informer. NULL on allocation failure. */
struct informer *informer_new(const char *name, enum informer_kind kind, const char *list_path,
                              const char *cm_namespace, const char *cm_name, struct cluster_cache *cache,
                              const struct kube_config *kube);
/* Make inf's first list wait (at most INFORMER_AFTER_WAIT_S) for others to
 * sync: pods wait for the CRL ConfigMaps, whose defaults their charges use. */
#define INFORMER_AFTER_WAIT_S 30
void informer_after(struct informer *inf, struct informer **others, size_t n);
int informer_start(struct informer *inf);
/* Stop the thread (prompt: the watch checks the stop flag) and free. */
void informer_free(struct informer *inf);

/* Snapshot for readiness and /inspect. failing_for_ns is 0 while healthy. */
struct informer_status {
    int synced;
    int64_t failing_for_ns;
    char resource_version[64];
    char last_error[256];
};
void informer_status(struct informer *inf, struct informer_status *out);

/* Apply one watch event line ({"type": ..., "object": ...}) to the cache.
 * Exposed for tests. Returns 0, 1 when the stream must restart with a
 * relist (410 Gone), -1 on a malformed event (logged and skipped). */
int informer_apply_event(struct informer *inf, const char *line, size_t len);

#endif
