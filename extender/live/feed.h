/*
 * feed.h - the informers' sinks into the cluster cache.
 *
 * Owns how listed and watched objects become cache objects: Nodes become
 * node_specs, Pods are slimmed to what the extender reads and parsed with
 * the CustomResourceLimitation defaults (cache_pod_from_json), ConfigMaps are
 * kept whole; a relist replaces that kind (for ConfigMaps: that namespace,
 * or that one object) in one step. Kept out of kube/ so the API layer knows
 * nothing of the model, and out of cluster/ so the model knows nothing of
 * the API; ResourceQuotas feed HAMi's quota rule beside the cache. Every object it drops (unparsable, not a usable object of its
 * kind, not taken by the cache) is logged and counted in
 * gqa_objects_skipped_total{kind,reason}; none fails a relist.
 *
 * A feed is used from its informer's thread only; the cache locks itself.
 */
#ifndef GQA_FEED_H
#define GQA_FEED_H

#include "admission/hamiquota.h"
#include "cluster/cache.h"
#include "kube/informer.h"

enum feed_kind { FEED_NODES, FEED_PODS, FEED_CONFIGMAPS, FEED_RESOURCEQUOTAS };

struct feed;

/* A sink for one stream. ConfigMaps: the namespace a relist replaces and,
 * when name is not NULL, only that object. NULL on allocation failure. */
struct feed *feed_new(enum feed_kind kind, struct cluster_cache *cache, const char *cm_namespace, const char *cm_name);
/* ResourceQuotas become HAMi's limits in quotas (admission/hamiquota.h),
 * changed under the cache's write lock, which guards them. Quotas that
 * limit neither gpumem nor gpucores are dropped quietly; scoped ones with
 * a log line; malformed ones are logged and counted as skipped. */
struct feed *feed_new_resourcequotas(struct cluster_cache *cache, struct hami_quota_set *quotas);
/* The sink to give informer_new; valid while the feed lives. */
const struct informer_sink *feed_sink(const struct feed *f);
/* Free after the informer that uses it. NULL is a no-op. */
void feed_free(struct feed *f);

#endif
