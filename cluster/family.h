/*
 * family.h - the device-family interface: one table of operations per kind
 * of GPU a node can offer and a container can ask for.
 *
 * A family says which resource names it reads from containers and nodes,
 * how a container's amounts become its request (classify), how many GPUs
 * a node's offer counts and how much of its memory each GPU has (read a
 * node's devices), which per-GPU memory pool its charges go to
 * (charge/uncharge: the cache applies them by pool), how it is placed
 * (shares and whole GPUs by the allocator, or devices of its own), and how
 * it is named and measured when shown (render). The families are
 * GPU-Manager's vcuda (family_vcuda.c), the MPS plugin's shares
 * (family_mps.c), whole GPUs (family_pgpu.c) and HAMi's vGPUs
 * (family_hami.c); families.c registers them, in one table, the way
 * libcurl registers protocol handlers. Code outside a family's own file
 * reads the table and never asks which family it holds.
 *
 * A family table is constant data, written once in its own file: no state,
 * no locks, safe from every thread.
 */
#ifndef GQA_FAMILY_H
#define GQA_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cluster/fitline.h"
#include "lib/strbuf.h"

struct container_request; /* podinfo.h */
struct gpu_amounts;       /* below */
struct node_spec;         /* nodespec.h */
struct node_state;        /* occupancy.h */
struct pod_entry;         /* occupancy.h */
struct pod_info;          /* podinfo.h */

/* Families registered at most (node summaries keep one bit per family). */
#define GPU_FAMILY_MAX 8
/* Per-GPU memory pools: a family that meters memory per GPU names one. The
 * node summary line (fitline.h) keeps each in 16 bytes of its 64. */
#define GPU_MEMORY_POOLS 2
_Static_assert(GPU_MEMORY_POOLS == FIT_LINE_MEMORY_POOLS, "the summary line keeps every memory pool");

/* Resource names a family reads from a container, at most. */
#define GPU_FAMILY_RESOURCES 4
/* Distinct container resource names over every family, at most. */
#define GPU_AMOUNT_KEYS_MAX 16
/* Resources one container names under a family's resource_prefix, at most. */
#define GPU_AMOUNT_PREFIXED_MAX 8
#define GPU_AMOUNT_NAME_MAX 64

/* How a family's requests are placed on a node. */
enum gpu_placement {
    /* Per-GPU shares of cores and memory, or whole idle GPUs chosen on the
     * node's topology (extender/decide/allocator.c). */
    GPU_PLACE_SHARES_OR_WHOLE = 0,
    /* Devices the node registers itself (HAMi: extender/decide/hami_fit.c). */
    GPU_PLACE_HAMI_DEVICES,
    /* The family counts and fits its own units per node (fit_node,
     * charge and the node state it keeps: MIG instances). */
    GPU_PLACE_FAMILY,
};

/* What a family is: flags of struct gpu_family. */
enum {
    /* A request below one GPU shares a GPU's cores and memory pool. */
    GPU_FAMILY_SHARES = 1u << 0,
    /* The core resource counts whole GPUs (nvidia.com/gpu: 2), not percent. */
    GPU_FAMILY_COUNTS_GPUS = 1u << 1,
    /* Shares must be packed (GPU-Manager re-checks shared placements on the
     * node in its own binpack order: --gpu-policy spread is refused). */
    GPU_FAMILY_BINPACK_ONLY = 1u << 2,
    /* On a HAMi node its containers are served by HAMi's devices. */
    GPU_FAMILY_ON_HAMI = 1u << 3,
    /* Decisions also carry GPU-Manager's tencent.com annotations. */
    GPU_FAMILY_GPU_MANAGER_KEYS = 1u << 4,
};

/* A container resource a family reads. */
struct gpu_resource {
    const char *name;
    /* The amount counts as asked when the key is present, even at 0 (HAMi's
     * gpumem and gpucores: gpucores 0 asks for no reserved cores); without
     * it an amount counts only above 0. */
    bool given_at_zero;
};

struct gpu_family {
    const char *name;          /* short, for logs and docs: "vcuda" */
    const char *core_resource; /* the resource its requests are measured in */
    /* The per-GPU memory resource, or NULL. */
    const char *memory_resource;
    /* The node resources read for its offer (NULL: the node offers it some
     * other way, e.g. a registration annotation). */
    const char *node_core_resource, *node_memory_resource;
    /* Container resources, in the order they are read and their errors
     * reported; a name may be shared with another family (the same key then). */
    struct gpu_resource resources[GPU_FAMILY_RESOURCES];
    /* Container resources kube-scheduler sends pods for but no fit reads
     * (HAMi's nvidia.com/priority), NULL-ended. */
    const char *const *interest_only;
    /* Container resources named by a prefix ("nvidia.com/mig-"), read into
     * gpu_amounts.prefixed; NULL when the family has none. */
    const char *resource_prefix;
    /* Families of one kind read the same resource names: a container may
     * use one kind (nvidia.com/gpu and HAMi's keys are one kind). */
    int kind;
    int memory_pool;              /* GPU_MEMORY_POOLS index its memory is metered in, or -1 */
    int64_t memory_unit_bytes;    /* bytes of one memory unit (for metrics), 0 if none */
    const char *memory_unit_text; /* "256 MiB blocks", for explanations */
    unsigned flags;
    enum gpu_placement placement;

    /* Does a container with these amounts use this family? At most one
     * family of a kind claims a container. */
    bool (*claims)(const struct gpu_amounts *a);
    /* Set c's request (c->family is set by the caller); -1 with the reason
     * in err (naming c->name) when it is invalid. */
    int (*classify)(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err);
    /* Does the node offer this family? */
    bool (*offered)(const struct node_spec *s);
    /* How many GPUs the node's offer of this family counts (0: it counts
     * none; the first family in the table that counts some sets the node's
     * GPU count, design.md section 3). */
    int64_t (*gpus_counted)(const struct node_spec *s);
    /* Memory units of one of the node's n GPUs in this family's pool (the
     * topology's per-GPU memory, in MiB, or 0 when unknown). NULL: the
     * node's memory offer split evenly. */
    int64_t (*gpu_memory)(const struct node_spec *s, int n, int64_t topology_mib);
    /* Why node s cannot serve container name (appended to why), for the
     * family's own wording; NULL: "node has no <core resource> capacity". */
    void (*explain_not_offered)(const char *container, struct strbuf *why);

    /* ---- GPU_PLACE_FAMILY only: the family's own units on a node ---- */
    /* (Re)build the family's state of node n from n->spec, dropping every
     * charge (the cache charges the node's pods again after). 0, or -1 when
     * memory ran out (the node then has no state of this family). */
    int (*node_reset)(struct node_state *n, void **state);
    void (*node_free)(void *state);
    /* Add (sign +1) or take back (-1) container r's units on node n. */
    void (*charge)(void *state, const struct node_state *n, const struct container_request *r, int sign);
    /* Do the pod's containers of this family fit node n, the charges of the
     * excluded pods on n given back? true with *utilization (0..1000: the
     * share of the family's units in use on n with the pod placed), or false
     * with the reason appended to why. */
    bool (*fit_node)(const void *state, const struct node_state *n, const struct pod_info *pod,
                     const struct pod_entry *const *excluded, size_t nexcluded, int *utilization, struct strbuf *why);
    /* Render: each kind of unit the family keeps on node n, handed to put
     * with the resource that names it ("nvidia.com/mig-1g.10gb"), how many
     * the node offers and how many are held (the page, the plugin,
     * /inspect/nodes and the metrics show them alike). */
    void (*units)(const void *state, const struct node_state *n,
                  void (*put)(void *ctx, const char *resource, int64_t total, int64_t used), void *ctx);
    /* Quota: the model name of a quota line that may cap container r's
     * units on a node of spec s besides the node's own model (MIG:
     * "<model>-MIG-<profile>"), written to buf; false when there is none.
     * One unit counts 100 there (a line of 4 allows 4). */
    bool (*quota_line)(const struct node_spec *s, const struct container_request *r, char *buf, size_t size);
};

/* The names shown for a container's family (NULL: no family): its core
 * resource, and its memory resource or "none". */
static inline const char *gpu_family_core_name(const struct gpu_family *f)
{
    return f ? f->core_resource : "none";
}

static inline const char *gpu_family_memory_name(const struct gpu_family *f)
{
    return f && f->memory_resource ? f->memory_resource : "none";
}

/* ---- container amounts ------------------------------------------------------ */

/* The GPU amounts one container names, by key (gpu_amount_key_name), each
 * range-checked by the reader (at most GPU_AMOUNT_MAX); bit k of given:
 * key k counts as asked (struct gpu_resource). */
struct gpu_amounts {
    int64_t value[GPU_AMOUNT_KEYS_MAX];
    uint32_t given;
    /* Names under a family's resource_prefix, with their amounts (0 too:
     * a name at 0 asks for nothing). */
    int nprefixed;

    struct {
        char name[GPU_AMOUNT_NAME_MAX];
        int64_t value;
    } prefixed[GPU_AMOUNT_PREFIXED_MAX];
};

/* The distinct container resource names of every family, in the order they
 * are read. */
int gpu_amount_key_count(void);
const char *gpu_amount_key_name(int k);
/* The key index of a resource name (len bytes), or -1. */
int gpu_amount_key_of(const char *name, size_t len);

/* Empty: no key given, every value 0, no prefixed name (the prefixed
 * names' text is not cleared: nprefixed says what is there). */
static inline void gpu_amounts_clear(struct gpu_amounts *a)
{
    memset(a->value, 0, sizeof(a->value));
    a->given = 0;
    a->nprefixed = 0;
}

/* Record key k's amount (range-checked by the reader). */
void gpu_amounts_set(struct gpu_amounts *a, int k, int64_t value);

/* Is name (len bytes) under some family's resource_prefix? */
bool gpu_amount_prefixed(const char *name, size_t len);
/* Record a prefixed name's amount; -1 (reason in err, naming container)
 * when the container names more than GPU_AMOUNT_PREFIXED_MAX of them or a
 * name is longer than GPU_AMOUNT_NAME_MAX - 1. */
int gpu_amounts_set_prefixed(struct gpu_amounts *a, const char *name, size_t len, int64_t value, const char *container,
                             struct strbuf *err);

/* The amount of resource `name` (0 when the container does not name it);
 * *given (may be NULL): it counts as asked. */
int64_t gpu_amount(const struct gpu_amounts *a, const char *name, bool *given);

/* ---- the registry (families.c) ---------------------------------------------- */

/* The registered families, in the order nodes count GPUs by them. */
const struct gpu_family *gpu_family_named(const char *name); /* NULL when none */
size_t gpu_family_count(void);
const struct gpu_family *gpu_family_at(size_t i);
/* The family's position in the table (its bit in node summaries: 1 << it). */
size_t gpu_family_index(const struct gpu_family *f);

static inline uint8_t gpu_family_bit(const struct gpu_family *f)
{
    return (uint8_t)(1u << gpu_family_index(f));
}

/* The family the node's GPUs are shared by: the first that counts GPUs on
 * it, else the first that counts whole GPUs. */
const struct gpu_family *gpu_family_primary(const struct node_spec *s);

/* Is `name` (len bytes) a resource kube-scheduler sends a pod to the
 * extender for: a family's container resource or interest-only name? */
bool gpu_family_names_resource(const char *name, size_t len);

/* Set c->family and c's request from a: the family of each kind that claims
 * the container; -1 with the reason in err when kinds are mixed (no family
 * set) or the request is invalid (the family stays set). No family claims
 * it: c->family stays NULL, 0. */
int gpu_family_classify(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err);

/* The short name of memory pool p's resource ("vcuda-memory"), for messages. */
const char *gpu_memory_pool_name(int pool);

/* Append the families' core resources as "a, b or c" (messages that list
 * what a node or pod could have named). */
void gpu_family_list_core_resources(struct strbuf *sb, bool with_node_resource_only);

#endif
