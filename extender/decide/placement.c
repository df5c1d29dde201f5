/* placement.c - evaluate a pod over nodes; filter-mode decisions. See placement.h. */
#include "extender/decide/placement.h"
#include "admission/hamiquota.h"
#include "admission/policy.h"
#include "cluster/hami_decision.h"
#include "extender/decide/hami_fit.h"
#include "extender/decide/hamibind.h"
#include "extender/decide/metrics.h"
#include "extender/decide/podlookup.h"
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/log.h"

#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int placement_init(struct placement *p, struct cluster_cache *cache, const struct placement_config *cfg)
{
    memset(p, 0, sizeof(*p));
    p->cache = cache;
    p->cfg = *cfg;
    if (pthread_mutex_init(&p->memo.lock, NULL) != 0)
        return -1;
    if (inflight_init(&p->inflight) != 0) {
        pthread_mutex_destroy(&p->memo.lock);
        return -1;
    }
    if (hamibusy_init(&p->hami_busy) != 0) {
        inflight_destroy(&p->inflight);
        pthread_mutex_destroy(&p->memo.lock);
        return -1;
    }
    return 0;
}

void placement_set_sink(struct placement *p, const struct decision_sink *sink)
{
    p->sink = sink;
}

void placement_require_leader(struct placement *p, const atomic_int *is_leader, bool (*caught_up)(void *ctx), void *ctx)
{
    p->may_decide = is_leader;
    p->caught_up = caught_up;
    p->caught_up_ctx = ctx;
}

void placement_set_decision_key(struct placement *p, const struct decision_key *key)
{
    p->key = key;
}

static const char not_leader[] =
    "this replica is not the leader: it takes no decisions (the extender Service should select only the pod "
    "labelled gpu-admission.io/leader=true; retry)";

static const char catching_up[] =
    "this replica has just become the leader and is catching up with the API server's pods (its cache must hold "
    "every decision its predecessor wrote before it decides); retry";

static bool leading(const struct placement *p)
{
    return !p->may_decide || atomic_load(p->may_decide);
}

/* Leading, and the cache has caught up with the cluster as of the Lease. */
static bool current(const struct placement *p)
{
    return !p->caught_up || p->caught_up(p->caught_up_ctx);
}

/* Why this replica may not decide now, or NULL. */
static const char *not_deciding(const struct placement *p)
{
    return !leading(p) ? not_leader : !current(p) ? catching_up : NULL;
}

void placement_destroy(struct placement *p)
{
    inflight_destroy(&p->inflight);
    hamibusy_destroy(&p->hami_busy);
    pthread_mutex_destroy(&p->memo.lock);
    free(p->memo.names);
    free(p->memo.offsets);
    free(p->memo.nodes);
}

void evaluation_free(struct evaluation *ev)
{
    free(ev->verdicts);
    free(ev->gpus);
    free(ev->error);
    strbuf_free(&ev->text);
    memset(ev, 0, sizeof(*ev));
}

static int evaluation_start(struct evaluation *ev, const struct pod_info *pod, const char *const *names, size_t n,
                            const struct name_block *block)
{
    memset(ev, 0, sizeof(*ev));
    if (block)
        ev->names_block = *block;
    strbuf_init(&ev->text);
    ev->chosen = -1;
    ev->count = n;
    ev->ncontainers = pod->ncontainers;
    /* One pass over the verdicts (5,000 of them are 400 kB): each is
     * written whole here, not zeroed by calloc and then named. */
    ev->verdicts = n <= SIZE_MAX / sizeof(*ev->verdicts) ? malloc((n ? n : 1) * sizeof(*ev->verdicts)) : NULL;
    if (!ev->verdicts)
        return -1;
    for (size_t i = 0; i < n; i++)
        ev->verdicts[i] = (struct verdict){.name = names[i]};
    return 0;
}

static void set_reason(struct evaluation *ev, struct verdict *v, const char *reason, size_t len)
{
    if (ev->text.len >= UINT32_MAX || len >= UINT32_MAX - ev->text.len) {
        strbuf_fail(&ev->text); /* past a verdict's 32-bit offsets: the request fails as out of memory */
        return;
    }
    v->reason_off = (uint32_t)ev->text.len;
    v->reason_len = (uint32_t)len;
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

/* Room for `more` entries in ev->gpus. */
static int reserve_gpus(struct evaluation *ev, size_t more)
{
    if (ev->gpus_cap - ev->gpus_len >= more)
        return 0;
    if (more > SIZE_MAX - ev->gpus_len)
        return -1;
    int *g = grow_array(ev->gpus, &ev->gpus_cap, ev->gpus_len + more, sizeof(*g), 256);
    if (!g)
        return -1;
    ev->gpus = g;
    return 0;
}

/* Per container: the GPU count, then the device minors of the chosen slots
 * (masks hold the node's slots only, at most 64 each). */
static int record_gpus(struct evaluation *ev, struct verdict *v, const struct node_state *n, const uint64_t *masks)
{
    size_t most = (size_t)ev->ncontainers * 65;
    if (ev->gpus_len > UINT32_MAX - most || reserve_gpus(ev, most) != 0)
        return -1;
    v->gpus_off = (uint32_t)ev->gpus_len;
    int *w = ev->gpus + ev->gpus_len;
    for (int i = 0; i < ev->ncontainers; i++) {
        int *count = w++;
        *count = 0;
        for (uint64_t m = masks[i]; m; m &= m - 1) {
            int s = __builtin_ctzll(m);
            *w++ = n->fit.usable ? n->fit.minor[s] : n->gpus[s].minor;
            ++*count;
        }
    }
    ev->gpus_len = (size_t)(w - ev->gpus);
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
    ev->fitting = ev->count;
}

/* A fitting verdict that no longer fits. */
static void unfit(struct evaluation *ev, struct verdict *v)
{
    if (v->fits) {
        v->fits = false;
        ev->fitting--;
    }
}

static int32_t saturate_i32(int64_t v)
{
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

static const char unknown_node_reason[] = "node is not in the extender's cache (not yet seen, or deleted)";

#define LOOKUP_CHUNK 32

/* What fitting reads of each node, fetched ahead. A shared request on a
 * node with a usable summary line (cluster/nodefit.h, the first line of
 * node_state) is decided on that line (line_enough); otherwise every line
 * of the GPU table (56 bytes a GPU) and the spec: fitting reads all of
 * them, and 32 nodes' worth fit in L1. */
static void prefetch_nodes(const struct node_state *const *nodes, size_t n, bool line_enough)
{
    for (size_t i = 0; i < n; i++)
        if (nodes[i])
            __builtin_prefetch(nodes[i]);
    for (size_t i = 0; i < n; i++) {
        const struct node_state *node = nodes[i];
        if (!node || (line_enough && node->fit.usable) || !node->gpus)
            continue;
        const char *g = (const char *)node->gpus;
        size_t bytes = (size_t)node->gpu_count * sizeof(*node->gpus);
        for (size_t off = 0; off < bytes; off += 64)
            __builtin_prefetch(g + off);
        __builtin_prefetch(node->spec);
    }
}

/* Name i's length: where the next name begins, when the names are a
 * parsed list's (a serial promises them back to back, in order), else
 * strlen. */
static size_t name_length(const struct evaluation *ev, size_t i)
{
    if (ev->names_block.serial && i + 1 < ev->count)
        return (size_t)(ev->verdicts[i + 1].name - ev->verdicts[i].name) - 1;
    return strlen(ev->verdicts[i].name);
}

/* Resolve a chunk of names to nodes in stages (dict_get_many, then what
 * fitting reads is fetched) so the cache misses of 32 nodes overlap; one
 * node at a time they add up to most of a large request's time. */
static void lookup_chunk(const struct cluster_cache *c, const struct evaluation *ev, size_t base, size_t n,
                         bool line_enough, const struct node_state **out)
{
    const char *names[LOOKUP_CHUNK];
    size_t len[LOOKUP_CHUNK];
    for (size_t i = 0; i < n; i++) {
        names[i] = ev->verdicts[base + i].name;
        len[i] = name_length(ev, base + i);
    }
    void *found[LOOKUP_CHUNK];
    dict_get_many(&c->nodes, names, len, found, n);
    for (size_t i = 0; i < n; i++)
        out[i] = found[i];
    prefetch_nodes(out, n, line_enough);
}

/* The memo's nodes into out when the evaluation's names are the memo's,
 * in order, and no node was created or freed since. Under the read lock. */
static bool memo_lookup(struct name_memo *m, uint64_t epoch, const struct evaluation *ev, const struct node_state **out)
{
    pthread_mutex_lock(&m->lock);
    const struct name_block *b = &ev->names_block;
    bool hit = m->names && m->epoch == epoch && m->count == ev->count;
    if (hit && b->serial && b->serial == m->serial) {
        /* The very list resolved last time (the caller's promise). */
    } else if (hit && b->bytes && b->len == m->names_len) {
        /* The whole list at once; then each name must be where the memo's is. */
        hit = memcmp(b->bytes, m->names, m->names_len) == 0;
        for (size_t i = 0; hit && i < ev->count; i++)
            hit = ev->verdicts[i].name == b->bytes + m->offsets[i];
    } else {
        const char *q = m->names, *end = hit ? m->names + m->names_len : NULL;
        for (size_t i = 0; hit && i < ev->count; i++) {
            size_t len = strlen(ev->verdicts[i].name) + 1;
            hit = (size_t)(end - q) >= len && memcmp(q, ev->verdicts[i].name, len) == 0;
            q += len;
        }
    }
    if (hit)
        memcpy(out, m->nodes, ev->count * sizeof(*out));
    pthread_mutex_unlock(&m->lock);
    return hit;
}

/* Remember this evaluation's resolved names (under the read lock). Out of
 * memory: the memo just stays as it was. */
static void memo_store(struct name_memo *m, uint64_t epoch, const struct evaluation *ev,
                       const struct node_state *const *nodes)
{
    const struct name_block *b = &ev->names_block;
    bool whole = b->serial && b->bytes; /* the names are the block, back to back (name_block) */
    size_t total = 0;
    if (whole)
        total = b->len;
    else
        for (size_t i = 0; i < ev->count; i++)
            total += strlen(ev->verdicts[i].name) + 1;
    char *names = malloc(total ? total : 1);
    size_t *offsets = malloc((ev->count ? ev->count : 1) * sizeof(*offsets));
    const struct node_state **copy = malloc((ev->count ? ev->count : 1) * sizeof(*copy));
    if (!names || !offsets || !copy) {
        free(names);
        free(offsets);
        free(copy);
        return;
    }
    if (whole) {
        memcpy(names, b->bytes, total);
        for (size_t i = 0; i < ev->count; i++)
            offsets[i] = (size_t)(ev->verdicts[i].name - b->bytes);
    } else {
        char *w = names;
        for (size_t i = 0; i < ev->count; i++) {
            size_t len = strlen(ev->verdicts[i].name) + 1;
            offsets[i] = (size_t)(w - names);
            memcpy(w, ev->verdicts[i].name, len);
            w += len;
        }
    }
    memcpy(copy, nodes, ev->count * sizeof(*copy));
    pthread_mutex_lock(&m->lock);
    char *old_names = m->names;
    size_t *old_offsets = m->offsets;
    const struct node_state **old_nodes = m->nodes;
    m->names = names;
    m->names_len = total;
    m->offsets = offsets;
    m->nodes = copy;
    m->count = ev->count;
    m->epoch = epoch;
    m->serial = ev->names_block.serial;
    pthread_mutex_unlock(&m->lock);
    free(old_names);
    free(old_offsets);
    free(old_nodes);
}

/* The cache's entry of this very pod (same UID), whose own charge is not
 * counted against it; an entry of another pod under the same name (deleted
 * and created again) is not its own. Under the cache lock. */
static const struct pod_entry *own_entry(const struct cluster_cache *c, const struct pod_info *pod)
{
    const struct pod_entry *e = cache_find_pod(c, pod->key);
    return e && pod_same_uid(e->info, pod->uid) ? e : NULL;
}

/* A refusal's reason: the same text as the last refusal's (the common case
 * over thousands of nodes) points at that copy, so it is stored, and
 * escaped into the answer, once (wire.c). A text the allocator marks as
 * its memo's (fit_result.reason_memo) is known to be the same without
 * comparing. */
static void set_or_share_reason(struct evaluation *ev, struct verdict *v, const struct fit_result *fit, ssize_t *last,
                                const void **last_memo)
{
    const char *reason = fit->reason;
    size_t len = fit->reason_len;
    assert(strlen(reason) == len); /* fit_result.reason_len is kept by every writer */
    const struct verdict *prev = *last >= 0 ? &ev->verdicts[*last] : NULL;
    if (prev && fit->reason_memo && fit->reason_memo == *last_memo) {
        share_reason(v, prev);
        return;
    }
    if (prev && prev->reason_len == len && memcmp(ev->text.data + prev->reason_off, reason, len) == 0) {
        share_reason(v, prev);
    } else {
        set_reason(ev, v, reason, len);
        if (strbuf_failed(&ev->text))
            return;
    }
    *last = v - ev->verdicts;
    *last_memo = fit->reason_memo;
}

/* What judging one node after another shares. */
struct judging {
    struct placement *p;
    const struct pod_info *pod;
    const struct pod_entry *self;
    const struct admission_policy *quota; /* NULL: no quota rule names the pod's namespace */
    bool hami_quota;                      /* a HAMi ResourceQuota names the pod's namespace */
    struct hami_quota_use hami_used;      /* ...and what the namespace holds (one snapshot) */
    struct evaluation *ev;
    struct fit_result fit;
    ssize_t unknown_first, last_refusal; /* verdicts whose reason the next may share */
    const void *last_memo;               /* last_refusal's fit_result.reason_memo */
};

/* Would a HAMi pod's bind to n wait at HAMi's node lock: another pod holds
 * it (as the watch last showed it; an unreadable one is never taken over),
 * or a HAMi bind of ours is on its way there (hamibusy.h)? Such a node
 * scores lowest, so that kube-scheduler's binpack moves on to the next
 * node instead of queueing every pod behind one lock (docs/hami.md). */
static bool hami_busy(struct placement *p, const struct pod_info *pod, const struct node_state *n)
{
    if (!pod->hami || !n->spec || !n->spec->hami || !hami_pod_on(pod, n))
        return false;
    const char *lock = n->spec->hami->lock_value;
    if (lock) {
        enum hami_lock_state st =
            hami_lock_check(lock, clock_realtime_ns(), hami_get_config()->lock_timeout_ns, pod->ns, pod->name);
        if (st == HAMI_LOCK_HELD || st == HAMI_LOCK_UNREADABLE)
            return true;
    }
    return hamibusy_has(&p->hami_busy, n->name);
}

/* Does HAMi's ResourceQuota let the pod have the vGPUs the fit chose on n
 * (hami_masks), with `used` already held by its namespace? true, or false
 * with the reason in reason. Under the cache's lock. */
static bool hami_quota_allows(const struct placement *p, const struct pod_info *pod, const struct node_state *n,
                              const uint64_t *hami_masks, const struct hami_quota_use *used, char *reason, size_t size)
{
    struct hami_quota_use asked;
    hami_quota_asked(pod, n, hami_masks, &asked);
    return hami_quota_check(p->hami_quota, pod->ns, hami_get_config()->memory_factor, used, &asked, reason, size);
}

/* Should the HAMi ResourceQuota rule judge this pod at all? */
static bool hami_quota_applies(const struct placement *p, const struct pod_info *pod)
{
    return p->hami_quota && pod->hami && hami_quota_binds(p->hami_quota, pod->ns);
}

/* One node's verdict: unknown, fits (with its GPUs) or not (with the reason). */
static int judge(struct judging *j, const struct node_state *n, struct verdict *v)
{
    struct evaluation *ev = j->ev;
    if (!n || !(n->fit.usable || n->present)) { /* a usable line means present: one line read, not two */
        set_why(v, REASON_NODE_UNKNOWN, -1, -1, 0);
        if (j->unknown_first < 0) {
            j->unknown_first = v - ev->verdicts;
            set_reason(ev, v, unknown_node_reason, sizeof(unknown_node_reason) - 1);
        } else {
            share_reason(v, &ev->verdicts[j->unknown_first]);
        }
        return 0;
    }
    v->known = true;
    struct fit_result *fit = &j->fit;
    char *quota = NULL;
    enum quota_refusal refusal = QUOTA_ALLOWED;
    if (allocator_fit(n, j->pod, j->self, &j->p->cfg.policy, fit) &&
        !(quota = j->quota ? policy_check_quota(j->quota, j->p->cache, j->pod, j->self, n, &refusal) : NULL)) {
        char hami_reason[512];
        if (j->hami_quota &&
            !hami_quota_allows(j->p, j->pod, n, fit->hami_masks, &j->hami_used, hami_reason, sizeof(hami_reason))) {
            set_why(v, REASON_HAMI_QUOTA, -1, -1, 0);
            set_reason(ev, v, hami_reason, strlen(hami_reason));
            return 0;
        }
        v->fits = true;
        ev->fitting++;
        v->score = (int16_t)(hami_busy(j->p, j->pod, n) ? 0 : fit->score); /* 0..FIT_SCORE_MAX */
        v->set_score = saturate_i32(fit->set_score);
        v->set_best = saturate_i32(fit->set_best);
        if (fit->reason_len > 0) /* a fitting node's note: where HAMi MIG instances go (explain) */
            set_reason(ev, v, fit->reason, fit->reason_len);
        return ev->skip_gpus ? 0 : record_gpus(ev, v, n, fit->masks);
    }
    if (quota) {
        set_why(v, quota_class(refusal), -1, -1, 0);
        set_reason(ev, v, quota, strlen(quota));
        free(quota);
    } else {
        v->unresolvable = fit->unresolvable;
        set_why(v, fit->why, fit->why_container, fit->why_gpu, fit->short_by);
        set_or_share_reason(ev, v, fit, &j->last_refusal, &j->last_memo);
    }
    return 0;
}

/* Evaluate every node under the read lock: one consistent snapshot. */
static int evaluate_locked(struct placement *p, const struct pod_info *pod, struct evaluation *ev)
{
    struct cluster_cache *c = p->cache;
    int rc = 0;
    uint64_t masks_store[16], hami_store[16];
    bool hami_quota = hami_quota_applies(p, pod), small = pod->ncontainers <= 16;
    uint64_t *masks = small ? masks_store : calloc((size_t)pod->ncontainers, sizeof(*masks));
    /* The HAMi devices chosen: what HAMi's quota counts. */
    uint64_t *hami_masks = !hami_quota ? NULL : small ? hami_store : calloc((size_t)pod->ncontainers, sizeof(*masks));
    const struct node_state *chunk[LOOKUP_CHUNK];
    if (!masks || (hami_quota && !hami_masks)) {
        if (masks != masks_store)
            free(masks);
        return -1;
    }
    struct judging j = {.p = p,
                        .pod = pod,
                        .self = own_entry(c, pod),
                        .quota = p->policy && policy_quota_binds(p->policy, pod->ns) ? p->policy : NULL,
                        .hami_quota = hami_quota,
                        .ev = ev,
                        .fit = {.masks = masks, .hami_masks = hami_masks},
                        .unknown_first = -1,
                        .last_refusal = -1};
    if (hami_quota)
        hami_quota_used(c, pod->ns, &j.self, 1, &j.hami_used);
    /* One shared container: nodes with a usable summary line decide on it
     * (allocator.h); whole GPUs read the tables where they fit. */
    bool line_enough = pod->ncontainers == 1 && !pod->hami && pod->containers[0].whole_gpus == 0;
    /* The names resolved by the memo, or here (and then remembered); one
     * chunk at a time when memory for the whole list ran out. */
    const struct node_state **all = malloc((ev->count ? ev->count : 1) * sizeof(*all));
    bool memo_hit = all && memo_lookup(&p->memo, c->nodes_epoch, ev, all);
    for (size_t base = 0; base < ev->count && rc == 0; base += LOOKUP_CHUNK) {
        size_t n = ev->count - base < LOOKUP_CHUNK ? ev->count - base : LOOKUP_CHUNK;
        const struct node_state **nodes = all ? all + base : chunk;
        if (memo_hit)
            prefetch_nodes(nodes, n, line_enough);
        else
            lookup_chunk(c, ev, base, n, line_enough, nodes);
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = judge(&j, nodes[i], &ev->verdicts[base + i]);
    }
    if (all && !memo_hit && rc == 0)
        memo_store(&p->memo, c->nodes_epoch, ev, all);
    free(all);
    if (masks != masks_store)
        free(masks);
    if (hami_masks != hami_store)
        free(hami_masks);
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
    /* Spread alone cannot get here (refused at start); a config made
     * without options (tests, embedders) is refused the same way. */
    if ((p->cfg.policy.refuse_vcuda_shares || p->cfg.policy.gpu == POLICY_SPREAD) && pod_has_binpack_only_share(pod)) {
        ev->error = strdup("tencent.com/vcuda-core shares are refused here (--vcuda-shares refuse, as --gpu-policy "
                           "spread needs: GPU-Manager re-checks shared placements in its binpack order and would "
                           "fail the pod with \"Nvidia node mismatch\")");
        return ev->error ? 1 : -1;
    }
    return 0;
}

static int evaluate(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                    const struct name_block *block, bool skip_gpus, struct evaluation *ev)
{
    if (evaluation_start(ev, pod, names, n, block) != 0)
        return -1;
    ev->skip_gpus = skip_gpus;
    int pre = precheck(p, pod, ev);
    if (pre != 0)
        return pre < 0 ? -1 : 0;
    cache_expire(p->cache, clock_realtime_ns());
    cache_read_lock(p->cache);
    int rc = evaluate_locked(p, pod, ev);
    cache_unlock(p->cache);
    return rc;
}

int placement_evaluate(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                       struct evaluation *ev)
{
    return evaluate(p, pod, names, n, NULL, false, ev);
}

int placement_evaluate_block(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                             const struct name_block *block, struct evaluation *ev)
{
    return evaluate(p, pod, names, n, block, true, ev);
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

/* Does a charged assumption still stand on its own GPUs? A decision that
 * landed after its write was reported failed (a client timeout) may have
 * been charged over GPUs given to another pod meanwhile: such an
 * assumption is fitted again, never honoured. Under the cache lock. */
static bool assumption_sound(const struct pod_entry *e)
{
    const struct node_state *n = e->node;
    for (int i = 0; i < e->nslots; i++) {
        const struct gpu_state *g = &n->gpus[e->slots[i].slot];
        if (g->core_used > 100)
            return false;
        for (int p = 0; p < GPU_MEMORY_POOLS; p++)
            if (g->mem_used[p] > g->mem_total[p])
                return false;
    }
    return true;
}

/* A live assumption on a node the scheduler still offers is answered again
 * as it was: kube-scheduler may call filter more than once for one pod.
 * Only this pod's own (same UID): a previous pod of the same name has no
 * say in this one's placement. */
static ssize_t live_assumption(struct placement *p, const struct pod_info *pod, const struct evaluation *ev)
{
    ssize_t found = -1;
    cache_read_lock(p->cache);
    const struct pod_entry *e = own_entry(p->cache, pod);
    /* An unconfirmed one (its write got no answer) is decided anew: the
     * pod must carry the annotations it is bound with. */
    if (e && e->node && !e->bound && !e->unconfirmed && assumption_sound(e)) {
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

/* Reserve the decided pod in the cache (under the write lock): the token
 * that cache_cancel_reservation takes back exactly, or 0 (out of memory). */
static uint64_t reserve(struct placement *p, const struct pod_info *decided)
{
    struct pod_info *copy = pod_info_clone(decided);
    return copy ? cache_reserve_pod_locked(p->cache, copy, clock_realtime_ns()) : 0;
}

/* The HAMi devices of the fit go with the decision (hamibind.h). 0 or -1. */
static int attach_hami(const struct node_state *n, struct pod_info *decided, const uint64_t *hami_masks)
{
    char *err = NULL;
    int rc = hamibind_attach(n, decided, hami_masks, &err);
    if (rc != 0)
        log_error("pod %s on %s: %s", decided->key, n->name, err ? err : "out of memory");
    free(err);
    return rc;
}

/* The decision's proof (cluster/proof.h), so that this service and its
 * successors know it for theirs; offline there is no key. 0 or -1. */
static int sign(const struct placement *p, struct pod_info *decided)
{
    return p->key ? decision_sign(p->key, decided) : 0;
}

/* How one decision on one node ended (decide_on). */
enum decide_outcome { DECIDED = 0, NODE_GONE, DOES_NOT_FIT, QUOTA_REFUSED, DECIDE_FAILED };

/* One decision on one node: what the caller gives (node, the fit's mask
 * arrays, how masks become per-container minors and where they go) and
 * what decide_on leaves (the fit's reason, the quota refusal, the decided
 * pod and its reservation token). */
struct decide_step {
    const char *node;
    struct fit_result fit; /* .masks and .hami_masks: the caller's, one per container */
    /* Turn the fit's chosen slots on n into idx/count (under the lock): 0 or -1. */
    int (*minors)(void *ctx, const struct node_state *n, const uint64_t *masks, int **idx, int *count);
    void *ctx;
    int **idx;
    int *count;
    char *quota; /* QUOTA_REFUSED: the reason (malloc'd, the caller frees) */
    enum quota_refusal refusal;
    bool hami_quota;          /* QUOTA_REFUSED by a HAMi ResourceQuota (else the quota ConfigMap) */
    struct pod_info *decided; /* DECIDED: the decided pod (the caller frees) */
    uint64_t token;           /* DECIDED: its reservation */
};

/* decide_on's HAMi ResourceQuota step, under the write lock: what the
 * namespace holds now counts every decision reserved before this one, so
 * of two pods racing for the quota's last room only the first passes. true
 * when it refuses, with s->quota the reason (NULL: out of memory). */
static bool hami_quota_refused(const struct placement *p, const struct pod_info *pod, const struct pod_entry *self,
                               const struct node_state *n, struct decide_step *s)
{
    if (!hami_quota_applies(p, pod))
        return false;
    struct hami_quota_use used;
    hami_quota_used(p->cache, pod->ns, &self, 1, &used);
    char reason[512];
    if (hami_quota_allows(p, pod, n, s->fit.hami_masks, &used, reason, sizeof(reason)))
        return false;
    s->quota = strdup(reason);
    s->refusal = QUOTA_EXHAUSTED;
    s->hami_quota = true;
    return true;
}

/* The one sequence of every decision (filter mode's commit, bind mode's
 * assume_on): under the write lock, fit the pod on the node again (the
 * watch and other decisions may have changed it since any snapshot; of two
 * pods racing for the last GPU only the first re-fit succeeds), check
 * quota, turn the chosen GPUs into minors, attach the HAMi devices, sign,
 * and reserve exactly what this final check chose. */
static enum decide_outcome decide_on(struct placement *p, const struct pod_info *pod, struct decide_step *s)
{
    enum decide_outcome out = DECIDED;
    cache_write_lock(p->cache);
    const struct node_state *n = cache_find_node(p->cache, s->node);
    const struct pod_entry *self = own_entry(p->cache, pod);
    if (!n || !n->present) {
        out = NODE_GONE;
    } else if (!allocator_fit(n, pod, self, &p->cfg.policy, &s->fit)) {
        out = DOES_NOT_FIT;
    } else if (p->policy && (s->quota = policy_check_quota(p->policy, p->cache, pod, self, n, &s->refusal))) {
        out = QUOTA_REFUSED;
    } else if (hami_quota_refused(p, pod, self, n, s)) {
        out = s->quota ? QUOTA_REFUSED : DECIDE_FAILED;
    } else if (s->minors(s->ctx, n, s->fit.masks, s->idx, s->count) != 0 ||
               !(s->decided = pod_info_with_decision(pod, s->node, clock_realtime_ns(), s->idx, s->count)) ||
               attach_hami(n, s->decided, s->fit.hami_masks) != 0 || sign(p, s->decided) != 0 ||
               !(s->token = reserve(p, s->decided))) {
        pod_info_free(s->decided);
        s->decided = NULL;
        out = DECIDE_FAILED;
    }
    cache_unlock(p->cache);
    return out;
}

/* decide_step.minors for filter mode: the minors go to the evaluation's
 * GPU list of the chosen verdict (where the answer reads them). */
struct verdict_minors {
    struct evaluation *ev;
    struct verdict *chosen;
};

static int verdict_minors(void *ctx, const struct node_state *n, const uint64_t *masks, int **idx, int *count)
{
    struct verdict_minors *vm = ctx;
    if (record_gpus(vm->ev, vm->chosen, n, masks) != 0)
        return -1;
    decision_indices(vm->ev, vm->chosen, idx, count);
    return 0;
}

/* Decide the pod on verdict `chosen` (decide_on). Returns 0 with
 * *decided_out and *token, 1 when it no longer fits (the verdict says why),
 * -1 on error. */
static int commit(struct placement *p, const struct pod_info *pod, struct evaluation *ev, struct verdict *chosen,
                  struct pod_info **decided_out, uint64_t *token)
{
    size_t n = (size_t)(ev->ncontainers ? ev->ncontainers : 1);
    int **idx = calloc(n, sizeof(*idx));
    int *count = calloc(n, sizeof(*count));
    uint64_t *masks = calloc(n, sizeof(*masks));
    uint64_t *hami_masks = calloc(n, sizeof(*hami_masks));
    struct verdict_minors vm = {ev, chosen};
    struct decide_step s = {.node = chosen->name,
                            .fit = {.masks = masks, .hami_masks = hami_masks},
                            .minors = verdict_minors,
                            .ctx = &vm,
                            .idx = idx,
                            .count = count,
                            .refusal = QUOTA_ALLOWED};
    int rc = -1;
    if (!idx || !count || !masks || !hami_masks)
        goto out;
    switch (decide_on(p, pod, &s)) {
    case DECIDED:
        *decided_out = s.decided;
        *token = s.token;
        rc = 0;
        break;
    case NODE_GONE:
        set_why(chosen, REASON_NODE_UNKNOWN, -1, -1, 0);
        set_reason(ev, chosen, unknown_node_reason, sizeof(unknown_node_reason) - 1);
        unfit(ev, chosen);
        rc = 1;
        break;
    case DOES_NOT_FIT:
        set_why(chosen, s.fit.why, s.fit.why_container, s.fit.why_gpu, s.fit.short_by);
        set_reason(ev, chosen, s.fit.reason, s.fit.reason_len);
        unfit(ev, chosen);
        rc = 1;
        break;
    case QUOTA_REFUSED:
        set_why(chosen, s.hami_quota ? REASON_HAMI_QUOTA : quota_class(s.refusal), -1, -1, 0);
        set_reason(ev, chosen, s.quota, strlen(s.quota));
        unfit(ev, chosen);
        rc = 1;
        break;
    case DECIDE_FAILED:
        break;
    }
out:
    free(s.quota);
    free(idx);
    free(count);
    free(masks);
    free(hami_masks);
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
        unfit(ev, v);
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

/* No answer to the write: it may land yet (issue 22, item 8). Taking the
 * reservation back would free GPUs a late write then gives the pod, so it
 * stays, marked unconfirmed: the watch ends it when the write shows (a
 * proven decision, charged as any), the pod's next attempt decides anew,
 * and the ceiling ends it when neither comes. */
static int maybe_written(struct placement *p, const struct pod_info *pod, struct evaluation *ev,
                         const struct pod_info *decided, uint64_t token, char *err)
{
    cache_reservation_unconfirmed(p->cache, pod->key, token);
    log_warn("pod %s on node %s: the decision's write got no answer (%s); its GPUs stay held in case it lands",
             pod->key, decided->decision.node, err ? err : "unknown error");
    ev->error = strbuf_format("recording the decision for pod %s (node %s) got no answer from the API server: %s; "
                              "the decision may still land and its GPUs stay held; retry",
                              pod->key, decided->decision.node, err ? err : "unknown error");
    free(err);
    return ev->error ? 1 : -1;
}

/* Live mode: the API server must hold the decision before the scheduler
 * hears about it. Written with no lock held; a failure takes back exactly
 * the reservation and is the request's Error: it is about the pod or the
 * API server, not the node, so no other node is tried. */
static int record(struct placement *p, const struct pod_info *pod, struct evaluation *ev,
                  const struct pod_info *decided, uint64_t token)
{
    char *err = NULL;
    int rc = p->sink ? p->sink->record(p->sink->ctx, decided, &err) : 0;
    if (rc == 0)
        return 0;
    if (rc == DECISION_MAYBE_WRITTEN)
        return maybe_written(p, pod, ev, decided, token, err);
    cache_cancel_reservation(p->cache, pod->key, token);
    log_warn("pod %s on node %s: recording the decision failed: %s", pod->key, decided->decision.node,
             err ? err : "unknown error");
    ev->error = strbuf_format("recording the decision for pod %s (node %s) on the pod failed: %s; nothing was "
                              "kept, retry",
                              pod->key, decided->decision.node, err ? err : "unknown error");
    free(err);
    return ev->error ? 1 : -1;
}

/* HAMi's device plugin allocates a pod only after this service's bind verb
 * has taken the node lock (docs/migration.md). With --placement filter
 * that needs kube-scheduler's bindVerb, which the drop-in scheduler config
 * does not set: said once, at the first such decision, where an operator
 * looks when HAMi pods stay Pending. */
static void warn_hami_in_filter_mode(const struct placement *p, const struct pod_info *decided)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (p->cfg.mode != PLACEMENT_FILTER || !decided->hami || !decided->hami->has_alloc)
        return;
    if (!atomic_flag_test_and_set(&warned))
        log_warn("pod %s was decided onto HAMi devices in --placement filter: HAMi's device plugin allocates it "
                 "only after this service's bind verb takes the node lock, so kube-scheduler must call bindVerb "
                 "(scheduler-config/<version>/hami.yaml); with the drop-in configuration such pods stay Pending "
                 "(said once)",
                 decided->key);
}

static void clear_decision(struct placement *p, const struct pod_info *pod);

/* The pod's next attempt found no node for it: a decision it still holds
 * from an earlier attempt is given up (its GPUs are free once the watch
 * shows the annotations gone), not kept to the ceiling. */
static void release_held(struct placement *p, const struct pod_info *pod)
{
    cache_read_lock(p->cache);
    const struct pod_entry *e = own_entry(p->cache, pod);
    bool held = e && e->node && !e->bound;
    cache_unlock(p->cache);
    if (held && p->sink) {
        log_info("pod %s fits none of the nodes of its new attempt: its earlier decision is released", pod->key);
        clear_decision(p, pod);
    }
}

/* "name:0,1 other:3": each container's GPU minors in a decision, for the
 * log's gpus field (malloc'd; NULL when memory ran out). */
static char *decision_gpus(const struct pod_info *decided)
{
    const struct pod_decision *d = &decided->decision;
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; d->idx && i < d->nidx && i < decided->ncontainers; i++) {
        if (!d->idx[i])
            continue;
        if (sb.len)
            strbuf_putc(&sb, ' ');
        strbuf_puts(&sb, decided->containers[i].name ? decided->containers[i].name : "?");
        for (int j = 0; j < d->idx_count[i]; j++) {
            strbuf_putc(&sb, j ? ',' : ':');
            strbuf_put_i64(&sb, d->idx[i][j]);
        }
    }
    if (decided->hami && decided->hami->has_alloc) {
        char *hami = hami_alloc_encode(&decided->hami->alloc);
        if (hami) {
            strbuf_puts(&sb, sb.len ? " hami:" : "hami:");
            strbuf_puts(&sb, hami);
        }
        free(hami);
    }
    strbuf_putc(&sb, '\0');
    return strbuf_failed(&sb) ? (strbuf_free(&sb), NULL) : strbuf_detach(&sb, NULL);
}

/* A decision, as every format logs it: pod, node and GPUs as fields. */
static void log_decision(const char *msg, const struct pod_info *decided, const char *node)
{
    if (!log_enabled(LOG_INFO))
        return;
    char *gpus = decision_gpus(decided);
    log_fields(LOG_INFO, msg, "pod", decided->key, "node", node, "gpus", gpus ? gpus : "");
    free(gpus);
}

/* Debug: why a pod fits nowhere, with the first reasons of the nodes
 * (the whole list is in the answer and in /inspect/explain). */
static void log_unschedulable(const struct pod_info *pod, const struct evaluation *ev)
{
    if (!log_enabled(LOG_DEBUG))
        return;
    struct strbuf why;
    strbuf_init(&why);
    size_t shown = 0;
    for (size_t i = 0; i < ev->count && shown < 3; i++) {
        const struct verdict *v = &ev->verdicts[i];
        if (v->fits || v->reason_len == 0 || !ev->text.data)
            continue;
        strbuf_puts(&why, shown++ ? "; " : "");
        strbuf_puts(&why, v->name);
        strbuf_puts(&why, ": ");
        strbuf_append(&why, ev->text.data + v->reason_off, v->reason_len);
    }
    strbuf_putc(&why, '\0');
    char nodes[24];
    snprintf(nodes, sizeof nodes, "%zu", ev->count);
    log_fields(LOG_DEBUG, "pod fits no node", "pod", pod->key, "nodes", nodes, "reason",
               strbuf_failed(&why) ? "" : why.data);
    strbuf_free(&why);
}

static int decide(struct placement *p, const struct pod_info *pod, struct evaluation *ev)
{
    ev->chosen = live_assumption(p, pod, ev);
    while (ev->chosen < 0) {
        ssize_t best = best_fitting(ev);
        if (best < 0) {
            log_unschedulable(pod, ev);
            release_held(p, pod);
            return 0;
        }
        struct pod_info *decided = NULL;
        uint64_t token = 0;
        int rc = commit(p, pod, ev, &ev->verdicts[best], &decided, &token);
        if (rc == 0)
            rc = record(p, pod, ev, decided, token);
        if (rc == 0 && decided) {
            warn_hami_in_filter_mode(p, decided);
            if (!ev->error)
                log_decision("pod assigned", decided, ev->verdicts[best].name);
        }
        pod_info_free(decided);
        if (rc < 0)
            return -1;
        if (ev->error)
            return 0;
        if (rc == 0) {
            ev->chosen = best;
            ev->decided = true;
        }
    }
    assign_others(ev);
    return strbuf_failed(&ev->text) ? -1 : 0;
}

/* A request-level answer: the kube-scheduler error form. */
static int answer_error(struct evaluation *ev, char *msg)
{
    free(ev->error);
    ev->error = msg;
    return msg ? 0 : -1;
}

static char *busy_message(const char *key)
{
    return strbuf_format("a decision for pod %s is in progress; retry", key);
}

/* Why the extender must not write a decision for or bind this pod (the
 * cluster's copy), or NULL: it acts only on what it owns, a pending pod that
 * asks for a GPU resource it manages. Anyone who reaches the port could
 * otherwise bind any pod or annotate any pending pod (docs/security.md). */
static const char *refusal_of(const struct pod_info *pod)
{
    if (pod->terminating)
        return "is being deleted (it has a deletionTimestamp): nothing to decide";
    if (pod->terminal)
        return "has finished (phase Succeeded or Failed): nothing to decide";
    if (!pod->uses_gpu && !pod->names_gpu)
        return "asks for no GPU resource this extender manages (tencent.com/vcuda-core, nvidia.com/mps-core, "
               "nvidia.com/gpu, HAMi's nvidia.com/gpumem/gpucores): the extender decides and binds only GPU pods";
    return NULL;
}

/* A pod kube-scheduler sends because it names a GPU resource, at 0 (or
 * only in requests or an init container at 0): no GPU to decide, so only
 * the Binding, with no decision written and no HAMi node lock. Without it
 * such a pod would wait for ever in a configuration with a bind verb. */
static int bind_without_gpus(struct placement *p, const struct pod_info *pod, const char *node, char **err)
{
    char *why = NULL;
    if (!p->sink || p->sink->bind(p->sink->ctx, pod, node, &why) == 0) {
        free(why);
        return 0;
    }
    *err = strbuf_format("binding pod %s to %s failed: %s", pod->key, node, why ? why : "unknown error");
    free(why);
    return -1;
}

/* What a decision may act on, judged on the cluster's copy of the pod. */
static char *not_decidable(const struct pod_info *pod)
{
    if (pod->node_name)
        return strbuf_format("pod %s is already bound to node %s", pod->key, pod->node_name);
    const char *why = refusal_of(pod);
    if (!why && !pod->uses_gpu) /* a filter claiming GPUs for a pod that names them at 0 */
        why = "asks for no GPU (it names a GPU resource at 0): nothing to decide";
    return why ? strbuf_format("pod %s %s", pod->key, why) : NULL;
}

/* Filter mode, with the pod entered in the in-flight set: look the pod up
 * (cache, else the API server), evaluate its copy under the read lock,
 * decide. */
static int filter_decide(struct placement *p, const struct pod_info *request, struct evaluation *ev)
{
    char *err = NULL;
    bool fetched = false;
    cache_expire(p->cache, clock_realtime_ns());
    struct pod_info *cluster =
        pod_lookup(p->cache, p->sink, request->ns, request->name, request->uid, request, &fetched, &err);
    bool refused = cluster && (cluster->node_name || refusal_of(cluster) || !cluster->uses_gpu);
    if (!cluster || refused) {
        char *why = refused ? not_decidable(cluster) : err;
        if (refused)
            free(err);
        pod_info_free(cluster);
        return answer_error(ev, why);
    }
    /* The pod decided for is the cluster's copy, amounts and all: the
     * request's copy (anyone who reaches the port writes it) only names
     * the pod (docs/security.md). */
    struct pod_info *pod = cluster;
    ev->ncontainers = pod->ncontainers; /* GPU lists follow this copy's containers, not the request's */
    int pre = precheck(p, pod, ev);
    if (pre != 0) {
        pod_info_free(pod);
        return pre < 0 ? -1 : 0;
    }
    cache_read_lock(p->cache);
    int rc = evaluate_locked(p, pod, ev);
    cache_unlock(p->cache);
    /* Leadership may have been lost meanwhile. */
    const char *lost = rc == 0 ? not_deciding(p) : NULL;
    if (lost)
        rc = answer_error(ev, strdup(lost));
    if (rc == 0 && !ev->error)
        rc = decide(p, pod, ev);
    pod_info_free(pod);
    return rc;
}

/* Leave all but the n best feasible nodes out of the answer: the kept
 * indices are held in order of merit, and a node better than the worst
 * kept one takes its place. Only feasible nodes are left out, and only
 * when more than n fit, so a pod that fits somewhere is still answered
 * with its best nodes, and one that fits nowhere keeps every reason. */
static void keep_best(struct evaluation *ev, size_t n)
{
    size_t feasible = 0;
    for (size_t i = 0; i < ev->count; i++)
        feasible += ev->verdicts[i].fits;
    if (feasible <= n)
        return;
    size_t *best = malloc(n * sizeof(*best));
    if (!best)
        return; /* answer every feasible node: correct, only larger */
    size_t kept = 0;
    for (size_t i = 0; i < ev->count; i++) {
        const struct verdict *v = &ev->verdicts[i];
        if (!v->fits || (kept == n && !better_verdict(v, &ev->verdicts[best[n - 1]])))
            continue;
        size_t at = kept < n ? kept++ : n - 1;
        while (at > 0 && better_verdict(v, &ev->verdicts[best[at - 1]])) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = i;
    }
    for (size_t i = 0; i < ev->count; i++)
        if (ev->verdicts[i].fits)
            ev->verdicts[i].left_out = true;
    for (size_t k = 0; k < kept; k++)
        ev->verdicts[best[k]].left_out = false;
    for (size_t i = 0; i < ev->count; i++)
        if (ev->verdicts[i].left_out)
            unfit(ev, &ev->verdicts[i]);
    free(best);
}

int placement_filter(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                     struct evaluation *ev)
{
    return placement_filter_block(p, pod, names, n, NULL, ev);
}

int placement_filter_block(struct placement *p, const struct pod_info *pod, const char *const *names, size_t n,
                           const struct name_block *block, struct evaluation *ev)
{
    const char *refused = not_deciding(p);
    if (refused) {
        if (evaluation_start(ev, pod, names, n, block) != 0)
            return -1;
        return answer_error(ev, strdup(refused));
    }
    if (p->cfg.mode == PLACEMENT_BIND) {
        int rc = evaluate(p, pod, names, n, block, true, ev);
        if (rc == 0 && !ev->error && p->cfg.filter_best > 0)
            keep_best(ev, (size_t)p->cfg.filter_best);
        return rc;
    }
    if (evaluation_start(ev, pod, names, n, block) != 0)
        return -1;
    int pre = precheck(p, pod, ev);
    if (pre != 0)
        return pre < 0 ? -1 : 0;
    /* One decision per pod at a time; different pods decide in parallel,
     * and the re-fit under the write lock keeps them from sharing GPUs. */
    int entered = inflight_enter(&p->inflight, pod->key);
    if (entered <= 0)
        return entered < 0 ? -1 : answer_error(ev, busy_message(pod->key));
    int rc = filter_decide(p, pod, ev);
    inflight_leave(&p->inflight, pod->key);
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

/* decide_step.minors for bind mode: container i's chosen slots as device
 * minors (idx[i] has room for every GPU; the caller frees them). */
static int masks_to_minors(void *ctx, const struct node_state *n, const uint64_t *masks, int **idx, int *count)
{
    const struct pod_info *pod = ctx;
    for (int i = 0; i < pod->ncontainers; i++) {
        if (!(idx[i] = calloc((size_t)n->gpu_count + 1, sizeof(int))))
            return -1;
        for (int s = 0; s < n->gpu_count; s++)
            if (masks[i] >> s & 1)
                idx[i][count[i]++] = n->gpus[s].minor;
    }
    return 0;
}

/* Fit and reserve `pod` on `node` (decide_on); the decided pod (with its
 * annotations' facts) is returned for recording, with *token. */
static struct pod_info *assume_on(struct placement *p, const struct pod_info *pod, const char *node, uint64_t *token,
                                  char **err)
{
    size_t nc = (size_t)(pod->ncontainers ? pod->ncontainers : 1);
    uint64_t *masks = calloc(nc, sizeof(*masks));
    uint64_t *hami_masks = calloc(nc, sizeof(*hami_masks));
    int **idx = calloc(nc, sizeof(*idx));
    int *count = calloc(nc, sizeof(*count));
    struct decide_step s = {.node = node,
                            .fit = {.masks = masks, .hami_masks = hami_masks},
                            .minors = masks_to_minors,
                            .ctx = (void *)pod,
                            .idx = idx,
                            .count = count};
    if (!masks || !hami_masks || !idx || !count) {
        *err = strdup("out of memory");
        goto out;
    }
    switch (decide_on(p, pod, &s)) {
    case DECIDED:
        *token = s.token;
        break;
    case NODE_GONE:
        *err = strbuf_format("node %s is not in the extender's cache", node);
        break;
    case DOES_NOT_FIT:
        *err = strbuf_format("node %s cannot take pod %s: %s", node, pod->key, s.fit.reason);
        break;
    case QUOTA_REFUSED:
        *err = strbuf_format("node %s cannot take pod %s: %s", node, pod->key, s.quota);
        break;
    case DECIDE_FAILED:
        *err = strdup("out of memory");
        break;
    }
out:
    free(s.quota);
    for (int i = 0; idx && i < pod->ncontainers; i++)
        free(idx[i]);
    free(idx);
    free(count);
    free(masks);
    free(hami_masks);
    return s.decided;
}

/* Is this pod's own live assumption on node (a filter-mode decision)? */
static bool assumed_on(struct placement *p, const struct pod_info *pod, const char *node)
{
    cache_read_lock(p->cache);
    const struct pod_entry *e = own_entry(p->cache, pod);
    bool here = e && e->node && !e->bound && strcmp(e->node->name, node) == 0 && assumption_sound(e);
    cache_unlock(p->cache);
    return here;
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

static void clear_decision(struct placement *p, const struct pod_info *pod)
{
    char *why = NULL;
    cache_release_hold(p->cache, pod->key); /* the update showing it gone ends the hold */
    if (p->sink->clear(p->sink->ctx, pod, &why) != 0)
        log_error("pod %s: could not remove the decision annotations: %s", pod->key, why ? why : "unknown error");
    free(why);
}

/* The Binding; when it fails the annotations written here come off. */
static int bind_or_clear(struct placement *p, const struct pod_info *pod, const struct pod_info *decided,
                         const char *node, char **err)
{
    char *why = NULL;
    if (p->sink->bind(p->sink->ctx, decided ? decided : pod, node, &why) == 0)
        return 0;
    *err = strbuf_format("binding pod %s to %s failed: %s", pod->key, node, why ? why : "unknown error");
    free(why);
    if (decided)
        clear_decision(p, pod);
    return -1;
}

/* Does the cluster's copy of the pod carry decision keys from before (an
 * earlier attempt's, or written by its creator)? */
static bool has_decision_keys(const struct pod_info *pod)
{
    if (pod->decision.node || pod->decision.time_ns || pod->decision.proof)
        return true;
    for (int i = 0; pod->decision.idx && i < pod->decision.nidx; i++)
        if (pod->decision.idx[i])
            return true;
    return false;
}

/* A HAMi allocation to write (the node lock and HAMi's order), or HAMi
 * decision annotations from before on the pod (they must come off): the
 * two-write path. A pod HAMi could serve (nvidia.com/gpu) decided onto a
 * node HAMi does not serve, with none of them, needs neither. */
static bool hami_writes(const struct pod_info *pod, const struct pod_info *decided)
{
    return decided->hami && (decided->hami->has_alloc || (pod->hami && pod->hami->decision_keys));
}

/* A new decision goes in one write unless hami_writes: the Binding carries
 * the annotations (decision_sink.bind_decided), so GPU-Manager and the
 * device plugins find them the moment the pod is bound and a failed bind
 * leaves nothing to take off. A Binding can only set keys, so a pod that
 * carries decision keys from before (which the PATCH of the two-write path
 * removes: a stale or forged index key would else sit beside the new
 * decision) goes the two-write way. (The PATCH also removes HAMi's
 * hami.io/vgpu-node label, which only a failed HAMi bind leaves and which
 * only a HAMi node's plugin reads.) */
static bool one_write(const struct placement *p, const struct pod_info *pod, const struct pod_info *decided)
{
    return decided && p->sink && p->sink->bind_decided && !hami_writes(pod, decided) && !has_decision_keys(pod);
}

static int bind_in_one_write(struct placement *p, const struct pod_info *pod, const struct pod_info *decided,
                             const char *node, char **err)
{
    char *why = NULL;
    int rc = p->sink->bind_decided(p->sink->ctx, decided, node, &why);
    if (rc != 0) {
        *err = strbuf_format("binding pod %s to %s %s: %s", pod->key, node,
                             rc == DECISION_MAYBE_WRITTEN ? "got no answer (it may land yet; the GPUs stay held)"
                                                          : "failed",
                             why ? why : "unknown error");
        free(why);
        return rc == DECISION_MAYBE_WRITTEN ? rc : -1;
    }
    if (mark_bound(p, decided, node) == 0)
        return 0;
    *err = strdup("out of memory");
    return -1;
}

/* Annotations first, Binding second (GPU-Manager reads a pod once it is
 * bound); when the Binding fails the annotations written here come off.
 * A HAMi pod takes the node lock first and is marked for HAMi's plugin
 * just before the Binding (with a new decision, in the decision's own
 * PATCH: one write fewer, and the plugin never sees the devices without
 * the mark); after a failure it is marked failed and the lock released
 * (hamibind.h). No lock of ours is held. */
static int record_and_bind(struct placement *p, const struct pod_info *pod, struct pod_info *decided, const char *node,
                           int64_t until_ms, char **err)
{
    if (one_write(p, pod, decided))
        return bind_in_one_write(p, pod, decided, node, err);
    const struct pod_info *subject = decided ? decided : pod;
    bool hami = hamibind_wanted(p->sink, subject, node), phase = false;
    /* Steers other HAMi pods elsewhere until the lock shows (hamibusy.h). */
    bool busy = hami && hamibusy_enter(&p->hami_busy, node) == 0;
    char *why = NULL;
    int rc = -1;
    int locked = hami ? hamibind_lock(p->sink, subject, node, until_ms, &why) : 0;
    if (locked != 0) {
        *err = strbuf_format("binding pod %s to %s: %s", pod->key, node, why ? why : "unknown error");
        hami = locked < 0; /* an API failure may have left our lock; another holder's stays */
        goto out;
    }
    if (hami && decided) {
        decided->hami->bind_phase_ns = clock_realtime_ns();
        phase = true; /* even a failed write may have landed: "failed" then corrects it */
    }
    if (decided && p->sink && p->sink->record(p->sink->ctx, decided, &why) != 0) {
        *err = strbuf_format("recording the decision on pod %s failed: %s", pod->key, why ? why : "unknown error");
        goto out;
    }
    if (hami && !decided) { /* the decision was written at filter time: mark it now */
        phase = true;       /* even a failed write may have landed: "failed" then corrects it */
        if (hamibind_allocating(p->sink, subject, &why) != 0) {
            *err = strbuf_format("marking pod %s for HAMi's device plugin (hami.io/bind-phase) failed: %s", pod->key,
                                 why ? why : "unknown error");
            if (decided)
                clear_decision(p, pod);
            goto out;
        }
    }
    if (p->sink && bind_or_clear(p, pod, decided, node, err) != 0)
        goto out;
    hami = false; /* bound: HAMi's plugin allocates it and releases the lock */
    rc = mark_bound(p, subject, node);
    if (rc != 0)
        *err = strdup("out of memory");
out:
    if (rc != 0 && hami)
        hamibind_abort(p->sink, subject, node, phase);
    if (hamibind_wanted(p->sink, subject, node))
        metrics_count_hami_bind(rc == 0 ? HAMI_BIND_BOUND : locked > 0 ? HAMI_BIND_LOCKED : HAMI_BIND_FAILED);
    if (busy)
        hamibusy_leave(&p->hami_busy, node);
    free(why);
    return rc;
}

/* Bind the cluster's copy of the pod: only the Binding for its own live
 * assumption on node, else reserve, record and bind; a failure takes back
 * exactly the reservation. */
static int bind_pod(struct placement *p, const struct pod_info *pod, const char *node, int64_t until_ms, char **err)
{
    if (pod->node_name) {
        /* Binding twice to the same node is not an error; elsewhere it is. */
        if (strcmp(pod->node_name, node) == 0)
            return 0;
        *err = strbuf_format("pod %s is already bound to %s", pod->key, pod->node_name);
        return -1;
    }
    const char *refused = refusal_of(pod);
    if (refused) {
        *err = strbuf_format("pod %s %s", pod->key, refused);
        return -1;
    }
    if (!pod->uses_gpu && !pod->request_error) {
        int rc = bind_without_gpus(p, pod, node, err);
        if (rc == 0)
            log_decision("pod bound", pod, node);
        return rc;
    }
    if (assumed_on(p, pod, node)) {
        int rc = record_and_bind(p, pod, NULL, node, until_ms, err);
        if (rc == 0)
            log_decision("pod bound", pod, node);
        return rc;
    }
    uint64_t token = 0;
    struct pod_info *decided = assume_on(p, pod, node, &token, err);
    if (!decided)
        return -1;
    int rc = record_and_bind(p, pod, decided, node, until_ms, err);
    if (rc == 0)
        log_decision("pod bound", decided, node);
    if (rc == DECISION_MAYBE_WRITTEN) {
        /* As in filter mode (record): a Binding with no answer may land
         * yet, and with it these GPUs; the watch, the pod's next attempt
         * or the ceiling ends the reservation. */
        cache_reservation_unconfirmed(p->cache, pod->key, token);
        rc = -1;
    } else if (rc != 0) {
        cache_cancel_reservation(p->cache, pod->key, token);
    }
    pod_info_free(decided);
    return rc;
}

static int bind_entered(struct placement *p, const char *ns, const char *name, const char *uid, const char *node,
                        int64_t until_ms, char **err)
{
    bool fetched = false;
    cache_expire(p->cache, clock_realtime_ns());
    struct pod_info *pod = pod_lookup(p->cache, p->sink, ns, name, uid, NULL, &fetched, err);
    int rc = pod ? bind_pod(p, pod, node, until_ms, err) : -1;
    pod_info_free(pod);
    return rc;
}

int placement_bind(struct placement *p, const char *ns, const char *name, const char *uid, const char *node, char **err)
{
    return placement_bind_until(p, ns, name, uid, node, 0, err);
}

int placement_bind_until(struct placement *p, const char *ns, const char *name, const char *uid, const char *node,
                         int64_t until_ms, char **err)
{
    *err = NULL;
    const char *nsd = ns && *ns ? ns : "default";
    char *key = strbuf_join2(nsd, '/', name);
    if (!key) {
        *err = strdup("out of memory");
        return -1;
    }
    const char *refused = not_deciding(p);
    int entered = !refused ? inflight_enter(&p->inflight, key) : 0;
    int rc = -1;
    if (refused)
        *err = strdup(refused);
    else if (entered == 0)
        *err = busy_message(key);
    else if (entered < 0)
        *err = strdup("out of memory");
    else
        rc = bind_entered(p, nsd, name, uid, node, until_ms, err);
    if (entered > 0)
        inflight_leave(&p->inflight, key);
    if (rc != 0)
        log_fields(LOG_WARN, "bind failed", "pod", key, "node", node, "reason", *err ? *err : "failed");
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

/* A node is kept, with every victim kube-scheduler listed, when the pod's
 * GPUs fit once they are all gone. None is spared: kube-scheduler's default
 * preemption already reprieved every victim its own filters (resource fit
 * of cpu, memory and the GPU resources it counts) can do without, so each
 * one left is one its fit needs; sparing it here made the preemptor fail
 * that fit and a second preemption round follow (docs/behaviour.md). */
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
    pn->keep = fits_without(p, n, pod, out, nout, masks);
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
    const struct pod_entry *self = own_entry(p->cache, pod);
    for (size_t i = 0; i < n; i++)
        preempt_node(p, pod, self, &nodes[i], masks, out);
    cache_unlock(p->cache);
    free(masks);
    free(out);
    return 0;
}
