/* placement.c - evaluate a pod over nodes; filter-mode decisions. See placement.h. */
#include "extender/placement.h"
#include "admission/policy.h"
#include "lib/log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int placement_init(struct placement *p, struct cluster_cache *cache, const struct placement_config *cfg)
{
    memset(p, 0, sizeof(*p));
    p->cache = cache;
    p->cfg = *cfg;
    return pthread_mutex_init(&p->decide_lock, NULL) == 0 ? 0 : -1;
}

void placement_set_sink(struct placement *p, const struct decision_sink *sink)
{
    pthread_mutex_lock(&p->decide_lock);
    p->sink = sink;
    pthread_mutex_unlock(&p->decide_lock);
}

void placement_require_leader(struct placement *p, const atomic_int *is_leader)
{
    p->may_decide = is_leader;
}

static const char not_leader[] = "this replica is not the leader: it takes no decisions (the Service should route "
                                 "to the leader, which is the one that reports ready)";

static bool leading(const struct placement *p)
{
    return !p->may_decide || atomic_load(p->may_decide);
}

void placement_destroy(struct placement *p)
{
    pthread_mutex_destroy(&p->decide_lock);
}

void evaluation_free(struct evaluation *ev)
{
    free(ev->verdicts);
    free(ev->gpus);
    free(ev->error);
    strbuf_free(&ev->text);
    memset(ev, 0, sizeof(*ev));
}

static int evaluation_start(struct evaluation *ev, const struct pod_info *pod, const char *const *names, size_t n)
{
    memset(ev, 0, sizeof(*ev));
    strbuf_init(&ev->text);
    ev->chosen = -1;
    ev->count = n;
    ev->ncontainers = pod->ncontainers;
    ev->verdicts = calloc(n ? n : 1, sizeof(*ev->verdicts));
    if (!ev->verdicts)
        return -1;
    for (size_t i = 0; i < n; i++)
        ev->verdicts[i].name = names[i];
    return 0;
}

static void set_reason(struct evaluation *ev, struct verdict *v, const char *reason, size_t len)
{
    v->reason_off = ev->text.len;
    v->reason_len = len;
    strbuf_append(&ev->text, reason, len);
    strbuf_putc(&ev->text, '\0');
}

/* Many nodes often share one reason ("pod assigned to node X"); they point
 * at one copy of it. */
static void share_reason(struct verdict *v, const struct verdict *from)
{
    v->reason_off = from->reason_off;
    v->reason_len = from->reason_len;
}

static int push_gpus(struct evaluation *ev, int value)
{
    if (ev->gpus_len == ev->gpus_cap) {
        size_t cap = ev->gpus_cap ? ev->gpus_cap * 2 : 256;
        int *g = realloc(ev->gpus, cap * sizeof(*g));
        if (!g)
            return -1;
        ev->gpus = g;
        ev->gpus_cap = cap;
    }
    ev->gpus[ev->gpus_len++] = value;
    return 0;
}

/* Per container: the GPU count, then the device minors of the chosen slots. */
static int record_gpus(struct evaluation *ev, struct verdict *v, const struct node_state *n, const uint64_t *masks)
{
    v->gpus_off = ev->gpus_len;
    for (int i = 0; i < ev->ncontainers; i++) {
        if (push_gpus(ev, __builtin_popcountll(masks[i])) != 0)
            return -1;
        for (int s = 0; s < n->gpu_count; s++)
            if ((masks[i] >> s & 1) && push_gpus(ev, n->gpus[s].minor) != 0)
                return -1;
    }
    return 0;
}

/* A verdict's class and details (why the pod does not fit there). */
static void set_why(struct verdict *v, enum reason_class why, int container, int gpu, int64_t short_by)
{
    v->why = (uint8_t)why;
    v->why_container = (int8_t)(container >= 0 && container < 128 ? container : -1);
    v->why_gpu = (int8_t)(gpu >= 0 && gpu < 128 ? gpu : -1);
    v->short_by = short_by;
}

static enum reason_class quota_class(enum quota_refusal r)
{
    return r == QUOTA_NOT_IN_POOL ? REASON_QUOTA_POOL
           : r == QUOTA_NO_MODEL  ? REASON_QUOTA_MODEL
                                  : REASON_QUOTA_EXHAUSTED;
}

static void fail_all(struct evaluation *ev, const char *reason, bool unresolvable)
{
    for (size_t i = 0; i < ev->count; i++) {
        struct verdict *v = &ev->verdicts[i];
        v->unresolvable = unresolvable;
        set_why(v, REASON_POD_INVALID, -1, -1, 0);
        if (i == 0)
            set_reason(ev, v, reason, strlen(reason));
        else
            share_reason(v, &ev->verdicts[0]);
    }
}

/* Pods the extender has nothing to say about pass every node unchanged. */
static void pass_all(struct evaluation *ev)
{
    for (size_t i = 0; i < ev->count; i++) {
        ev->verdicts[i].fits = true;
        ev->verdicts[i].known = true;
    }
}

static const char unknown_node_reason[] = "node is not in the extender's cache (not yet seen, or deleted)";

#define LOOKUP_CHUNK 32

/* Resolve a chunk of names to nodes in stages (hash and fetch slots, fetch
 * keys and values, compare, fetch what fitting reads) so the cache misses
 * of 32 nodes overlap; one node at a time they add up to most of a large
 * request's time. */
static void lookup_chunk(const struct cluster_cache *c, const struct verdict *v, size_t n,
                         const struct node_state **out)
{
    uint64_t hash[LOOKUP_CHUNK];
    size_t len[LOOKUP_CHUNK];
    for (size_t i = 0; i < n; i++) {
        len[i] = strlen(v[i].name);
        hash[i] = dict_hash(v[i].name, len[i]);
        dict_prefetch_slot(&c->nodes, hash[i]);
    }
    for (size_t i = 0; i < n; i++)
        dict_prefetch_entry(&c->nodes, hash[i]);
    for (size_t i = 0; i < n; i++)
        out[i] = dict_get_hashed(&c->nodes, v[i].name, len[i], hash[i]);
    /* Every line of each node's GPU table (56 bytes a GPU) and its spec:
     * fitting reads all of them, and 32 nodes' worth fit in L1. */
    for (size_t i = 0; i < n; i++) {
        const struct node_state *node = out[i];
        if (!node || !node->gpus)
            continue;
        const char *g = (const char *)node->gpus;
        size_t bytes = (size_t)node->gpu_count * sizeof(*node->gpus);
        for (size_t off = 0; off < bytes; off += 64)
            __builtin_prefetch(g + off);
        __builtin_prefetch(node->spec);
    }
}

/* One node's verdict: unknown, fits (with its GPUs) or not (with the reason). */
static int judge(struct placement *p, const struct pod_info *pod, const struct pod_entry *self,
                 const struct node_state *n, struct evaluation *ev, struct verdict *v, struct fit_result *fit,
                 ssize_t *unknown_first)
{
    if (!n || !n->present) {
        set_why(v, REASON_NODE_UNKNOWN, -1, -1, 0);
        if (*unknown_first < 0) {
            *unknown_first = v - ev->verdicts;
            set_reason(ev, v, unknown_node_reason, sizeof(unknown_node_reason) - 1);
        } else {
            share_reason(v, &ev->verdicts[*unknown_first]);
        }
        return 0;
    }
    v->known = true;
    char *quota = NULL;
    enum quota_refusal refusal = QUOTA_ALLOWED;
    if (allocator_fit(n, pod, self, &p->cfg.policy, fit) &&
        !(quota = p->policy ? policy_check_quota(p->policy, p->cache, pod, self, n, &refusal) : NULL)) {
        v->fits = true;
        v->score = fit->score;
        v->set_score = fit->set_score;
        v->set_best = fit->set_best;
        return record_gpus(ev, v, n, fit->masks);
    }
    if (quota) {
        set_why(v, quota_class(refusal), -1, -1, 0);
        set_reason(ev, v, quota, strlen(quota));
        free(quota);
    } else {
        v->unresolvable = fit->unresolvable;
        set_why(v, fit->why, fit->why_container, fit->why_gpu, fit->short_by);
        set_reason(ev, v, fit->reason, strlen(fit->reason));
    }
    return 0;
}

/* Evaluate every node under the read lock: one consistent snapshot. */
static int evaluate_locked(struct placement *p, const struct pod_info *pod, struct evaluation *ev)
{
    struct cluster_cache *c = p->cache;
    int rc = 0;
    uint64_t masks_store[16];
    uint64_t *masks = pod->ncontainers <= 16 ? masks_store : calloc((size_t)pod->ncontainers, sizeof(*masks));
    struct fit_result fit = {.masks = masks};
    ssize_t unknown_first = -1;
    const struct node_state *nodes[LOOKUP_CHUNK];
    if (!masks)
        return -1;
    const struct pod_entry *self = cache_find_pod(c, pod->key);
    for (size_t base = 0; base < ev->count && rc == 0; base += LOOKUP_CHUNK) {
        size_t n = ev->count - base < LOOKUP_CHUNK ? ev->count - base : LOOKUP_CHUNK;
        lookup_chunk(c, ev->verdicts + base, n, nodes);
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = judge(p, pod, self, nodes[i], ev, &ev->verdicts[base + i], &fit, &unknown_first);
    }
    if (masks != masks_store)
        free(masks);
    return rc || strbuf_failed(&ev->text) ? -1 : 0;
}

/* Returns 1 when the pod needs no evaluation (answered), 0 to evaluate, -1 on error. */
static int precheck(struct placement *p, const struct pod_info *pod, struct evaluation *ev)
{
    if (pod->request_error) {
        fail_all(ev, pod->request_error, true);
        return strbuf_failed(&ev->text) ? -1 : 1;
    }
    if (!pod->uses_gpu) {
        pass_all(ev);
        return 1;
    }
    if (p->cfg.policy.gpu == POLICY_SPREAD && pod_has_vcuda_share(pod)) {
        ev->error = strdup("--gpu-policy spread is refused for tencent.com/vcuda-core shares: GPU-Manager re-checks "
                           "shared placements in its binpack order and would fail the pod with \"Nvidia node "
                           "mismatch\"; run with --gpu-policy binpack");
        return ev->error ? 1 : -1;
    }
    return 0;
}

int placement_evaluate(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                       struct evaluation *ev)
{
    if (evaluation_start(ev, pod, names, n) != 0)
        return -1;
    int pre = precheck(p, pod, ev);
    if (pre != 0)
        return pre < 0 ? -1 : 0;
    cache_expire(p->cache, clock_realtime_ns());
    cache_read_lock(p->cache);
    int rc = evaluate_locked(p, pod, ev);
    cache_unlock(p->cache);
    return rc;
}

static bool better_verdict(const struct verdict *a, const struct verdict *b)
{
    if (a->fits != b->fits)
        return a->fits;
    if (a->score != b->score)
        return a->score > b->score;
    return strcmp(a->name, b->name) < 0;
}

static ssize_t best_fitting(const struct evaluation *ev)
{
    ssize_t best = -1;
    for (size_t i = 0; i < ev->count; i++)
        if (ev->verdicts[i].fits && (best < 0 || better_verdict(&ev->verdicts[i], &ev->verdicts[best])))
            best = (ssize_t)i;
    return best;
}

/* A live assumption on a node the scheduler still offers is answered again
 * as it was: kube-scheduler may call filter more than once for one pod. */
static ssize_t live_assumption(struct placement *p, const struct pod_info *pod, const struct evaluation *ev)
{
    ssize_t found = -1;
    cache_read_lock(p->cache);
    const struct pod_entry *e = cache_find_pod(p->cache, pod->key);
    if (e && e->node && !e->bound) {
        for (size_t i = 0; i < ev->count && found < 0; i++)
            if (ev->verdicts[i].fits && strcmp(ev->verdicts[i].name, e->node->name) == 0)
                found = (ssize_t)i;
    }
    cache_unlock(p->cache);
    return found;
}

/* Turn the evaluation's GPU list of verdict v into per-container minor arrays. */
static void decision_indices(const struct evaluation *ev, const struct verdict *v, int **idx, int *count)
{
    const int *g = ev->gpus + v->gpus_off;
    for (int i = 0; i < ev->ncontainers; i++) {
        count[i] = *g++;
        idx[i] = count[i] ? (int *)g : NULL;
        g += count[i];
    }
}

/* What an assumption replaced in the cache, to put back when the decision
 * cannot be recorded. Only our own entry is undone: when a watch event has
 * replaced it meanwhile (the pod was bound or deleted), that is newer than
 * anything we know and stays. */
struct undo {
    struct pod_info *previous; /* the cache's entry before the assumption, or NULL: none */
    uint64_t applied_at;       /* the assumption's cache generation */
};

/* Under the write lock, just before the assumption is applied. */
static int undo_prepare(struct placement *p, const char *key, struct undo *u)
{
    const struct pod_entry *e = cache_find_pod(p->cache, key);
    u->previous = e ? pod_info_clone(e->info) : NULL;
    u->applied_at = 0;
    return e && !u->previous ? -1 : 0;
}

/* Under the write lock, just after: remember which entry is ours. */
static void undo_mark(struct placement *p, const char *key, struct undo *u)
{
    const struct pod_entry *e = cache_find_pod(p->cache, key);
    u->applied_at = e ? e->applied_at : 0;
}

static void undo_assumption(struct placement *p, const char *key, struct undo *u)
{
    cache_write_lock(p->cache);
    const struct pod_entry *e = cache_find_pod(p->cache, key);
    if (e && u->applied_at && e->applied_at == u->applied_at) {
        if (u->previous) {
            if (cache_apply_pod_locked(p->cache, u->previous, clock_realtime_ns()) != 0)
                log_error("pod %s: could not undo an unrecorded assumption (out of memory)", key);
            u->previous = NULL;
        } else {
            cache_delete_pod_locked(p->cache, key);
        }
    }
    cache_unlock(p->cache);
    pod_info_free(u->previous);
    u->previous = NULL;
}

static void undo_forget(struct undo *u)
{
    pod_info_free(u->previous);
    u->previous = NULL;
}

/* Record the decision for verdict `chosen` under the write lock, after
 * fitting the pod again: the watch may have changed the node since the
 * snapshot, and the GPUs recorded are the ones this final check chose.
 * Returns 0, 1 when it no longer fits (reason set), -1 on error. */
static int commit(struct placement *p, const struct pod_info *pod, struct evaluation *ev, struct verdict *chosen,
                  struct pod_info **decided_out, struct undo *u)
{
    size_t n = (size_t)(ev->ncontainers ? ev->ncontainers : 1);
    int **idx = calloc(n, sizeof(*idx));
    int *count = calloc(n, sizeof(*count));
    uint64_t *masks = calloc(n, sizeof(*masks));
    struct fit_result fit = {.masks = masks};
    int rc = -1;
    char *quota = NULL;
    if (!idx || !count || !masks)
        goto out;
    cache_write_lock(p->cache);
    const struct node_state *node = cache_find_node(p->cache, chosen->name);
    const struct pod_entry *self = cache_find_pod(p->cache, pod->key);
    enum quota_refusal refusal = QUOTA_ALLOWED;
    if (!node || !node->present) {
        set_why(chosen, REASON_NODE_UNKNOWN, -1, -1, 0);
        set_reason(ev, chosen, unknown_node_reason, sizeof(unknown_node_reason) - 1);
        chosen->fits = false;
        rc = 1;
    } else if (!allocator_fit(node, pod, self, &p->cfg.policy, &fit)) {
        set_why(chosen, fit.why, fit.why_container, fit.why_gpu, fit.short_by);
        set_reason(ev, chosen, fit.reason, strlen(fit.reason));
        chosen->fits = false;
        rc = 1;
    } else if (p->policy && (quota = policy_check_quota(p->policy, p->cache, pod, self, node, &refusal))) {
        set_why(chosen, quota_class(refusal), -1, -1, 0);
        set_reason(ev, chosen, quota, strlen(quota));
        chosen->fits = false;
        rc = 1;
    } else if (record_gpus(ev, chosen, node, masks) == 0) {
        decision_indices(ev, chosen, idx, count);
        struct pod_info *assumed = pod_info_with_decision(pod, chosen->name, clock_realtime_ns(), idx, count);
        *decided_out = assumed ? pod_info_clone(assumed) : NULL;
        rc = *decided_out && undo_prepare(p, pod->key, u) == 0
                 ? cache_apply_pod_locked(p->cache, assumed, clock_realtime_ns())
                 : (pod_info_free(assumed), -1);
        if (rc == 0)
            undo_mark(p, pod->key, u);
    }
    cache_unlock(p->cache);
out:
    free(quota);
    free(idx);
    free(count);
    free(masks);
    return rc;
}

static void assign_others(struct evaluation *ev)
{
    const struct verdict *chosen = &ev->verdicts[ev->chosen];
    ssize_t first = -1;
    for (size_t i = 0; i < ev->count; i++) {
        struct verdict *v = &ev->verdicts[i];
        if (!v->fits || (ssize_t)i == ev->chosen)
            continue;
        v->fits = false;
        set_why(v, REASON_ASSIGNED_ELSEWHERE, -1, -1, 0);
        if (first >= 0) {
            share_reason(v, &ev->verdicts[first]);
            continue;
        }
        first = (ssize_t)i;
        struct strbuf msg;
        strbuf_init(&msg);
        strbuf_printf(&msg, "pod assigned to node %s", chosen->name);
        set_reason(ev, v, msg.data ? msg.data : "", msg.len);
        strbuf_free(&msg);
    }
}

/* Live mode: the API server must hold the decision before the scheduler
 * hears about it. On failure the node is failed with the reason and the
 * caller tries the next best. */
static int record(struct placement *p, const struct pod_info *pod, struct evaluation *ev, struct verdict *v,
                  struct pod_info *decided, struct undo *u)
{
    char *err = NULL;
    int rc = p->sink ? p->sink->record(p->sink->ctx, decided, &err) : 0;
    if (rc != 0) {
        struct strbuf msg;
        strbuf_init(&msg);
        strbuf_printf(&msg, "recording the decision on the pod failed: %s", err ? err : "unknown error");
        set_reason(ev, v, msg.data ? msg.data : "recording the decision failed", msg.len);
        set_why(v, REASON_RECORD_FAILED, -1, -1, 0);
        v->fits = false;
        strbuf_free(&msg);
        log_warn("pod %s on node %s: %s", pod->key, v->name, err ? err : "recording failed");
        undo_assumption(p, pod->key, u);
    } else {
        undo_forget(u);
    }
    free(err);
    return rc;
}

static int decide(struct placement *p, const struct pod_info *pod, struct evaluation *ev)
{
    ev->chosen = live_assumption(p, pod, ev);
    while (ev->chosen < 0) {
        ssize_t best = best_fitting(ev);
        if (best < 0)
            return 0;
        struct pod_info *decided = NULL;
        struct undo u = {0};
        int rc = commit(p, pod, ev, &ev->verdicts[best], &decided, &u);
        if (rc < 0) {
            undo_forget(&u);
            pod_info_free(decided);
            return -1;
        }
        if (rc == 0 && record(p, pod, ev, &ev->verdicts[best], decided, &u) == 0) {
            ev->chosen = best;
            ev->decided = true;
            log_info("pod %s assigned to node %s", pod->key, ev->verdicts[best].name);
        }
        pod_info_free(decided);
    }
    assign_others(ev);
    return strbuf_failed(&ev->text) ? -1 : 0;
}

int placement_filter(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                     struct evaluation *ev)
{
    if (!leading(p)) {
        if (evaluation_start(ev, pod, names, n) != 0)
            return -1;
        ev->error = strdup(not_leader);
        return ev->error ? 0 : -1;
    }
    if (p->cfg.mode == PLACEMENT_BIND)
        return placement_evaluate(p, pod, names, n, ev);
    if (evaluation_start(ev, pod, names, n) != 0)
        return -1;
    int pre = precheck(p, pod, ev);
    if (pre != 0)
        return pre < 0 ? -1 : 0;
    /* One decision at a time: evaluation and commit of two pods never
     * interleave, so they cannot both take the last free GPU. */
    pthread_mutex_lock(&p->decide_lock);
    cache_expire(p->cache, clock_realtime_ns());
    cache_read_lock(p->cache);
    int rc = evaluate_locked(p, pod, ev);
    cache_unlock(p->cache);
    /* Leadership may have been lost while waiting for the lock. */
    if (rc == 0 && !leading(p) && !(ev->error = strdup(not_leader)))
        rc = -1;
    if (rc == 0 && !ev->error)
        rc = decide(p, pod, ev);
    pthread_mutex_unlock(&p->decide_lock);
    return rc;
}

int verdict_priority(const struct verdict *v)
{
    if (!v->fits)
        return 0;
    return (v->score * 10 + FIT_SCORE_MAX / 2) / FIT_SCORE_MAX;
}

static const struct evaluation *rank_ev;

static int compare_rank(const void *a, const void *b)
{
    const struct verdict *va = &rank_ev->verdicts[*(const size_t *)a];
    const struct verdict *vb = &rank_ev->verdicts[*(const size_t *)b];
    if (better_verdict(va, vb))
        return -1;
    return better_verdict(vb, va) ? 1 : 0;
}

void evaluation_rank(const struct evaluation *ev, size_t *order)
{
    static pthread_mutex_t rank_lock = PTHREAD_MUTEX_INITIALIZER;
    for (size_t i = 0; i < ev->count; i++)
        order[i] = i;
    /* qsort has no context argument in C11; the lock keeps the static safe. */
    pthread_mutex_lock(&rank_lock);
    rank_ev = ev;
    qsort(order, ev->count, sizeof(*order), compare_rank);
    pthread_mutex_unlock(&rank_lock);
}

char **placement_all_node_names(struct placement *p, size_t *count)
{
    cache_read_lock(p->cache);
    size_t n = 0, pos = 0;
    char **names = calloc(dict_size(&p->cache->nodes) + 1, sizeof(*names));
    struct dict_entry *de;
    while (names && (de = dict_next(&p->cache->nodes, &pos))) {
        const struct node_state *node = de->value;
        if (!node->present)
            continue;
        if (!(names[n] = strdup(node->name))) {
            free_names(names, n);
            names = NULL;
            break;
        }
        n++;
    }
    cache_unlock(p->cache);
    *count = names ? n : 0;
    return names;
}

void free_names(char **names, size_t count)
{
    for (size_t i = 0; names && i < count; i++)
        free(names[i]);
    free(names);
}

/* ---- bind ----------------------------------------------------------------- */

/* Container i's chosen slots as device minors (idx[i] has room for every GPU). */
static int masks_to_minors(const struct node_state *n, int ncontainers, const uint64_t *masks, int **idx, int *count)
{
    for (int i = 0; i < ncontainers; i++) {
        if (!(idx[i] = calloc((size_t)n->gpu_count + 1, sizeof(int))))
            return -1;
        for (int s = 0; s < n->gpu_count; s++)
            if (masks[i] >> s & 1)
                idx[i][count[i]++] = n->gpus[s].minor;
    }
    return 0;
}

/* Fit and assume `pod` on `node` under the write lock; the decided pod
 * (with its annotations' facts) is returned for recording. */
static struct pod_info *assume_on(struct placement *p, const struct pod_info *pod, const char *node, struct undo *u,
                                  char **err)
{
    size_t nc = (size_t)(pod->ncontainers ? pod->ncontainers : 1);
    uint64_t *masks = calloc(nc, sizeof(*masks));
    int **idx = calloc(nc, sizeof(*idx));
    int *count = calloc(nc, sizeof(*count));
    struct pod_info *decided = NULL;
    char *quota = NULL;
    if (!masks || !idx || !count) {
        *err = strdup("out of memory");
        goto out;
    }
    struct fit_result fit = {.masks = masks};
    cache_write_lock(p->cache);
    const struct node_state *n = cache_find_node(p->cache, node);
    const struct pod_entry *self = cache_find_pod(p->cache, pod->key);
    if (!n || !n->present) {
        *err = strbuf_format("node %s is not in the extender's cache", node);
    } else if (!allocator_fit(n, pod, self, &p->cfg.policy, &fit)) {
        *err = strbuf_format("node %s cannot take pod %s: %s", node, pod->key, fit.reason);
    } else if (p->policy && (quota = policy_check_quota(p->policy, p->cache, pod, self, n, NULL))) {
        *err = strbuf_format("node %s cannot take pod %s: %s", node, pod->key, quota);
    } else if (masks_to_minors(n, pod->ncontainers, masks, idx, count) != 0 ||
               !(decided = pod_info_with_decision(pod, node, clock_realtime_ns(), idx, count))) {
        *err = strdup("out of memory");
    } else {
        struct pod_info *copy = pod_info_clone(decided);
        int rc = -1;
        if (copy && undo_prepare(p, pod->key, u) == 0)
            rc = cache_apply_pod_locked(p->cache, copy, clock_realtime_ns()); /* takes copy, also on failure */
        else
            pod_info_free(copy);
        if (rc == 0) {
            undo_mark(p, pod->key, u);
        } else {
            pod_info_free(decided);
            decided = NULL;
            *err = strdup("out of memory");
        }
    }
    cache_unlock(p->cache);
out:
    free(quota);
    for (int i = 0; idx && i < pod->ncontainers; i++)
        free(idx[i]);
    free(idx);
    free(count);
    free(masks);
    return decided;
}

/* The pod as the cache knows it, and whether it is already assumed on node. */
static struct pod_info *pod_for_bind(struct placement *p, const char *key, const char *node, bool *assumed_here)
{
    cache_read_lock(p->cache);
    const struct pod_entry *e = cache_find_pod(p->cache, key);
    struct pod_info *pod = e ? pod_info_clone(e->info) : NULL;
    *assumed_here = e && e->node && !e->bound && strcmp(e->node->name, node) == 0;
    cache_unlock(p->cache);
    return pod;
}

static int mark_bound(struct placement *p, const struct pod_info *pod, const char *node)
{
    struct pod_info *bound = pod_info_clone(pod);
    if (!bound)
        return -1;
    free(bound->node_name);
    bound->node_name = strdup(node);
    if (!bound->node_name) {
        pod_info_free(bound);
        return -1;
    }
    return cache_apply_pod(p->cache, bound, clock_realtime_ns());
}

/* Annotations first, Binding second (GPU-Manager reads a pod once it is
 * bound); when the Binding fails the annotations written here come off. */
static int record_and_bind(struct placement *p, const struct pod_info *pod, const struct pod_info *decided,
                           const char *node, char **err)
{
    char *why = NULL;
    int rc = -1;
    if (decided && p->sink && p->sink->record(p->sink->ctx, decided, &why) != 0) {
        *err = strbuf_format("recording the decision on pod %s failed: %s", pod->key, why ? why : "unknown error");
    } else if (p->sink && p->sink->bind(p->sink->ctx, decided ? decided : pod, node, &why) != 0) {
        *err = strbuf_format("binding pod %s to %s failed: %s", pod->key, node, why ? why : "unknown error");
        free(why);
        why = NULL;
        if (decided && p->sink->clear(p->sink->ctx, pod, &why) != 0)
            log_error("pod %s: could not remove the decision annotations: %s", pod->key, why ? why : "unknown error");
    } else {
        rc = mark_bound(p, decided ? decided : pod, node);
        if (rc != 0)
            *err = strdup("out of memory");
    }
    free(why);
    return rc;
}

static int bind_locked(struct placement *p, const char *ns, const char *name, const char *key, const char *uid,
                       const char *node, char **err)
{
    bool assumed_here = false;
    struct pod_info *pod = pod_for_bind(p, key, node, &assumed_here);
    if (!pod && p->sink && p->sink->fetch) {
        char *why = NULL;
        pod = p->sink->fetch(p->sink->ctx, ns, name, &why);
        if (!pod)
            *err = strbuf_format("pod %s: %s", key, why ? why : "cannot be read");
        free(why);
        if (!pod)
            return -1;
    }
    if (!pod) {
        *err = strbuf_format("pod %s is not in the extender's cache", key);
        return -1;
    }
    int rc = -1;
    struct pod_info *decided = NULL;
    struct undo u = {0};
    if (uid && *uid && pod->uid && strcmp(uid, pod->uid) != 0) {
        *err = strbuf_format("pod %s has UID %s, the binding names %s", key, pod->uid, uid);
    } else if (pod->node_name) {
        /* Binding twice to the same node is not an error; elsewhere it is. */
        rc = strcmp(pod->node_name, node) == 0 ? 0 : -1;
        if (rc != 0)
            *err = strbuf_format("pod %s is already bound to %s", key, pod->node_name);
    } else if (assumed_here || (decided = assume_on(p, pod, node, &u, err))) {
        rc = record_and_bind(p, pod, decided, node, err);
        if (rc != 0 && decided)
            undo_assumption(p, pod->key, &u);
    }
    undo_forget(&u);
    pod_info_free(decided);
    pod_info_free(pod);
    return rc;
}

int placement_bind(struct placement *p, const char *ns, const char *name, const char *uid, const char *node, char **err)
{
    *err = NULL;
    char *key = strbuf_format("%s/%s", ns && *ns ? ns : "default", name);
    if (!key) {
        *err = strdup("out of memory");
        return -1;
    }
    pthread_mutex_lock(&p->decide_lock);
    cache_expire(p->cache, clock_realtime_ns());
    if (!leading(p)) {
        pthread_mutex_unlock(&p->decide_lock);
        free(key);
        *err = strdup(not_leader);
        return -1;
    }
    int rc = bind_locked(p, ns && *ns ? ns : "default", name, key, uid, node, err);
    pthread_mutex_unlock(&p->decide_lock);
    if (rc == 0)
        log_info("pod %s bound to node %s", key, node);
    else
        log_warn("bind %s to %s: %s", key, node, *err ? *err : "failed");
    free(key);
    return rc;
}

/* ---- preemption ----------------------------------------------------------- */

static const struct pod_entry *victim_on(const struct node_state *n, const char *uid)
{
    for (const struct pod_entry *e = n->charged; e; e = e->node_next)
        if (e->info->uid && strcmp(e->info->uid, uid) == 0)
            return e;
    return NULL;
}

/* Would the pod fit, GPUs and quota, with these pods' charges gone? */
static bool fits_without(const struct placement *p, const struct node_state *n, const struct pod_info *pod,
                         const struct pod_entry **out, size_t nout, uint64_t *masks)
{
    struct fit_result fit = {.masks = masks};
    if (!allocator_fit_excluding(n, pod, out, nout, &p->cfg.policy, &fit))
        return false;
    char *quota = p->policy ? policy_check_quota_excluding(p->policy, p->cache, pod, out, nout, n) : NULL;
    free(quota);
    return quota == NULL;
}

/* Victims are tried for sparing from the last one kube-scheduler listed. */
static void preempt_node(struct placement *p, const struct pod_info *pod, const struct pod_entry *self,
                         struct preempt_node *pn, uint64_t *masks, const struct pod_entry **out)
{
    const struct node_state *n = cache_find_node(p->cache, pn->node);
    pn->keep = false;
    if (!n || !n->present)
        return;
    size_t nout = 0;
    out[nout++] = self;
    for (size_t i = 0; i < pn->nvictims; i++) {
        const struct pod_entry *v = victim_on(n, pn->victims[i]);
        pn->keep_victim[i] = true;
        if (v)
            out[nout++] = v;
    }
    if (fits_without(p, n, pod, out, 1, masks)) {
        pn->keep = pn->nvictims > 0; /* GPU is not what blocks the pod here */
        return;
    }
    if (!fits_without(p, n, pod, out, nout, masks))
        return;
    pn->keep = true;
    for (size_t i = pn->nvictims; i-- > 0;) {
        const struct pod_entry *v = victim_on(n, pn->victims[i]);
        size_t at = 0;
        while (v && at < nout && out[at] != v)
            at++;
        if (!v || at == nout)
            continue;
        out[at] = out[--nout];
        if (fits_without(p, n, pod, out, nout, masks))
            pn->keep_victim[i] = false;
        else
            out[nout++] = v;
    }
}

int placement_preempt(struct placement *p, const struct pod_info *pod, struct preempt_node *nodes, size_t n)
{
    size_t most = 1;
    for (size_t i = 0; i < n; i++)
        most = nodes[i].nvictims + 1 > most ? nodes[i].nvictims + 1 : most;
    uint64_t *masks = calloc((size_t)(pod->ncontainers ? pod->ncontainers : 1), sizeof(*masks));
    const struct pod_entry **out = calloc(most, sizeof(*out));
    if (!masks || !out) {
        free(masks);
        free(out);
        return -1;
    }
    cache_expire(p->cache, clock_realtime_ns());
    cache_read_lock(p->cache);
    const struct pod_entry *self = cache_find_pod(p->cache, pod->key);
    for (size_t i = 0; i < n; i++)
        preempt_node(p, pod, self, &nodes[i], masks, out);
    cache_unlock(p->cache);
    free(masks);
    free(out);
    return 0;
}
