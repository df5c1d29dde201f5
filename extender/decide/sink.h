/*
 * sink.h - the decision's outbound port: where a decision is written
 * besides the cache (placement.h decides, the recorder implements it live,
 * tests fake it).
 *
 * Owns the interface only. Placement, the pod lookup (podlookup.h) and the
 * HAMi bind steps (hamibind.h) write through it, so they include this
 * header and not each other's. Each function does API I/O: called with no
 * lock held (placement.h states the lock order).
 */
#ifndef GQA_SINK_H
#define GQA_SINK_H

#include <cjson/cJSON.h>

#include "cluster/podinfo.h"

/* Where decisions go besides the cache. Offline there is none: the cache
 * alone holds them. Live, the API server gets the annotations (and, in bind
 * mode, the Binding). Each function returns 0, or -1 with *err malloc'd. */
#define DECISION_MAYBE_WRITTEN 2

struct decision_sink {
    /* Patch the decision annotations carried by `decided` onto the pod.
     * DECISION_MAYBE_WRITTEN (with *err) when no answer came (a timeout, a
     * cut connection): the write may still land. */
    int (*record)(void *ctx, const struct pod_info *decided, char **err);
    /* Take them off again (a later step failed). */
    int (*clear)(void *ctx, const struct pod_info *pod, char **err);
    /* Create the pod's Binding to node. */
    int (*bind)(void *ctx, const struct pod_info *pod, const char *node, char **err);
    /* Read a pod (the watch may lag a create, or still hold the previous pod
     * of that name): 1 with *pod (the Pod object, slimmed as the watch's),
     * 0 when the API server has no such pod, -1 with *err. */
    int (*fetch)(void *ctx, const char *ns, const char *name, cJSON **pod, char **err);
    void *ctx;
    /* HAMi binds (hamibind.h); NULL where the sink cannot write them. */
    /* Take node's lock hami.io/mutex.lock for pod, respecting another
     * holder's unexpired lock: 0 taken; 1 with *err held by another (or
     * unreadable), nothing written; -1 with *err the API server failed. */
    int (*lock_node)(void *ctx, const char *node, const struct pod_info *pod, char **err);
    /* Remove the lock when it still names pod: 0, or -1 with *err. */
    int (*unlock_node)(void *ctx, const char *node, const struct pod_info *pod, char **err);
    /* Merge these annotations (a cJSON object, always taken) into the pod's. */
    int (*annotate)(void *ctx, const struct pod_info *pod, cJSON *annotations, char **err);
    /* Create the Binding of `decided` to node with its decision annotations
     * in the Binding's metadata: the API server merges them into the pod in
     * the same write that sets nodeName (UID precondition, refused when the
     * pod is bound already), so a bind is one write and a failed one
     * leaves no annotation behind. NULL: record, then bind. Not used for
     * pods with a HAMi part (their writes need key removal and the
     * bind-phase protocol). */
    int (*bind_decided)(void *ctx, const struct pod_info *decided, const char *node, char **err);
};

#endif
