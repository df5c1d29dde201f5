/*
 * admission/hamiquota.h - HAMi's ResourceQuota rule, checked at scheduling
 * time (docs/hami.md, "ResourceQuota on gpumem and gpucores").
 *
 * Owns what a ResourceQuota means to HAMi's scheduler: of spec.hard only
 * limits.nvidia.com/gpumem (MiB, times HAMi's memoryFactor) and
 * limits.nvidia.com/gpucores (percent of a GPU, summed over vGPUs); a
 * scoped quota (spec.scopes or spec.scopeSelector) is not HAMi's. It keeps
 * the quotas of every namespace (hami_quota_set), says what a namespace
 * uses (the HAMi charges the cache holds for its pods, this extender's
 * reservations included) and what a pod asks on a node (the vGPUs the fit
 * chose), and judges the fit: used + asked <= limit for every quota of the
 * namespace that names the resource; an explicit 0 admits no vGPU.
 *
 * Concurrency: a hami_quota_set is guarded by the cluster cache's lock:
 * writers (the ResourceQuota feed) hold the write lock, readers (placement)
 * the read or write lock they already hold for the fit.
 */
#ifndef GQA_ADMISSION_HAMIQUOTA_H
#define GQA_ADMISSION_HAMIQUOTA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cache.h"

#define HAMI_QUOTA_MEMORY_KEY "limits.nvidia.com/gpumem"
#define HAMI_QUOTA_CORES_KEY "limits.nvidia.com/gpucores"
/* Bounds of a limit: 2^40 MiB (1 EiB) of vGPU memory, 10^9 percent of cores;
 * a larger value is taken for a malformed quota, not for "unlimited". */
#define HAMI_QUOTA_MEMORY_MAX (1LL << 40)
#define HAMI_QUOTA_CORES_MAX 1000000000LL
/* The most HAMi quotas held in all, so a flood of objects cannot grow the
 * set (and the per-request scans over it) without end; past it, further
 * quotas are not held (a relist logs it). */
#define HAMI_QUOTA_MAX_OBJECTS 10000

/* One ResourceQuota's HAMi limits. */
struct hami_rq {
    char *ns, *name;
    bool has_memory, has_cores;
    int64_t memory; /* as written: units of memoryFactor MiB */
    int64_t cores;  /* percent */
};

/* Read a ResourceQuota object. 1 with *out filled (the caller frees it with
 * hami_rq_clear) when it limits gpumem or gpucores; 0 when it is not HAMi's
 * (scoped, or neither key), *err then saying why (malloc'd, may be NULL);
 * -1 with *err when it is malformed (no name, a key's value that is not a
 * whole non-negative quantity within bounds). */
int hami_rq_parse(const cJSON *obj, struct hami_rq *out, char **err);
void hami_rq_clear(struct hami_rq *q);

/* Every HAMi quota of the cluster. */
struct hami_quota_set {
    struct hami_rq *items;
    size_t count, cap;
};

void hami_quota_set_init(struct hami_quota_set *s);
void hami_quota_set_free(struct hami_quota_set *s);
/* Hold exactly items[0..n) (a relist: each namespace/name once); ownership
 * of each item passes, also on failure (-1: out of memory or more than
 * HAMI_QUOTA_MAX_OBJECTS; the items that fitted are held). */
int hami_quota_set_replace(struct hami_quota_set *s, struct hami_rq *items, size_t n);
/* Add or replace ns/name (the item passes). 0, or -1 (out of memory, or the
 * set is full; the item is freed). */
int hami_quota_set_put(struct hami_quota_set *s, struct hami_rq *item);
/* Forget ns/name (a deleted quota, or one that is no longer HAMi's). */
void hami_quota_set_remove(struct hami_quota_set *s, const char *ns, const char *name);
/* Does any quota of ns limit gpumem or gpucores? */
bool hami_quota_binds(const struct hami_quota_set *s, const char *ns);

/* HAMi memory (MiB) and cores (percent), used or asked. */
struct hami_quota_use {
    int64_t memory_mib, cores;
};

/* What namespace ns holds: the HAMi charges of its pods in the cache (bound
 * or reserved), the pods in `excluded` not counted (the pod's own entry).
 * Under the cache's lock. */
void hami_quota_used(const struct cluster_cache *c, const char *ns, const struct pod_entry *const *excluded,
                     size_t nexcluded, struct hami_quota_use *out);
/* What the pod asks on node n: per HAMi container, per device the fit chose
 * (hami_masks[i], bit d = n->spec->hami->devices[d]), that device's memory
 * share and the container's cores. */
void hami_quota_asked(const struct pod_info *pod, const struct node_state *n, const uint64_t *hami_masks,
                      struct hami_quota_use *out);

/* The rule: true when used + asked fits every quota of ns; else false with
 * the reason written to reason (size bytes, cut short if need be; 512 hold
 * any): "namespace N quota \"Q\" limits.nvidia.com/gpumem: U used + A asked
 * > L", naming the first quota that refuses. memory_factor is HAMi's
 * memoryFactor (>= 1): memory limits count units of that many MiB, and the
 * numbers in the reason are MiB. A pod that asks nothing passes. */
bool hami_quota_check(const struct hami_quota_set *s, const char *ns, int memory_factor,
                      const struct hami_quota_use *used, const struct hami_quota_use *asked, char *reason, size_t size);

#endif
