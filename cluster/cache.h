/*
 * cache.h - the cluster cache and its per-GPU occupancy index.
 *
 * Owns the extender's picture of the cluster: nodes, pods and ConfigMaps,
 * added, updated and deleted one object at a time (the offline state file and
 * the API watch feed the same functions), and for every node the occupancy of
 * each GPU, kept up to date on every change so that a request never rescans
 * pods.
 *
 * Occupancy (design.md section 4): a live pod is charged to a node when it is
 * bound there (spec.nodeName) or assumed there (decision annotation node and a
 * decision time younger than the assume TTL, the hold ceiling, and, with a
 * decision key, a proof made with that key: cluster/proof.h). With index annotations that
 * match the node's GPUs the charge lands on those GPUs; otherwise it is
 * "unattributed" and counted against the node as a whole. Each pod remembers
 * the charge it applied, so an update or delete subtracts exactly that.
 *
 * Concurrency: one reader-writer lock, writer-preferring. Requests evaluate
 * under the read lock (a consistent snapshot); writers hold the write lock
 * only to swap in an already parsed object and adjust the counters, so
 * neither side waits long. Objects are parsed before the lock is taken.
 * The lock is never held across network I/O; decisions take it only after
 * entering their pod in the in-flight set and never the other way round
 * (the lock order is in extender/decide/placement.h).
 */
#ifndef GQA_CACHE_H
#define GQA_CACHE_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/hami_occupancy.h"
#include "cluster/nodefit.h"
#include "cluster/nodespec.h"
#include "cluster/occupancy.h"
#include "cluster/podspec.h"
#include "cluster/proof.h"
#include "lib/clock.h"
#include "lib/dict.h"

struct cluster_cache;

struct cache_config {
    /* The longest an unbound decision holds its GPUs (--assume-ttl, the
     * ceiling of docs/behaviour.md "Decisions: proof, holding and
     * hand-over"): binding, deletion or a new decision end it sooner. */
    int64_t assume_ttl_ns;
    /* Set (cache_set_decision_key) before the first pod is applied, read
     * only afterwards: an unbound decision holds GPUs only when its
     * gpu-admission.io/proof is this key's (cluster/proof.h). NULL: every
     * decision does (offline: the state file is the operator's). */
    const struct decision_key *decision_key;
    /* Called under the write lock after ConfigMaps changed, so state derived
     * from them (CRLs, quota) changes atomically with them. May be NULL. */
    void (*configmaps_changed)(void *ctx, struct cluster_cache *c);
    /* Called under the read lock before a pod object is parsed for the
     * cache: writes the CustomResourceLimitation defaults into it, so a
     * share relying on a default memory is charged that memory. May be NULL. */
    void (*prepare_pod)(void *ctx, cJSON *pod);
    /* Called under the read lock: would prepare_pod change a pod now?
     * While it would not, pods may be read straight from their text
     * (podtext.h), without the cJSON object the hook edits. NULL: it
     * would, whenever prepare_pod is set. */
    bool (*prepares_pods)(void *ctx);
    void *ctx;
};

struct cluster_cache {
    pthread_rwlock_t lock;
    struct cache_config cfg;
    struct dict nodes;      /* name -> struct node_state */
    struct dict pods;       /* namespace/name -> struct pod_entry */
    struct dict configmaps; /* namespace/name -> cJSON (the whole object) */
    struct dict usage;      /* "namespace\x1fmodel" -> cores charged (intptr_t), for quota */
    int present_nodes;
    int assumed_pods;
    struct pod_entry *assumed;  /* pods whose charge is an assumption (expires) */
    int64_t next_expiry_ns;     /* earliest assumed-charge expiry, INT64_MAX if none */
    uint64_t generation;        /* bumped by every change */
    uint64_t nodes_epoch;       /* bumped whenever a node_state is created or freed (resolved names stay valid) */
    int64_t unproven_window_ns; /* rate limit of the "unproven decision" log lines */
    int unproven_said, unproven_quiet;
};

int cache_init(struct cluster_cache *c, const struct cache_config *cfg);
/* The key that proves this service's decisions (see cache_config); before
 * any pod is applied (live mode, before the informers start). */
void cache_set_decision_key(struct cluster_cache *c, const struct decision_key *key);
void cache_destroy(struct cluster_cache *c);

void cache_read_lock(struct cluster_cache *c);
void cache_write_lock(struct cluster_cache *c);
void cache_unlock(struct cluster_cache *c);

/* Writers: each takes the write lock itself and takes ownership of the
 * object it is given (also on failure). 0, or -1 on allocation failure. */
int cache_apply_node(struct cluster_cache *c, struct node_spec *spec);
int cache_delete_node(struct cluster_cache *c, const char *name);
int cache_apply_pod(struct cluster_cache *c, struct pod_info *pod, int64_t now_ns);
/* The same for a caller that already holds the write lock (decisions). */
int cache_apply_pod_locked(struct cluster_cache *c, struct pod_info *pod, int64_t now_ns);
void cache_delete_pod_locked(struct cluster_cache *c, const char *key);
int cache_delete_pod(struct cluster_cache *c, const char *key);
int cache_apply_configmap(struct cluster_cache *c, cJSON *configmap);
int cache_delete_configmap(struct cluster_cache *c, const char *ns, const char *name);
/* Convenience for loaders: parse and apply a Node, Pod or ConfigMap object by
 * its kind. Returns 1 when applied, 0 when the kind is not one the cache keeps,
 * -1 with *err set when the object is unusable. */
int cache_apply_object(struct cluster_cache *c, cJSON *obj, int64_t now_ns, char **err);
/* Parse a pod object for the cache: the prepare_pod hook (CRL defaults)
 * first, then pod_info_from_json. The object may be modified. */
struct pod_info *cache_pod_from_json(struct cluster_cache *c, cJSON *pod, char **err);
/* Whether pods must now be read as cJSON objects for the prepare_pod hook
 * (cache_pod_from_json) rather than straight from their text. Takes the
 * read lock. */
bool cache_prepares_pods(struct cluster_cache *c);

/* Relist: make the cache hold exactly these objects of one kind, in one
 * write-locked step, so readers never see a half-replaced set and no object
 * is counted twice or kept after it disappeared. Ownership of every element
 * passes to the cache (the arrays themselves stay the caller's).
 * Configmaps are replaced within namespace ns only, and, when name is not
 * NULL, only that one object. Returns how many items were skipped (a
 * ConfigMap without metadata.name, an object the cache ran out of memory
 * for): one bad item never fails the relist of the others. -1 when the
 * relist could not be done at all (memory ran out for its own bookkeeping);
 * the cache then holds what it held before. */
int cache_replace_nodes(struct cluster_cache *c, struct node_spec **specs, size_t n);
int cache_replace_pods(struct cluster_cache *c, struct pod_info **pods, size_t n, int64_t now_ns);
int cache_replace_configmaps(struct cluster_cache *c, const char *ns, const char *name, cJSON **cms, size_t n);

/* Reservations: a decision taken in the cache before it is written to the
 * API server (placement.c writes it with no lock held). The decided pod is
 * applied under the write lock like any other and remembered with a token.
 * From then on, an apply of the same pod that does not know of the decision
 * (same UID, unbound, no decision annotations: a watch event or relist that
 * was under way before the write, or a lagging ADDED) keeps the reserved
 * decision, so the GPUs stay taken while the write is in flight and until
 * the watch delivers it; anything else (the written decision itself, the pod
 * bound, a new UID, a deletion) ends the reservation. The decision's own
 * time still ends its charge after the assume TTL.
 * cache_reserve_pod_locked takes decided (also on failure) and returns the
 * token, or 0 when memory ran out (the entry is as it was then). */
uint64_t cache_reserve_pod_locked(struct cluster_cache *c, struct pod_info *decided, int64_t now_ns);
/* The write failed (takes the write lock): the entry goes back to exactly
 * what it would hold without the reservation (the pod as last applied by
 * anyone else, or no entry). A token that no longer matches (the
 * reservation ended meanwhile) changes nothing. */
void cache_cancel_reservation(struct cluster_cache *c, const char *key, uint64_t token);
/* This service is taking the pod's decision off (takes the write lock): the
 * update that shows it gone ends the hold, which otherwise outlives an
 * update that drops or alters a proven decision without a proof of its own
 * (docs/security.md, "Who can influence a decision"). */
void cache_release_hold(struct cluster_cache *c, const char *key);
/* The write got no answer (takes the write lock): the reservation stays,
 * marked unconfirmed, until the watch shows the write, the pod is decided
 * again, or the ceiling. A token that no longer matches changes nothing. */
void cache_reservation_unconfirmed(struct cluster_cache *c, const char *key, uint64_t token);

/* Drop assumed charges older than the TTL. Cheap when none is due. */
void cache_expire(struct cluster_cache *c, int64_t now_ns);

/* Readers: call under cache_read_lock (or the write lock). */
struct node_state *cache_find_node(const struct cluster_cache *c, const char *name);
struct pod_entry *cache_find_pod(const struct cluster_cache *c, const char *key);
/* Cores (100 = one GPU) charged to namespace ns on nodes of GPU model. */
int64_t cache_usage(const struct cluster_cache *c, const char *ns, const char *model);
/* Cores a pod's containers ask for in all. */
int64_t pod_total_cores(const struct pod_info *pod);
/* The cores quota counts for the pod on node n (on a HAMi node its vGPUs
 * count as hami_quota_cores says; elsewhere pod_total_cores). */
int64_t pod_quota_cores(const struct pod_info *pod, const struct node_state *n);

/* The quota line the pod's instances may count against on node n besides
 * the node's model (a family's quota_line: MIG's "<model>-MIG-<profile>"),
 * written to buf, with *units (100 an instance): true when every such
 * container of the pod names the same line, else false. */
bool pod_instance_line(const struct pod_info *pod, const struct node_state *n, char *buf, size_t size, int64_t *units);

#endif
