/*
 * allocator.h - does a pod fit on a node, on which GPUs, and how good is it.
 *
 * Owns the per-node decision of design.md sections 3 and 4: each container in
 * order gets its own GPUs (a shared request takes one GPU with both the cores
 * and the memory free, an exclusive one takes that many completely free
 * GPUs), shares of one pod on one GPU add up, usage the cache could not
 * attribute to a GPU is held against the node as a whole, and every failure
 * is explained with the resource, the GPU and the numbers. Pure: reads a
 * node_state under the caller's cache lock and writes only its result.
 * The result and policy types it shares with the HAMi fit are in fit.h.
 */
#ifndef GQA_ALLOCATOR_H
#define GQA_ALLOCATOR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cache.h"
#include "cluster/podspec.h"
#include "extender/decide/fit.h"

/* Fit `pod` on node `n`. `self` is the pod's own cache entry, if any: its
 * current charge on `n` is not counted against it (a re-filter of an assumed
 * pod must not collide with itself). Returns fit->fits. */
bool allocator_fit(const struct node_state *n, const struct pod_info *pod, const struct pod_entry *self,
                   const struct alloc_policy *policy, struct fit_result *fit);

/* The common request (one shared vcuda or MPS container, or a refused
 * whole-GPU one, on a node with a usable summary line, cluster/nodefit.h)
 * is decided from the node's summary line alone; everything else reads the
 * per-GPU table. Both give the same result, byte for byte. */

/* The same, with the charges of several pods on n not counted (the pod's own
 * entry and, for preemption, the proposed victims). */
bool allocator_fit_excluding(const struct node_state *n, const struct pod_info *pod,
                             const struct pod_entry *const *excluded, size_t nexcluded,
                             const struct alloc_policy *policy, struct fit_result *fit);

/* allocator_fit_excluding without the summary-line shortcut (tests compare the two). */
bool allocator_fit_full(const struct node_state *n, const struct pod_info *pod, const struct pod_entry *const *excluded,
                        size_t nexcluded, const struct alloc_policy *policy, struct fit_result *fit);

/* Does the pod ask for a share of a family that must be packed
 * (GPU_FAMILY_BINPACK_ONLY: GPU-Manager's binpack order is then mandatory)? */
bool pod_has_binpack_only_share(const struct pod_info *pod);

#endif
