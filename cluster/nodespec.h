/*
 * nodespec.h - what a node offers.
 *
 * Owns the translation of a Node object (cJSON) into GPU facts: allocatable
 * amounts of each GPU resource, the GPU count (design.md section 3: vcuda-core /
 * 100, else mps-core / 100, else nvidia.com/gpu, else the topology
 * annotation; on a HAMi node neither of the last two), per-GPU memory and device minors (from the topology
 * annotation when it is present and consistent), and the labels later
 * modules need.
 */
#ifndef GQA_NODESPEC_H
#define GQA_NODESPEC_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include <stdbool.h>
#include <stdint.h>

#include "cluster/family.h"
#include "cluster/hami_node.h"
#include "cluster/mig.h"

#include "topology/annotation.h"

struct node_gpu_spec {
    int minor;
    int numa;
    int64_t memory[GPU_MEMORY_POOLS]; /* units of each family's memory pool on this GPU (cluster/family.h) */
};

struct node_spec {
    char *name;
    /* Allocatable (else capacity) of each family's node core resource, by
     * family index, and of each memory pool (cluster/family.h). */
    int64_t offer[GPU_FAMILY_MAX];
    int64_t memory_offer[GPU_MEMORY_POOLS];
    uint8_t offers; /* bit gpu_family_bit(f): the node offers family f */
    int gpu_count;
    struct node_gpu_spec *gpus;    /* gpu_count entries */
    struct gpu_topology *topology; /* NULL when absent or unusable */
    struct gpu_topology *shape;    /* what selection uses: topology, or all-SYS with unknown NUMA */
    /* One whole GPU on shape, worked out once per Node for the summary line
     * (nodefit.h): the best score of one GPU (topology_best_possible(shape,
     * 1)) and the GPUs that alone score it; single_exact is false when some
     * GPU alone scores neither that nor 0. */
    int64_t single_best;
    uint64_t single_gpus;
    bool single_exact;
    char *topology_error; /* why an annotation present on the node was not used */
    char *model;          /* --gpu-model-label value (else a HAMi node's device type), or NULL */
    char *pool;           /* --gpu-pool-label value, or NULL */
    char *labels;         /* every label as "key\0value\0" pairs, then "\0"; NULL when none */
    /* The HAMi registration (hami.io/node-nvidia-register), NULL on other
     * nodes. Its devices are apart from gpus[]: on a HAMi node
     * nvidia.com/gpu counts vGPUs, not whole GPUs. */
    struct hami_node *hami;
    /* The MIG inventory NVIDIA's device plugin and GFD advertise
     * (nvidia.com/mig-<profile>, the mig.strategy label), NULL on nodes that
     * say nothing of MIG. */
    struct mig_node *mig;
};

#define DEFAULT_GPU_MODEL_LABEL "tkestack.io/gpu-model"
#define DEFAULT_GPU_POOL_LABEL "tkestack.io/gpu-pool"
/* The label keys read for a node's GPU model and pool (quota, design.md section 6).
 * Set once at start-up, before any node is parsed. */
void nodespec_set_labels(const char *model_label, const char *pool_label);

/* Parse a Node object. NULL with *err (malloc'd) when it is not a usable Node
 * (no metadata.name) or on allocation failure. Bad quantities or a bad
 * topology annotation do not fail the node: they are reported in
 * topology_error or count as zero capacity, and logged. Every amount is
 * range-checked before any arithmetic: a GPU count past TOPOLOGY_MAX_GPUS
 * is clamped to it (with a warning), a memory amount past GPU_AMOUNT_MAX
 * counts as zero (with a warning). */
struct node_spec *node_spec_from_json(const cJSON *node, char **err);
void node_spec_free(struct node_spec *spec);

/* What the node offers of family f's node core resource (0: none). */
static inline int64_t node_spec_offer(const struct node_spec *s, const struct gpu_family *f)
{
    return s->offer[gpu_family_index(f)];
}

/* What the node offers of memory pool `pool` (0 for no pool, -1). */
static inline int64_t node_spec_memory_offer(const struct node_spec *s, int pool)
{
    return pool >= 0 && pool < GPU_MEMORY_POOLS ? s->memory_offer[pool] : 0;
}

/* The value of the node's label key, or NULL (for label selectors). */
const char *node_spec_label(const struct node_spec *spec, const char *key);
/* The GPU model shown to people: the --gpu-model-label value, else the
 * topology annotation's model of the first GPU, else "". */
const char *node_spec_model_name(const struct node_spec *spec);

#endif
