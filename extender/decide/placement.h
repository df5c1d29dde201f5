/*
 * placement.h - answering for a pod over a list of nodes; decisions.
 *
 * Owns the request-level logic of design.md section 4: evaluate every node the
 * scheduler offers (allocator_fit on each, under one cache snapshot), and in
 * `filter` placement mode pick the best node, record the decision (node,
 * per-container GPU minors, time) as the pod's assumption, and fail every
 * other feasible node with "pod assigned to node X"; in `bind` mode, decide
 * in bind. A re-filter of a pod whose own assumption (same UID) is still
 * live answers the same node and writes nothing.
 *
 * How a decision runs (filter in filter mode, bind):
 *   1. the pod's key enters the in-flight set (inflight.h); a second request
 *      for the same pod meanwhile is answered "in progress; retry";
 *   2. the pod is looked up by UID: the cache's copy, else the API server's
 *      (podlookup.h), which is fed to the cache; that copy decides whether
 *      the pod may be decided (exists, unbound) and gives the write its
 *      resourceVersion precondition, and its GPU request is what is decided
 *      (the request's copy only names the pod: docs/security.md);
 *   3. every node is evaluated under the cache's read lock;
 *   4. under the write lock the pod is fitted again on the chosen node and
 *      the GPUs are reserved (cache_reserve_pod_locked): of two pods racing
 *      for the last GPU only the first re-fit succeeds;
 *   5. every lock is released, then the decision is written (filter mode:
 *      a PATCH; bind mode: one Binding carrying the annotations, or for a
 *      HAMi pod the PATCH then the Binding); a failed write cancels
 *      exactly that reservation;
 *   6. the key leaves the in-flight set.
 * Decisions for different pods run in parallel.
 *
 * Lock order and what is never held across I/O: the in-flight set's mutex
 * and the cache's rwlock are never held together and never across network
 * I/O; each is held only for in-memory work. Across the writes a decision
 * holds its key in the in-flight set (not a lock) and its reservation in
 * the cache. The recorder's client-pool mutex (recorder.c) is a leaf, held
 * only to take or give back a client. Health, readiness, metrics and
 * /inspect take at most the cache's read lock, so they never wait on the
 * API server.
 */
#ifndef GQA_PLACEMENT_H
#define GQA_PLACEMENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cluster/cache.h"
#include "extender/decide/allocator.h"
#include "extender/decide/hamibusy.h"
#include "extender/decide/inflight.h"
#include "extender/decide/sink.h"
#include "lib/strbuf.h"

struct admission_policy;

enum placement_mode { PLACEMENT_FILTER = 0, PLACEMENT_BIND };

/* The most --filter-best may keep. */
#define PLACEMENT_FILTER_BEST_MAX 1000

struct placement_config {
    enum placement_mode mode;
    struct alloc_policy policy;
    /* Bind placement: a filter answers at most this many feasible nodes, the
     * best by score (then name); the others are left out of the answer, in
     * neither failed map (docs/behaviour.md). 0: every feasible node. */
    int filter_best;
};

/* The node list of the last evaluation, resolved: kube-scheduler sends the
 * same NodeNames for pod after pod, and resolving 5000 names costs three
 * cache misses each. Valid while the cache's nodes_epoch is unchanged (no
 * node_state created or freed). Its mutex is a leaf, taken under the
 * cache's read lock for a copy in or out, never across anything else. */
/* names[0..n) as the caller holds them: bytes[0..len) is the names back
 * to back, each with its NUL, names[i] pointing into it. A nonzero serial
 * is the caller's promise that names[i + 1] begins right after names[i]'s
 * NUL, and that a block with the same serial holds the same names at the
 * same places (namelist.h gives each parsed NodeNames array one); 0
 * promises nothing. */
struct name_block {
    const char *bytes;
    size_t len;
    uint64_t serial;
};

struct name_memo {
    pthread_mutex_t lock;
    uint64_t serial; /* the block's serial, or 0 */
    char *names;     /* the names back to back, each with its NUL */
    size_t names_len;
    size_t *offsets; /* where each name starts in names */
    const struct node_state **nodes;
    size_t count;
    uint64_t epoch;
};

struct placement {
    struct cluster_cache *cache;
    struct placement_config cfg;
    struct inflight inflight;         /* pods with a decision in progress */
    struct hamibusy hami_busy;        /* nodes with a HAMi bind of ours in progress */
    const struct decision_sink *sink; /* NULL offline; set before serving, cleared after */
    const atomic_int *may_decide;     /* with leader election: 1 only while leading; NULL = always */
    /* With leader election: does the cache hold the cluster as of when the
     * Lease was taken (live.c)? NULL: always. Called on request threads. */
    bool (*caught_up)(void *ctx);
    void *caught_up_ctx;
    const struct decision_key *key;        /* live mode: signs decisions (cluster/proof.h); NULL offline */
    const struct admission_policy *policy; /* quota per node; NULL = none */
    /* HAMi's ResourceQuotas (admission/hamiquota.h), guarded by the cache's
     * lock; NULL: not checked (offline, or --hami-resource-quota off). */
    const struct hami_quota_set *hami_quota;
    struct name_memo memo;
};

/* Live mode: where decisions go, and the leadership flag that gates them. */
void placement_set_sink(struct placement *p, const struct decision_sink *sink);
/* caught_up (may be NULL): decisions also wait until it says true, which
 * live.c does once a new leader's cache holds the cluster's pods as of when
 * it took the Lease (docs/behaviour.md, "Decisions: proof, holding and
 * hand-over"). It must be cheap and thread-safe. */
void placement_require_leader(struct placement *p, const atomic_int *is_leader, bool (*caught_up)(void *ctx),
                              void *ctx);
/* Live mode, before serving: the key that signs every decision. */
void placement_set_decision_key(struct placement *p, const struct decision_key *key);

/* One node's verdict. Thousands are walked several times per request
 * (judged, answered, counted), so it is kept to 48 bytes: offsets and
 * lengths are 32-bit (placement fails a request whose reasons or GPUs
 * would pass 4 GiB) and topology scores saturate at INT32_MAX. */
struct verdict {
    const char *name; /* the caller's string; must outlive the evaluation */
    /* How much is missing: cores, memory units or GPUs (the class says which; fit_result.short_by). */
    int64_t short_by;
    int32_t set_score;   /* topology score of the whole-GPU sets chosen (0 for shares) */
    int32_t set_best;    /* the best those sets could score on this node's shape */
    uint32_t reason_off; /* into evaluation.text; reason_len 0 = no reason */
    uint32_t reason_len;
    uint32_t gpus_off; /* into evaluation.gpus: per container, count then minors */
    int16_t score;     /* 0..FIT_SCORE_MAX */
    bool known;        /* the node is in the cache */
    bool fits;
    /* Fits, but left out of a filter answer (placement_config.filter_best):
     * then fits is false and the node is in no failed map either. */
    bool left_out;
    bool unresolvable;
    /* Why it does not fit, as a class (allocator.h), with the container and
     * GPU slot concerned (-1: none). */
    uint8_t why;
    int8_t why_container;
    int8_t why_gpu;
};

struct evaluation {
    size_t count;
    struct verdict *verdicts;
    size_t fitting; /* how many verdicts fit (kept by every writer) */
    int ncontainers;
    struct strbuf text; /* reasons, back to back */
    int *gpus;          /* minors of fitting nodes, see verdict.gpus_off (NULL: skip_gpus) */
    size_t gpus_len, gpus_cap;
    ssize_t chosen; /* filter mode: index of the node answered, else -1 */
    bool decided;   /* filter mode: a new decision was recorded */
    char *error;    /* a request-level problem (the Error field), or NULL */
    /* No GPU lists are recorded (gpus stays NULL): the caller's answer
     * names none (prioritize, and filter in bind mode); writing them was a
     * tenth of such a request. */
    bool skip_gpus;
    /* The caller's names as a block (placement_*_block), else all zero:
     * for the memo's comparison. */
    struct name_block names_block;
};

int placement_init(struct placement *p, struct cluster_cache *cache, const struct placement_config *cfg);
void placement_destroy(struct placement *p);
void evaluation_free(struct evaluation *ev);

/* Filter: evaluate names[0..n) for pod. In filter mode a decision is taken
 * and recorded (see above); in bind mode nothing is recorded, and no GPU
 * lists either (ev->skip_gpus: the answer names none). A problem with
 * the request as a whole (not the leader, a decision for the pod already in
 * progress, the pod unknown to the API server or already bound, the write
 * failed) is ev->error, the kube-scheduler error form.
 * Returns 0, or -1 on allocation failure. */
int placement_filter(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                     struct evaluation *ev);
/* Prioritize / explain: evaluate without recording anything. */
int placement_evaluate(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                       struct evaluation *ev);
/* The same two, told that names[i] are the consecutive strings of a block
 * (wire.c collects them so): a list kube-scheduler repeats is then
 * recognised with one memcmp, or by its serial alone. These serve the
 * verbs: placement_evaluate_block (prioritize) records no GPU lists
 * either (ev->skip_gpus); explain uses placement_evaluate, which does. */
int placement_filter_block(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                           const struct name_block *block, struct evaluation *ev);
int placement_evaluate_block(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                             const struct name_block *block, struct evaluation *ev);

/* Bind (design.md section 4, bind mode): allocate the pod on node, record the
 * annotations, then create the Binding; a failure at any step leaves no
 * annotation and no charge behind. A pod whose own live assumption is
 * already on node (filter mode) is only bound. The pod is the cluster's
 * copy under uid (podlookup.h): the cache's, else the API server's.
 * Returns 0, or -1 with *err (the ExtenderBindingResult Error). */
int placement_bind(struct placement *p, const char *ns, const char *name, const char *uid, const char *node,
                   char **err);
/* The same, for a caller whose answer is wanted by until_ms (monotonic
 * ms, clock_monotonic_ms; 0: no such limit): a HAMi bind waits for a held
 * node lock no longer than that (hamibind.h). */
int placement_bind_until(struct placement *p, const char *ns, const char *name, const char *uid, const char *node,
                         int64_t until_ms, char **err);
/* How long a bind may take from its arrival, so that its answer reaches
 * kube-scheduler inside the extender's httpTimeout (3 s in the shipped
 * configurations), with room for the writes after the lock. */
#define PLACEMENT_BIND_BUDGET_MS 2500

/* Preemption: one node kube-scheduler proposes, with its victims by UID. */
struct preempt_node {
    const char *node;
    const char *const *victims; /* pod UIDs */
    size_t nvictims;
    /* answer */
    bool keep;         /* removing the victims frees enough GPU */
    bool *keep_victim; /* nvictims entries, set by placement_preempt */
};

/* Decide every proposed node: keep it, with all of its victims, only if
 * evicting them frees enough GPU (and quota) for pod. Victims are never
 * spared: kube-scheduler lists only those its own fit needs. */
int placement_preempt(struct placement *p, const struct pod_info *pod, struct preempt_node *nodes, size_t n);

/* Scheduler-facing score 0..10 of a verdict. */
int verdict_priority(const struct verdict *v);

static inline const char *verdict_reason(const struct evaluation *ev, const struct verdict *v)
{
    return v->reason_len ? ev->text.data + v->reason_off : "";
}

/* Order verdict indices best first (fits, score, name). order has ev->count entries. */
void evaluation_rank(const struct evaluation *ev, size_t *order);

/* A malloc'd array of strdup'd names of every node in the cache. */
char **placement_all_node_names(struct placement *p, size_t *count);
void free_names(char **names, size_t count);

#endif
