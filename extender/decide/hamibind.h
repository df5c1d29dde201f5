/*
 * hamibind.h - HAMi's part of a decision and of a bind (docs/hami.md).
 *
 * Owns what a decision does for a pod whose vGPUs a HAMi node serves,
 * beyond what it does for every family: the allocation of the fit carried
 * on the decided pod (so the cache's reservation charges exactly the chosen
 * devices, and the recorder writes hami.io/vgpu-devices-to-allocate and
 * -allocated, hami.io/vgpu-node and hami.io/vgpu-time), with the MIG
 * instances of vGPUs on MIG-mode devices (hami.io/vgpu-mig-allocations), and a bind's steps
 * around the Binding, in HAMi's order: the node lock hami.io/mutex.lock,
 * then hami.io/bind-phase: allocating with hami.io/bind-time; on a failure
 * after the lock, bind-phase failed and the lock released when it is still
 * this pod's. On success the lock stays: HAMi's device plugin releases it
 * once it has allocated the pod.
 *
 * hamibind_attach is pure and runs under the caller's cache write lock; the
 * bind steps do API I/O through the decision sink and are called with no
 * lock held.
 */
#ifndef GQA_HAMIBIND_H
#define GQA_HAMIBIND_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/cache.h"
#include "extender/decide/sink.h"

/* Give `decided` (the pod decided onto n) the HAMi devices of hami_masks
 * (fit_result.hami_masks of the fit that decided it), or no allocation when
 * n serves none of its containers. 0, or -1 with *err (malloc'd). */
int hamibind_attach(const struct node_state *n, struct pod_info *decided, const uint64_t *hami_masks, char **err);

/* Does binding pod (its decided copy) to node take HAMi's steps: a HAMi
 * allocation on node, and a sink that can write them? */
bool hamibind_wanted(const struct decision_sink *sink, const struct pod_info *pod, const char *node);

/* The longest a bind waits for a node lock another pod holds, and the
 * first and longest pause between its tries. */
#define HAMIBIND_LOCK_WAIT_MS 1500
#define HAMIBIND_LOCK_FIRST_TRY_MS 50
#define HAMIBIND_LOCK_LAST_TRY_MS 400

/* Step 1: the node lock. 0 when taken; 1 with *err when another pod holds
 * it (or its value is unreadable) for longer than HAMIBIND_LOCK_WAIT_MS,
 * tried again meanwhile (and never past until_ms, monotonic ms, when it is
 * above 0): nothing of ours was written;
 * -1 with *err when the API server failed (the lock may be ours: abort
 * releases it). Blocks the calling bind worker while it waits (no lock of
 * ours is held). */
int hamibind_lock(const struct decision_sink *sink, const struct pod_info *pod, const char *node, int64_t until_ms,
                  char **err);
/* Step 2: bind-phase allocating and bind-time on the pod. 0, or -1 with *err. */
int hamibind_allocating(const struct decision_sink *sink, const struct pod_info *pod, char **err);
/* After a failure past step 1: bind-phase failed (when step 2 was done) and
 * the lock released. Failures are logged. */
void hamibind_abort(const struct decision_sink *sink, const struct pod_info *pod, const char *node, bool phase_set);

#endif
