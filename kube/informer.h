/*
 * informer.h - keep a consumer in step with the API server: list, then watch.
 *
 * Owns one resource stream per informer (any collection path with its
 * selectors): a list whose objects replace everything the consumer holds of
 * that stream in one step, then a watch from the list's resourceVersion with
 * bookmarks, resumed from the last resourceVersion seen after a dropped
 * connection (backoff with jitter), and a fresh list when the API server
 * answers 410 Gone. What the objects become is the consumer's business: it
 * hands the informer a sink (the extender's feeds the cluster cache), so this
 * layer knows the API, not the model.
 *
 * Threads: each informer runs its own thread; the sink is called from it
 * only. Counters are atomics; the strings are guarded by the informer's lock,
 * which is never held across network I/O or a sink call.
 */
#ifndef GQA_INFORMER_H
#define GQA_INFORMER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube/kubeclient.h"

/* Where an informer's objects go. Every function is called from the
 * informer's thread with ctx. */
struct informer_sink {
    /* Parse one object's text (a list item, or the object of an ADDED,
     * MODIFIED or DELETED event); may keep only the fields the sink reads.
     * NULL means cJSON_ParseWithLength. */
    cJSON *(*parse)(const char *text, size_t len);
    /* A listed object into what replace() takes. NULL with *err skips the
     * object (it is logged and counted); *taken = true when the item is obj
     * itself, which the informer then does not free. */
    void *(*convert)(void *ctx, cJSON *obj, bool *taken, char **err);
    void (*free_item)(void *item);
    /* Hold exactly items[0..n) for this stream, in one step. Ownership of
     * every item passes (also on failure); the array stays the informer's. */
    int (*replace)(void *ctx, void **items, size_t n);
    /* ADDED or MODIFIED: 0, or -1 with *err (the object is skipped). */
    int (*apply)(void *ctx, cJSON *obj, char **err);
    /* DELETED: the object as it was last seen. */
    int (*remove)(void *ctx, const cJSON *obj);
    void *ctx;
    /* Told of every object the informer drops, after it logged why:
     * reason is "malformed" (not a JSON object: an unparsable list item or
     * watch event), "invalid" (convert or apply refused it) or
     * "out_of_memory". One dropped object never fails a list or a watch.
     * May be NULL. */
    void (*skipped)(void *ctx, const char *reason);
    /* Optional: parse's form for a watch event, which parses the object in
     * place, where the event's text holds it, and sets *used to the bytes
     * it took (after the object's closing brace), so the event is scanned
     * once, not twice. NULL when the text there is not one object. */
    cJSON *(*parse_prefix)(const char *text, size_t len, size_t *used);
    /* Optional, beside parse_prefix, apply_item and remove_item: a listed
     * object, or a change event's object where the event holds it, read
     * straight into the item convert() would make, without a cJSON tree. Returns the item, with
     * *used set as parse_prefix sets it and the object's
     * metadata.resourceVersion copied into rv (rv_size bytes, cut short as
     * the informer keeps it; "" when none); NULL when the sink wants the
     * tree for this object, which the informer then parses with
     * parse_prefix from the same place. */
    void *(*item_from_prefix)(void *ctx, const char *text, size_t len, size_t *used, char *rv, size_t rv_size);
    /* ADDED or MODIFIED of such an item, which it takes: 0, or -1 with
     * *err (the object is skipped). */
    int (*apply_item)(void *ctx, void *item, char **err);
    /* DELETED of such an item, which it takes. */
    int (*remove_item)(void *ctx, void *item);
};

struct informer {
    /* configuration */
    char *name;      /* "nodes", "pods", "configmaps/kube-public", ... */
    char *list_path; /* collection path with its selectors */
    struct informer_sink sink;
    const struct kube_config *kube;
    int watch_timeout_s;     /* server-side timeoutSeconds, jittered per watch */
    struct informer **after; /* list only once these have synced (bounded wait) */
    size_t nafter;

    /* state */
    pthread_t thread;
    int started;
    volatile int stop;
    atomic_int synced;    /* 1 after the first successful list */
    pthread_mutex_t lock; /* guards the strings below */
    char resource_version[64];
    char last_error[512];
    int64_t failing_since_ns; /* 0 while healthy */

    /* counters for /metrics and /inspect */
    atomic_uint_fast64_t events, relists, reconnects, bookmarks, errors;
};

/* Set up (not started) an informer. NULL on allocation failure. */
struct informer *informer_new(const char *name, const char *list_path, const struct informer_sink *sink,
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
    char last_error[512]; /* one line, controls replaced; a long one ends "..." */
    int waiting;          /* not failing: its first list waits for informer_after's others */
};

void informer_status(struct informer *inf, struct informer_status *out);

/* Apply one watch event line ({"type": ..., "object": ...}) through the sink.
 * Exposed for tests. Returns 0, 1 when the stream must restart with a
 * relist (410 Gone), -1 on a malformed event (logged and skipped). */
int informer_apply_event(struct informer *inf, const char *line, size_t len);

#endif
