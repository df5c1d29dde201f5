/*
 * podspec.h - what a pod asks for and what decisions it carries.
 *
 * Owns the translation of a Pod object (cJSON) into the facts the extender
 * uses: per-container GPU requests in the units of design.md section 3, the
 * pod's binding and phase, and the decision annotations of section 4
 * (tencent.com/... and gpu-admission.io/...), into the record of
 * cluster/podinfo.h (its types and the annotation names live there, so the
 * shared reading steps of podparts.c need not include this header). Also
 * owns the formatting of a decision back into annotations.
 */
#ifndef GQA_PODSPEC_H
#define GQA_PODSPEC_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/podinfo.h"

/* From a Pod's JSON text, a cJSON object with only what the extender reads:
 * metadata (name, namespace, uid, resourceVersion, deletionTimestamp,
 * annotations), spec (nodeName; containers' and initContainers' name,
 * resources and restartPolicy) and status.phase. Watches deliver whole pods (env, volumes, managedFields, statuses); skipping the
 * rest with the scanner instead of building a tree for it is most of the
 * cost of applying an event. NULL when the text is not a JSON object or on
 * allocation failure. */
cJSON *pod_slim_from_text(const char *text, size_t len);
/* The same for a Pod object at the start of text (whitespace before it
 * allowed) that need not end the text: *used is set to the bytes up to and
 * including its closing brace. */
cJSON *pod_slim_from_prefix(const char *text, size_t len, size_t *used);

/* Parse a Pod object. Returns NULL only when the object is not a usable Pod
 * (no metadata.name, wrong types) or on allocation failure, with *err set to a
 * malloc'd message. An invalid GPU request (e.g. "0.5" vcuda-core) is not a
 * parse failure: it is recorded in request_error so the caller can explain it. */
struct pod_info *pod_info_from_json(const cJSON *pod, char **err);
void pod_info_free(struct pod_info *pod);

/* A deep copy (the decision's proof included). NULL on allocation failure. */
struct pod_info *pod_info_clone(const struct pod_info *pod);

/* A deep copy of pod whose decision is replaced by (node, time_ns, idx),
 * without a proof (cluster/proof.h signs a new decision):
 * idx[i]/idx_count[i] are container i's GPU minors (NULL/0 for non-GPU
 * containers). NULL on allocation failure. */
struct pod_info *pod_info_with_decision(const struct pod_info *pod, const char *node, int64_t time_ns, int *const *idx,
                                        const int *idx_count);

/* Append the decision annotations for `node` with per-container minors to a
 * cJSON object of annotations (both the tencent.com and gpu-admission.io keys).
 * idx[i] may be NULL for containers without GPUs. 0 or -1 on allocation failure. */
int decision_annotations(cJSON *annotations, const char *node, int64_t time_ns, int ncontainers, int *const *idx,
                         const int *idx_count, bool vcuda);

/* The same for the decision a decided pod carries (d->decision), each
 * container under its own key: an init container's minors under
 * gpu-admission.io/gpu-idx-init-<j> (j its index in spec.initContainers),
 * never under a tencent.com key. 0 or -1 on allocation failure. */
int pod_decision_annotations(cJSON *annotations, const struct pod_info *d, bool vcuda);

#endif
