/*
 * hami_fit.h - does a pod's HAMi part fit a HAMi node, and on which GPUs.
 *
 * Owns the per-node decision for HAMi vGPUs (docs/hami.md), which
 * allocator.c asks on HAMi nodes: per container, nvidia.com/gpu vGPUs on as
 * many different GPUs, each with the memory asked (MiB, or a share of that
 * GPU) and the cores; a GPU holds at most its split count of tasks and its
 * cores; gpucores 100 takes a GPU nobody else uses, and a task without
 * cores does not go to a GPU whose cores are all taken (HAMi's rules). A
 * GPU in MIG mode (HAMi v2.10 dynamic MIG) also needs a MIG instance: HAMi's
 * profile for the memory asked, at the free placement that keeps the
 * largest profiles possible (mig_choose, MIG_POLICY_KEEP_LARGEST), charged
 * the profile's memory and cores; the choice is the fitting node's reason
 * (explain). Never chosen: unhealthy GPUs, MIG-mode GPUs without profiles,
 * GPUs of another mode than the
 * pod's nvidia.com/vgpu-mode, and GPUs its type and UUID annotations
 * exclude. GPUs are tried in the order of the pod's
 * hami.io/gpu-scheduler-policy, else --hami-gpu-policy; a container of
 * several vGPUs takes the best-connected set where the node has a topology
 * annotation (the policy's own pick when it is as good). A pod asking
 * exactly topology-aware, on a node with hami.io/node-nvidia-score, takes
 * HAMi's pick from those pair scores instead (cluster/hami_topology.h). Use of the pod
 * itself (and of preemption victims) is not counted against it. Every
 * failure names the GPU, its UUID and the numbers.
 *
 * Pure: reads the node under the caller's cache lock, writes only fit.
 */
#ifndef GQA_HAMI_FIT_H
#define GQA_HAMI_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cache.h"
#include "extender/decide/fit.h"

struct hami_fit_score {
    int policy;    /* 0..FIT_SCORE_MAX from the node policy's view of the node's HAMi use */
    int64_t pairs; /* GPU pairs inside multi-vGPU containers placed with a topology */
};

/* Fit the pod's containers that n's HAMi devices serve. On success the
 * chosen devices are in fit->hami_masks (when given), topology scores are
 * added to fit->set_score/set_best, and *score is set; on failure
 * fit->reason says why. Returns fit->fits. */
bool hami_fit(const struct node_state *n, const struct pod_info *pod, const struct pod_entry *const *excluded,
              size_t nexcluded, const struct alloc_policy *policy, struct fit_result *fit,
              struct hami_fit_score *score);

/* The MIG instances of a decision: replays the fit's choices for the
 * devices of masks (the fit that decided it, on the same node state, under
 * the same lock), sets the memory and cores of those devices' entries in
 * alloc (hami_alloc_from_fit's) to the profile's, and gives the entries of
 * hami.io/vgpu-mig-allocations (*out malloc'd, NULL when the pod has no
 * vGPU on a MIG-mode device). 0, or -1 with *err (NULL: out of memory). */
int hami_fit_mig(const struct node_state *n, const struct pod_info *pod, const uint64_t *masks,
                 struct hami_alloc *alloc, struct mig_hami_allocation **out, int *count, char **err);

/* Does the pod have a container n's HAMi devices serve? */
bool hami_pod_on(const struct pod_info *pod, const struct node_state *n);

#endif
