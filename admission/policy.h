/*
 * admission/policy.h - the admission rules in force, derived from ConfigMaps.
 *
 * Owns the state the filter and the webhooks enforce: the CRL registry built
 * from the CRL namespace's ConfigMaps and the quota parsed from the quota
 * ConfigMap. It is rebuilt by the cache's configmaps_changed hook, under the
 * cache's write lock, so it always matches the ConfigMaps the cache holds;
 * readers use it under the cache's read lock.
 */
#ifndef GQA_ADMISSION_POLICY_H
#define GQA_ADMISSION_POLICY_H

#include <stdbool.h>

#include "admission/crl.h"
#include "admission/quota.h"
#include "cluster/cache.h"

struct admission_policy {
    char *crl_namespace;
    char *quota_namespace, *quota_name;
    struct crl_registry *crls;  /* never NULL after policy_init */
    struct quota_config *quota; /* NULL: no quota ConfigMap (unrestricted) or invalid */
    char *quota_error;          /* why the quota ConfigMap was not usable, or NULL */
};

/* quota_configmap is "namespace/name". 0 or -1. */
int policy_init(struct admission_policy *p, const char *crl_namespace, const char *quota_configmap);
void policy_destroy(struct admission_policy *p);
/* The cache_config.configmaps_changed hook (ctx = the policy). */
void policy_rebuild(void *ctx, struct cluster_cache *c);

/* Prepare a pod for placement under the read lock: check it against the
 * enabled CRLs and write the CRL defaults into the pod object (so a shared
 * vcuda container without vcuda-memory takes the default). Returns NULL when
 * the pod complies, else the violations as one message (malloc'd). */
char *policy_prepare_pod(const struct admission_policy *p, cJSON *pod);

/* The cache_config.prepare_pod hook (ctx = the policy): write CRL defaults
 * into a pod the cache is about to hold. Violations are not judged here: a
 * pod already in the cluster holds its GPUs whatever it breaks. */
void policy_apply_defaults(void *ctx, cJSON *pod);
/* The cache_config.prepares_pods hook (ctx = the policy), under the read
 * lock: would policy_apply_defaults write anything into some pod? */
bool policy_writes_defaults(void *ctx);

/* Quota verdict for a pod on a node under the read lock: NULL when allowed,
 * else the reason (malloc'd) and, when why is not NULL, the rule that
 * refused. self is the pod's own entry (its charge is not counted against it). */
char *policy_check_quota(const struct admission_policy *p, const struct cluster_cache *c, const struct pod_info *pod,
                         const struct pod_entry *self, const struct node_state *n, enum quota_refusal *why);
/* Whether quota can refuse a pod of namespace ns on any node (the quota
 * ConfigMap names ns); when not, policy_check_quota allows it everywhere
 * and a caller judging many nodes may skip it. Under the read lock. */
bool policy_quota_binds(const struct admission_policy *p, const char *ns);
/* GPU quota the pod's namespace has left on node n (its model, its pool),
 * in cores (100 = one GPU), the pod's own charge (self) not counted: 0 when
 * the quota does not let the namespace use n at all, -1 when no quota names
 * the namespace. Under the read lock. For explain's hints. */
int64_t policy_quota_left(const struct admission_policy *p, const struct cluster_cache *c, const struct pod_info *pod,
                          const struct pod_entry *self, const struct node_state *n);
/* The same with several pods' charges not counted (preemption victims). */
char *policy_check_quota_excluding(const struct admission_policy *p, const struct cluster_cache *c,
                                   const struct pod_info *pod, const struct pod_entry *const *excluded,
                                   size_t nexcluded, const struct node_state *n);

#endif
