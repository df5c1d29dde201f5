/*
 * hami_decision.h - a HAMi decision as the annotations HAMi's plugin reads.
 *
 * Owns the writing side of HAMi's protocol (docs/hami.md), for the decision
 * path to call: the allocation of a fit (per container the chosen devices
 * with the memory and cores each takes, an empty entry for containers
 * without vGPUs), the pod annotations of a decision
 * (hami.io/vgpu-devices-to-allocate and -allocated, hami.io/vgpu-node,
 * hami.io/vgpu-time, hami.io/vgpu-mig-allocations) and of a bind (hami.io/bind-phase, hami.io/bind-time),
 * and the node lock hami.io/mutex.lock: its value, and whether a value found
 * on a node may be taken. Pure formatting: the caller does the API calls.
 */
#ifndef GQA_HAMI_DECISION_H
#define GQA_HAMI_DECISION_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/hami_node.h"
#include "cluster/hami_pod.h"
#include "cluster/podspec.h"

/* The allocation of a fit on a HAMi node: container i takes the devices
 * of masks[i] (bit s = h->devices[s], as allocator fit_result.hami_masks),
 * in device order, each with the memory its request takes there and its
 * cores. Entries as HAMi v2.9 lists them: every init container first, then
 * the app containers (podparts.h pod_hami_entry). A container with a HAMi request must have exactly hami.nums bits,
 * any other none. 0, or -1 with *err (malloc'd; NULL when memory ran out). */
int hami_alloc_from_fit(const struct hami_node *h, const struct pod_info *pod, const uint64_t *masks,
                        struct hami_alloc *out, char **err);

/* Set the decision annotations on a cJSON object of annotations:
 * -to-allocate and -allocated = allocation (hami_alloc_encode), vgpu-node,
 * vgpu-time = Unix seconds. 0, or -1 when memory ran out. */
int hami_decision_annotations(cJSON *annotations, const char *node, int64_t now_ns, const char *allocation);
/* hami.io/vgpu-mig-allocations of the decision (HAMi v2.10 dynamic MIG):
 * the pod's MIG instances as HAMi's scheduler encodes them (containerIndex
 * init containers first, as HAMi's device plugin reads it), or null when
 * it has none (a merge patch then removes an earlier attempt's). 0, or -1
 * when memory ran out. */
int hami_decision_mig_annotation(cJSON *annotations, const struct hami_pod *pod);
/* Is value a valid Kubernetes label value (at most 63 characters of
 * [A-Za-z0-9._-], starting and ending alphanumeric, or empty)? */
bool hami_label_value_valid(const char *value);
/* The pod label HAMi's PatchPodAnnotations sets with a decision,
 * hami.io/vgpu-node = node (HAMi's vGPU monitor finds pods by it), on a
 * cJSON object of labels; nothing when node is not a valid label value
 * (HAMi then omits it too), and null when node is NULL (a merge patch then
 * removes it). 0, or -1 when memory ran out. */
int hami_decision_label(cJSON *labels, const char *node);
/* hami.io/bind-phase: allocating and hami.io/bind-time (Unix seconds),
 * written just before the Binding. 0 or -1. */
int hami_bind_annotations(cJSON *annotations, int64_t now_ns);
/* hami.io/bind-phase: failed (the bind did not happen). 0 or -1. */
int hami_bind_failed_annotation(cJSON *annotations);

/* ---- the node lock ------------------------------------------------------------ */

struct hami_lock {
    int64_t time_ns;
    bool has_owner;
    char ns[256], name[256];
};

/* "2026-06-14T15:05:03Z,NAMESPACE,NAME" (RFC 3339 in UTC, as HAMi's Go
 * code writes with time.RFC3339). 0, or -1 when buf is too small. */
int hami_lock_value(char *buf, size_t size, int64_t now_ns, const char *ns, const char *name);
/* Read "TIME,NAMESPACE,NAME" or a bare "TIME" (older holders). 0, or -1. */
int hami_lock_parse(const char *value, struct hami_lock *out);
/* RFC 3339 ("2006-01-02T15:04:05Z", fractions and offsets like "+08:00"
 * accepted): Unix ns, or -1. */
int64_t hami_parse_rfc3339(const char *text);

enum hami_lock_state {
    HAMI_LOCK_FREE = 0,  /* no lock on the node: take it */
    HAMI_LOCK_OURS,      /* held for this very pod (a retried bind): go on */
    HAMI_LOCK_HELD,      /* another holder, not expired: respect it */
    HAMI_LOCK_EXPIRED,   /* another holder, older than the timeout: may be replaced */
    HAMI_LOCK_UNREADABLE /* a value that does not parse: never taken over */
};

/* What the node's lock value (NULL: none) means for pod ns/name at now_ns. */
enum hami_lock_state hami_lock_check(const char *value, int64_t now_ns, int64_t timeout_ns, const char *ns,
                                     const char *name);

#endif
