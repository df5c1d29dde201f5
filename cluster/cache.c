/* cache.c - cluster cache and per-GPU occupancy index. See cache.h. */
#include "cluster/cache.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cache_init(struct cluster_cache *c, const struct cache_config *cfg)
{
    memset(c, 0, sizeof(*c));
    c->cfg = *cfg;
    c->next_expiry_ns = INT64_MAX;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    /* Writer preference: a steady stream of requests must not starve the
     * watch, or the snapshot requests see would fall behind the cluster. */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&c->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0)
        return -1;
    if (dict_init(&c->nodes, 64) || dict_init(&c->pods, 256) || dict_init(&c->configmaps, 16) ||
        dict_init(&c->usage, 16)) {
        cache_destroy(c);
        return -1;
    }
    return 0;
}

static void free_family_states(struct node_state *n)
{
    for (size_t f = 0; f < gpu_family_count(); f++) {
        const struct gpu_family *fam = gpu_family_at(f);
        if (fam->node_free && n->family_state[f])
            fam->node_free(n->family_state[f]);
        n->family_state[f] = NULL;
    }
}

/* The families that place their own units, fresh for n's spec. */
static int reset_family_states(struct node_state *n)
{
    int rc = 0;
    for (size_t f = 0; f < gpu_family_count(); f++) {
        const struct gpu_family *fam = gpu_family_at(f);
        if (fam->node_reset && fam->node_reset(n, &n->family_state[f]) != 0)
            rc = -1;
    }
    return rc;
}

/* The units of pod e's containers of self-placing families, added or taken back. */
static void apply_family_units(struct node_state *n, const struct pod_entry *e, int sign)
{
    for (int i = 0; i < e->info->ncontainers; i++) {
        const struct container_request *r = &e->info->containers[i];
        if (!r->family || r->family->placement != GPU_PLACE_FAMILY || !r->family->charge)
            continue;
        void *state = n->family_state[gpu_family_index(r->family)];
        if (state)
            r->family->charge(state, n, r, sign);
    }
}

static void node_state_free(struct node_state *n)
{
    if (!n)
        return;
    node_spec_free(n->spec);
    free(n->gpus);
    free(n->hami);
    free_family_states(n);
    free(n->name);
    free(n);
}

static void pod_entry_free(struct pod_entry *e)
{
    if (!e)
        return;
    pod_info_free(e->info);
    pod_info_free(e->unreserved);
    free(e->slots);
    free(e->hami_charge);
    free(e->usage_key);
    free(e->line_key);
    free(e);
}

void cache_destroy(struct cluster_cache *c)
{
    size_t pos = 0;
    struct dict_entry *de;
    while ((de = dict_next(&c->pods, &pos)))
        pod_entry_free(de->value);
    pos = 0;
    while ((de = dict_next(&c->nodes, &pos)))
        node_state_free(de->value);
    pos = 0;
    while ((de = dict_next(&c->configmaps, &pos)))
        cJSON_Delete(de->value);
    dict_free(&c->pods);
    dict_free(&c->nodes);
    dict_free(&c->configmaps);
    dict_free(&c->usage);
    pthread_rwlock_destroy(&c->lock);
}

void cache_set_decision_key(struct cluster_cache *c, const struct decision_key *key)
{
    cache_write_lock(c);
    c->cfg.decision_key = key;
    cache_unlock(c);
}

void cache_read_lock(struct cluster_cache *c)
{
    pthread_rwlock_rdlock(&c->lock);
}

void cache_write_lock(struct cluster_cache *c)
{
    pthread_rwlock_wrlock(&c->lock);
}

void cache_unlock(struct cluster_cache *c)
{
    pthread_rwlock_unlock(&c->lock);
}

struct node_state *cache_find_node(const struct cluster_cache *c, const char *name)
{
    return dict_get(&c->nodes, name);
}

struct pod_entry *cache_find_pod(const struct cluster_cache *c, const char *key)
{
    return dict_get(&c->pods, key);
}

/* ---- charges -------------------------------------------------------------- */

static void add_usage(struct node_usage *to, const struct node_usage *u, int sign)
{
    to->cores += sign * u->cores;
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        to->mem[p] += sign * u->mem[p];
    to->pods += sign * u->pods;
}

#ifndef NDEBUG
/* Debug builds check the accounting after every change of a node's charges:
 * each counter is exactly the sum of the charges of the pods on the node's
 * list, so an update that forgot to subtract what it added fails at once,
 * not as a wrong placement later. */
static void check_gpu_charges(const struct node_state *n, int slot)
{
    int64_t cores = 0, mem[GPU_MEMORY_POOLS] = {0};
    int pods = 0;
    for (const struct pod_entry *e = n->charged; e; e = e->node_next)
        for (int i = 0; i < e->nslots; i++)
            if (e->slots[i].slot == slot) {
                cores += e->slots[i].cores;
                for (int p = 0; p < GPU_MEMORY_POOLS; p++)
                    mem[p] += e->slots[i].mem[p];
                pods++;
            }
    const struct gpu_state *g = &n->gpus[slot];
    assert(g->core_used == cores && g->pods == pods);
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        assert(g->mem_used[p] == mem[p]);
}

static void check_node_charges(const struct node_state *n)
{
    struct node_usage sum = {0};
    int count = 0;
    for (const struct pod_entry *e = n->charged; e; e = e->node_next) {
        assert(e->node == n);
        assert(!e->node_next || e->node_next->node_prev == e);
        add_usage(&sum, &e->unattributed, 1);
        count++;
    }
    assert(count == n->charged_count);
    assert(sum.cores == n->unattributed.cores && sum.pods == n->unattributed.pods);
    for (int p = 0; p < GPU_MEMORY_POOLS; p++)
        assert(sum.mem[p] == n->unattributed.mem[p]);
    for (int s = 0; s < n->gpu_count; s++)
        check_gpu_charges(n, s);
    hami_occupancy_check(n);
    assert(node_fit_agrees(n));
}

#define CHECK_NODE_CHARGES(n) check_node_charges(n)
#else
#define CHECK_NODE_CHARGES(n) ((void)0)
#endif

static void apply_slots(struct node_state *n, const struct pod_entry *e, int sign)
{
    for (int i = 0; i < e->nslots; i++) {
        const struct slot_charge *sc = &e->slots[i];
        struct gpu_state *g = &n->gpus[sc->slot];
        g->core_used += sign * sc->cores;
        for (int p = 0; p < GPU_MEMORY_POOLS; p++)
            g->mem_used[p] += sign * sc->mem[p];
        g->pods += sign;
    }
    add_usage(&n->unattributed, &e->unattributed, sign);
    hami_occupancy_apply(n, e, sign);
    apply_family_units(n, e, sign);
    node_fit_refresh(n);
}

static void assumed_link(struct cluster_cache *c, struct pod_entry *e)
{
    e->assumed_prev = NULL;
    e->assumed_next = c->assumed;
    if (c->assumed)
        c->assumed->assumed_prev = e;
    c->assumed = e;
    c->assumed_pods++;
    if (e->expires_ns < c->next_expiry_ns)
        __atomic_store_n(&c->next_expiry_ns, e->expires_ns, __ATOMIC_RELAXED);
}

static void assumed_unlink(struct cluster_cache *c, struct pod_entry *e)
{
    if (e->assumed_prev)
        e->assumed_prev->assumed_next = e->assumed_next;
    else
        c->assumed = e->assumed_next;
    if (e->assumed_next)
        e->assumed_next->assumed_prev = e->assumed_prev;
    e->assumed_prev = e->assumed_next = NULL;
    c->assumed_pods--;
}

static void drop_placeholder_if_unused(struct cluster_cache *c, struct node_state *n)
{
    if (n->present || n->charged)
        return;
    dict_del(&c->nodes, n->name);
    node_state_free(n);
    c->nodes_epoch++;
}

int64_t pod_total_cores(const struct pod_info *p)
{
    int64_t cores = 0;
    for (int i = 0; i < p->ncontainers; i++)
        if (p->containers[i].family)
            cores += p->containers[i].whole_gpus > 0 ? 100LL * p->containers[i].whole_gpus : p->containers[i].cores;
    return cores;
}

int64_t pod_quota_cores(const struct pod_info *p, const struct node_state *n)
{
    if (!p->hami || !hami_node_is(n))
        return pod_total_cores(p);
    int64_t cores = hami_quota_cores(p, n);
    for (int i = 0; i < p->ncontainers; i++) {
        const struct container_request *r = &p->containers[i];
        if (r->family && !hami_container_on(r, n))
            cores += r->whole_gpus > 0 ? 100LL * r->whole_gpus : r->cores;
    }
    return cores;
}

bool pod_instance_line(const struct pod_info *p, const struct node_state *n, char *buf, size_t size, int64_t *units)
{
    char other[GPU_AMOUNT_NAME_MAX * 2];
    bool found = false;
    *units = 0;
    for (int i = 0; n->spec && i < p->ncontainers; i++) {
        const struct container_request *r = &p->containers[i];
        if (!r->family || !r->family->quota_line)
            continue;
        if (!r->family->quota_line(n->spec, r, found ? other : buf, found ? sizeof(other) : size))
            return false;
        if (found && strcmp(other, buf) != 0)
            return false; /* two lines: counted against the node's model only */
        found = true;
        *units += 100 * r->instances;
    }
    return found;
}

static char *usage_key(const char *ns, const char *model)
{
    return strbuf_join2(ns, '\x1f', model);
}

int64_t cache_usage(const struct cluster_cache *c, const char *ns, const char *model)
{
    char *key = usage_key(ns, model ? model : "");
    int64_t v = key ? (int64_t)(intptr_t)dict_get(&c->usage, key) : 0;
    free(key);
    return v;
}

/* Quota counts whole charges per namespace and node model; a missing model
 * is counted under "" (no quota names it). */
static int add_usage_key(struct cluster_cache *c, const char *key, int64_t delta)
{
    int64_t v = (int64_t)(intptr_t)dict_get(&c->usage, key) + delta;
    if (v == 0) {
        dict_del(&c->usage, key);
        return 0;
    }
    return dict_set(&c->usage, key, (void *)(intptr_t)v, NULL);
}

/* The pod's instances under their own quota line as well (pod_instance_line). */
static int charge_line(struct cluster_cache *c, struct pod_entry *e, const struct node_state *n)
{
    char line[GPU_AMOUNT_NAME_MAX * 2];
    int64_t units;
    if (!pod_instance_line(e->info, n, line, sizeof(line), &units))
        return 0;
    e->line_key = usage_key(e->info->ns, line);
    e->line_units = units;
    if (!e->line_key || add_usage_key(c, e->line_key, units) != 0) {
        free(e->line_key);
        e->line_key = NULL;
        e->line_units = 0;
        return -1;
    }
    return 0;
}

static void uncharge_usage(struct cluster_cache *c, struct pod_entry *e)
{
    if (e->line_key)
        add_usage_key(c, e->line_key, -e->line_units);
    free(e->line_key);
    e->line_key = NULL;
    e->line_units = 0;
    if (!e->usage_key)
        return;
    add_usage_key(c, e->usage_key, -e->usage_cores);
    free(e->usage_key);
    e->usage_key = NULL;
    e->usage_cores = 0;
}

static int charge_usage(struct cluster_cache *c, struct pod_entry *e, const struct node_state *n)
{
    const char *model = n->spec && n->spec->model ? n->spec->model : "";
    e->usage_cores = pod_quota_cores(e->info, n);
    e->usage_key = usage_key(e->info->ns, model);
    if (!e->usage_key || add_usage_key(c, e->usage_key, e->usage_cores) != 0) {
        free(e->usage_key);
        e->usage_key = NULL;
        return -1;
    }
    if (charge_line(c, e, n) != 0) {
        uncharge_usage(c, e);
        return -1;
    }
    return 0;
}

static void uncharge(struct cluster_cache *c, struct pod_entry *e)
{
    struct node_state *n = e->node;
    if (!n)
        return;
    apply_slots(n, e, -1);
    uncharge_usage(c, e);
    if (e->node_prev)
        e->node_prev->node_next = e->node_next;
    else
        n->charged = e->node_next;
    if (e->node_next)
        e->node_next->node_prev = e->node_prev;
    n->charged_count--;
    if (!e->bound)
        assumed_unlink(c, e);
    free(e->slots);
    e->slots = NULL;
    e->nslots = 0;
    memset(&e->unattributed, 0, sizeof(e->unattributed));
    hami_occupancy_forget(e);
    e->node = NULL;
    e->node_prev = e->node_next = NULL;
    CHECK_NODE_CHARGES(n);
    assert(c->assumed_pods >= 0);
    drop_placeholder_if_unused(c, n);
}

/* Where a pod is charged, if anywhere: its binding, else a live assumption. */
static const char *charge_target(const struct cluster_cache *c, const struct pod_info *p, int64_t now, bool *bound,
                                 int64_t *expires)
{
    *bound = false;
    *expires = 0;
    if (p->terminal || !p->uses_gpu || p->request_error)
        return NULL;
    if (p->node_name) {
        *bound = true;
        return p->node_name;
    }
    const struct pod_decision *d = &p->decision;
    if (!d->node || d->time_ns <= 0)
        return NULL;
    /* The time comes from an annotation: one from the future (another
     * replica's clock ahead of ours) counts from now, so no time, however
     * far ahead, holds longer than the ceiling. */
    int64_t ttl = c->cfg.assume_ttl_ns;
    int64_t since = d->time_ns < now ? d->time_ns : now;
    int64_t until = since > INT64_MAX - ttl ? INT64_MAX : since + ttl;
    if (until <= now)
        return NULL;
    *expires = until;
    return d->node;
}

/* Containers of the families indexed by minor (gpus[]): not those served
 * by the node's HAMi devices. */
static bool classic_container(const struct container_request *r, const struct node_state *n)
{
    return r->family && r->family->placement == GPU_PLACE_SHARES_OR_WHOLE && !hami_container_on(r, n);
}

static bool has_classic(const struct pod_info *p, const struct node_state *n)
{
    for (int i = 0; i < p->ncontainers; i++)
        if (classic_container(&p->containers[i], n))
            return true;
    return false;
}

/* Index annotations count only when they belong to the node the pod is on,
 * every GPU container names exactly the GPUs its request implies, and no GPU
 * taken whole is named twice (by one container or two): charging such a GPU
 * twice would leave a GPU the pod really uses looking free. Shares of
 * different containers on one GPU are fine. */
static bool indices_usable(const struct pod_info *p, const struct node_state *n)
{
    const struct pod_decision *d = &p->decision;
    if (d->node && strcmp(d->node, n->name) != 0)
        return false;
    if (d->nidx != p->ncontainers)
        return false;
    uint64_t whole = 0, shared = 0;
    for (int i = 0; i < p->ncontainers; i++) {
        const struct container_request *r = &p->containers[i];
        if (!classic_container(r, n))
            continue;
        int want = r->whole_gpus > 0 ? r->whole_gpus : 1;
        if (!d->idx[i] || d->idx_count[i] != want)
            return false;
        for (int k = 0; k < want; k++) {
            int slot = node_slot_of_minor(n, d->idx[i][k]);
            if (slot < 0)
                return false;
            uint64_t bit = 1ULL << slot;
            if ((whole & bit) || (r->whole_gpus > 0 && (shared & bit)))
                return false;
            if (r->whole_gpus > 0)
                whole |= bit;
            else
                shared |= bit;
        }
    }
    return true;
}

static int count_gpu_slots(const struct pod_info *p, const struct node_state *n)
{
    int total = 0;
    for (int i = 0; i < p->ncontainers; i++)
        if (classic_container(&p->containers[i], n))
            total += p->containers[i].whole_gpus > 0 ? p->containers[i].whole_gpus : 1;
    return total;
}

static void slot_share(const struct container_request *r, const struct gpu_state *g, struct slot_charge *sc)
{
    bool whole = r->whole_gpus > 0;
    sc->cores = whole ? 100 : r->cores;
    memset(sc->mem, 0, sizeof(sc->mem));
    int pool = r->family->memory_pool;
    if (pool >= 0)
        sc->mem[pool] = whole ? g->mem_total[pool] : r->memory;
}

static int attribute(struct pod_entry *e, const struct node_state *n)
{
    const struct pod_info *p = e->info;
    int total = count_gpu_slots(p, n);
    e->slots = calloc((size_t)total, sizeof(*e->slots));
    if (!e->slots)
        return -1;
    for (int i = 0; i < p->ncontainers; i++) {
        const struct container_request *r = &p->containers[i];
        if (!classic_container(r, n))
            continue;
        for (int k = 0; k < p->decision.idx_count[i]; k++) {
            struct slot_charge *sc = &e->slots[e->nslots++];
            sc->slot = node_slot_of_minor(n, p->decision.idx[i][k]);
            slot_share(r, &n->gpus[sc->slot], sc);
        }
    }
    return 0;
}

/* Without usable indices the pod's whole request is held against the node;
 * whole GPUs take the node's average per-GPU memory. */
static void unattribute(struct pod_entry *e, const struct node_state *n)
{
    const struct pod_info *p = e->info;
    struct node_usage *u = &e->unattributed;
    for (int i = 0; i < p->ncontainers; i++) {
        const struct container_request *r = &p->containers[i];
        if (!classic_container(r, n))
            continue;
        bool whole = r->whole_gpus > 0;
        u->cores += whole ? 100LL * r->whole_gpus : r->cores;
        int pool = r->family->memory_pool;
        if (pool < 0)
            continue;
        int64_t avg = n->spec && n->gpu_count ? node_spec_memory_offer(n->spec, pool) / n->gpu_count : 0;
        u->mem[pool] += whole ? avg * r->whole_gpus : r->memory;
    }
    u->pods = 1;
}

static struct node_state *node_get_or_placeholder(struct cluster_cache *c, const char *name)
{
    struct node_state *n = dict_get(&c->nodes, name);
    if (n)
        return n;
    /* node_state starts with a cache line of its own (node_fit). */
    n = aligned_alloc(_Alignof(struct node_state), sizeof(*n));
    if (n)
        memset(n, 0, sizeof(*n));
    c->nodes_epoch++;
    if (!n || !(n->name = strdup(name)) || dict_set(&c->nodes, name, n, NULL) != 0) {
        node_state_free(n);
        return NULL;
    }
    return n;
}

/* At most this many "holds nothing" lines per window, whatever the number
 * of pods (each pod is named once anyway). */
#define UNPROVEN_LOG_BURST 10
#define UNPROVEN_LOG_WINDOW_NS (10 * NS_PER_S)

/* Said once per pod (and rate-limited), under the write lock: an unbound
 * decision whose proof is not this service's holds no GPU. */
static void say_unproven(struct cluster_cache *c, struct pod_entry *e, int64_t now)
{
    if (e->unproven_said)
        return;
    e->unproven_said = true;
    if (now - c->unproven_window_ns >= UNPROVEN_LOG_WINDOW_NS) {
        if (c->unproven_quiet > 0)
            log_warn("%d more pods with unproven decisions held nothing (not logged one by one)", c->unproven_quiet);
        c->unproven_window_ns = now;
        c->unproven_said = c->unproven_quiet = 0;
    }
    if (c->unproven_said++ >= UNPROVEN_LOG_BURST) {
        c->unproven_quiet++;
        return;
    }
    log_warn("pod %s carries a decision for node %.253s that this service cannot prove it made (no valid %s): it "
             "holds no GPU, and the pod is fitted again when it is scheduled",
             e->info->key, e->info->decision.node, ANN_GQA_PROOF);
}

static int charge(struct cluster_cache *c, struct pod_entry *e, int64_t now)
{
    bool bound;
    int64_t expires;
    const char *target = charge_target(c, e->info, now, &bound, &expires);
    if (!target)
        return 0;
    if (!bound && c->cfg.decision_key && !decision_proven(c->cfg.decision_key, e->info)) {
        say_unproven(c, e, now);
        return 0;
    }
    struct node_state *n = node_get_or_placeholder(c, target);
    if (!n)
        return -1;
    if (!has_classic(e->info, n)) {
        /* only HAMi containers: nothing indexed by minor */
    } else if (indices_usable(e->info, n)) {
        if (attribute(e, n) != 0)
            return -1;
    } else {
        unattribute(e, n);
    }
    if (hami_occupancy_charge(e, n) != 0) {
        free(e->slots);
        e->slots = NULL;
        e->nslots = 0;
        memset(&e->unattributed, 0, sizeof(e->unattributed));
        return -1;
    }
    e->node = n;
    e->bound = bound;
    e->expires_ns = expires;
    e->node_prev = NULL;
    e->node_next = n->charged;
    if (n->charged)
        n->charged->node_prev = e;
    n->charged = e;
    n->charged_count++;
    apply_slots(n, e, +1);
    CHECK_NODE_CHARGES(n);
    if (!bound)
        assumed_link(c, e);
    return charge_usage(c, e, n);
}

/* ---- nodes ---------------------------------------------------------------- */

static int rebuild_gpus(struct node_state *n)
{
    const struct node_spec *s = n->spec;
    int count = s ? s->gpu_count : 0;
    struct gpu_state *gpus = count ? calloc((size_t)count, sizeof(*gpus)) : NULL;
    if (count && !gpus) {
        /* No GPU table: every charge lands unattributed, which is
         * consistent (and safe) until the node is applied again. */
        free(n->gpus);
        n->gpus = NULL;
        n->gpu_count = 0;
        memset(&n->unattributed, 0, sizeof(n->unattributed));
        free_family_states(n);
        node_fit_refresh(n);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        gpus[i].minor = s->gpus[i].minor;
        gpus[i].numa = s->gpus[i].numa;
        memcpy(gpus[i].mem_total, s->gpus[i].memory, sizeof(gpus[i].mem_total));
    }
    if (hami_occupancy_reset(n) != 0) {
        free(gpus);
        node_fit_refresh(n);
        return -1;
    }
    int rc = reset_family_states(n);
    free(n->gpus);
    n->gpus = gpus;
    n->gpu_count = count;
    memset(&n->unattributed, 0, sizeof(n->unattributed));
    node_fit_refresh(n);
    return rc;
}

/* A node's shape (GPU count, minors, memory) decides where its pods' charges
 * land, so every pod charged there is re-charged against the new shape. */
static int recharge_node(struct cluster_cache *c, struct node_state *n, struct node_spec *spec)
{
    int64_t now = clock_realtime_ns();
    struct pod_entry *pods = NULL;
    n->present = true; /* keeps a placeholder alive while it empties */
    while (n->charged) {
        struct pod_entry *e = n->charged;
        uncharge(c, e);
        e->node_next = pods;
        pods = e;
    }
    node_spec_free(n->spec);
    n->spec = spec;
    n->present = spec != NULL;
    int rc = rebuild_gpus(n);
    while (pods) {
        struct pod_entry *e = pods;
        pods = e->node_next;
        e->node_next = NULL;
        if (charge(c, e, now) != 0)
            rc = -1;
    }
    return rc;
}

static int apply_node_locked(struct cluster_cache *c, struct node_spec *spec)
{
    struct node_state *n = node_get_or_placeholder(c, spec->name);
    if (!n) {
        node_spec_free(spec);
        return -1;
    }
    if (!n->present)
        c->present_nodes++;
    c->generation++;
    return recharge_node(c, n, spec);
}

int cache_apply_node(struct cluster_cache *c, struct node_spec *spec)
{
    cache_write_lock(c);
    int rc = apply_node_locked(c, spec);
    cache_unlock(c);
    return rc;
}

static int delete_node_locked(struct cluster_cache *c, const char *name);

int cache_delete_node(struct cluster_cache *c, const char *name)
{
    cache_write_lock(c);
    int rc = delete_node_locked(c, name);
    cache_unlock(c);
    return rc;
}

static int delete_node_locked(struct cluster_cache *c, const char *name)
{
    struct node_state *n = dict_get(&c->nodes, name);
    int rc = 0;
    if (n && n->present) {
        c->present_nodes--;
        if (n->charged) {
            /* Pods still bound there keep a (now unattributed) charge until
             * their own deletion arrives. Assumptions that ended meanwhile
             * are not re-charged; then nothing needs the placeholder. */
            rc = recharge_node(c, n, NULL);
            drop_placeholder_if_unused(c, n);
        } else {
            dict_del(&c->nodes, name);
            node_state_free(n);
            c->nodes_epoch++;
        }
        c->generation++;
    }
    return rc;
}

/* ---- pods ----------------------------------------------------------------- */

int cache_apply_pod(struct cluster_cache *c, struct pod_info *pod, int64_t now)
{
    cache_write_lock(c);
    int rc = cache_apply_pod_locked(c, pod, now);
    cache_unlock(c);
    return rc;
}

static bool same_uid(const struct pod_info *a, const struct pod_info *b)
{
    return !a->uid || !b->uid || strcmp(a->uid, b->uid) == 0;
}

static void drop_reservation(struct pod_entry *e)
{
    pod_info_free(e->unreserved);
    e->unreserved = NULL;
    e->reservation = 0;
    e->unconfirmed = false;
}

/* Does the update carry the reserved decision itself (its write landed)? */
static bool carries_decision(const struct pod_info *pod, const struct pod_decision *reserved)
{
    const struct pod_decision *d = &pod->decision;
    return d->node && reserved->node && d->time_ns == reserved->time_ns && strcmp(d->node, reserved->node) == 0;
}

/* An update of a reserved pod that does not know of the decision yet keeps
 * it: the entry holds the update with the reserved decision, and the update
 * itself is what an undo would go back to. Only the decision itself (the
 * write landed), another UID, a binding, the pod's end or deletion end the
 * reservation: an update that still carries an earlier decision (a label,
 * kube-scheduler's PodScheduled condition, during the write) is as unaware
 * as one without, and so is any other decision (the write in flight
 * settles it: it lands, or fails and is cancelled). Returns the pod to
 * apply (pod, or the merged copy). */
/* pod with the decision (and its proof and HAMi devices) of old's, or NULL
 * when memory ran out. */
static struct pod_info *with_decision_of(const struct pod_entry *old, const struct pod_info *pod)
{
    const struct pod_decision *d = &old->info->decision;
    struct pod_info *merged = pod_info_with_decision(pod, d->node, d->time_ns, d->idx, d->idx_count);
    if (merged && d->proof && !(merged->decision.proof = strdup(d->proof))) {
        pod_info_free(merged);
        merged = NULL;
    }
    if (merged && merged->hami && old->info->hami && hami_pod_keep_alloc(merged->hami, old->info->hami) != 0) {
        pod_info_free(merged);
        merged = NULL;
    }
    if (merged)
        merged->decision.assigned = d->assigned;
    return merged;
}

static struct pod_info *keep_reservation(struct pod_entry *old, struct pod_info *pod)
{
    const struct pod_decision *d = &old->info->decision;
    bool unaware = same_uid(old->info, pod) && !pod->node_name && !pod->terminal && !carries_decision(pod, d);
    struct pod_info *merged = unaware ? with_decision_of(old, pod) : NULL;
    if (!merged) {
        drop_reservation(old);
        return pod;
    }
    pod_info_free(old->unreserved);
    old->unreserved = pod;
    return merged;
}

/* A proven decision the cache holds (charged, unbound) is not given up by an
 * update that drops or alters it without a proof of its own (the pod's
 * creator editing its annotations before the binding): only a new proven
 * decision, another UID, a binding, the pod's end, its deletion, the
 * ceiling or this service's own release (cache_release_hold) end it. */
static bool keeps_hold(const struct cluster_cache *c, const struct pod_entry *old, const struct pod_info *pod)
{
    if (!c->cfg.decision_key || !old->node || old->bound || old->reservation)
        return false;
    if (!same_uid(old->info, pod) || pod->node_name || pod->terminal)
        return false;
    if (old->released_ns && old->released_ns == old->info->decision.time_ns)
        return false;
    return !(pod->decision.node && decision_proven(c->cfg.decision_key, pod));
}

static struct pod_info *keep_hold(struct cluster_cache *c, struct pod_entry *old, struct pod_info *pod)
{
    if (!keeps_hold(c, old, pod))
        return pod;
    struct pod_info *merged = with_decision_of(old, pod);
    if (!merged)
        return pod; /* out of memory: the update as it is */
    log_warn("pod %s: an update took its decision for node %.253s off or changed it without a proof; the decision "
             "keeps its GPUs until the pod is bound, deleted or decided again",
             old->info->key, old->info->decision.node);
    pod_info_free(pod);
    return merged;
}

/* Apply pod; keep: an update from the cluster (reservations and holds are
 * kept over it), else the cache's own undo of a reservation. */
static int apply_pod(struct cluster_cache *c, struct pod_info *pod, int64_t now, bool keep)
{
    struct pod_entry *fresh = calloc(1, sizeof(*fresh));
    if (!fresh) {
        pod_info_free(pod);
        return -1;
    }
    struct pod_entry *old = dict_get(&c->pods, pod->key);
    if (old && old->reservation)
        pod = keep_reservation(old, pod);
    else if (old && keep)
        pod = keep_hold(c, old, pod);
    fresh->info = pod;
    int rc = 0;
    if (old) {
        uncharge(c, old);
        pod_info_free(old->info);
        old->info = pod;
        free(fresh);
        fresh = old;
    } else if (dict_set(&c->pods, pod->key, fresh, NULL) != 0) {
        rc = -1;
    }
    c->generation++;
    if (rc == 0) {
        fresh->applied_at = c->generation;
        rc = charge(c, fresh, now);
    } else {
        pod_entry_free(fresh);
    }
    return rc;
}

int cache_apply_pod_locked(struct cluster_cache *c, struct pod_info *pod, int64_t now)
{
    return apply_pod(c, pod, now, true);
}

void cache_delete_pod_locked(struct cluster_cache *c, const char *key)
{
    struct pod_entry *e = dict_del(&c->pods, key);
    if (e) {
        uncharge(c, e);
        pod_entry_free(e);
        c->generation++;
    }
}

int cache_delete_pod(struct cluster_cache *c, const char *key)
{
    cache_write_lock(c);
    cache_delete_pod_locked(c, key);
    cache_unlock(c);
    return 0;
}

uint64_t cache_reserve_pod_locked(struct cluster_cache *c, struct pod_info *decided, int64_t now)
{
    char *key = strdup(decided->key);
    struct pod_entry *e = key ? dict_get(&c->pods, key) : NULL;
    struct pod_info *before = NULL;
    if (!key || (e && !e->reservation && !(before = pod_info_clone(e->info)))) {
        free(key);
        pod_info_free(decided);
        return 0;
    }
    if (e && e->reservation) { /* still reserved: what that replaced is the truth */
        before = e->unreserved;
        e->unreserved = NULL;
        e->reservation = 0;
        e->unconfirmed = false;
    }
    uint64_t token = 0;
    if (cache_apply_pod_locked(c, decided, now) == 0 && (e = dict_get(&c->pods, key))) {
        token = e->reservation = e->applied_at;
        e->unreserved = before;
        e->unconfirmed = false;
    } else if (!before) { /* out of memory: put back what was there */
        cache_delete_pod_locked(c, key);
    } else if (apply_pod(c, before, now, false) != 0) {
        log_error("pod %s: could not restore its cache entry (out of memory)", key);
    }
    free(key);
    return token;
}

void cache_cancel_reservation(struct cluster_cache *c, const char *key, uint64_t token)
{
    cache_write_lock(c);
    struct pod_entry *e = dict_get(&c->pods, key);
    if (e && token && e->reservation == token) {
        struct pod_info *before = e->unreserved;
        e->unreserved = NULL;
        e->reservation = 0;
        e->unconfirmed = false;
        if (!before)
            cache_delete_pod_locked(c, key);
        else if (apply_pod(c, before, clock_realtime_ns(), false) != 0)
            log_error("pod %s: could not take back an unwritten decision (out of memory)", key);
    }
    cache_unlock(c);
}

void cache_release_hold(struct cluster_cache *c, const char *key)
{
    cache_write_lock(c);
    struct pod_entry *e = dict_get(&c->pods, key);
    if (e && e->info->decision.node)
        e->released_ns = e->info->decision.time_ns;
    cache_unlock(c);
}

void cache_reservation_unconfirmed(struct cluster_cache *c, const char *key, uint64_t token)
{
    cache_write_lock(c);
    struct pod_entry *e = dict_get(&c->pods, key);
    if (e && token && e->reservation == token)
        e->unconfirmed = true;
    cache_unlock(c);
}

void cache_expire(struct cluster_cache *c, int64_t now)
{
    if (__atomic_load_n(&c->next_expiry_ns, __ATOMIC_RELAXED) > now)
        return;
    cache_write_lock(c);
    int64_t next = INT64_MAX;
    struct pod_entry *e = c->assumed;
    while (e) {
        struct pod_entry *following = e->assumed_next;
        if (e->expires_ns <= now) {
            log_debug("assumption of %s on %s expired", e->info->key, e->node->name);
            uncharge(c, e);
            c->generation++;
        } else if (e->expires_ns < next) {
            next = e->expires_ns;
        }
        e = following;
    }
    /* Read without the lock by cache_expire's fast path, hence atomic. */
    __atomic_store_n(&c->next_expiry_ns, next, __ATOMIC_RELAXED);
    cache_unlock(c);
}

/* ---- ConfigMaps ----------------------------------------------------------- */

static char *object_key(const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    if (!cJSON_IsString(name))
        return NULL;
    const char *nss = cJSON_IsString(ns) ? ns->valuestring : "default";
    size_t len = strlen(nss) + strlen(name->valuestring) + 2;
    char *key = malloc(len);
    if (key)
        snprintf(key, len, "%s/%s", nss, name->valuestring);
    return key;
}

static void configmaps_changed(struct cluster_cache *c)
{
    if (c->cfg.configmaps_changed)
        c->cfg.configmaps_changed(c->cfg.ctx, c);
}

static int apply_configmap_locked(struct cluster_cache *c, cJSON *cm)
{
    char *key = object_key(cm);
    if (!key) {
        cJSON_Delete(cm);
        return -1;
    }
    void *old = NULL;
    int rc = dict_set(&c->configmaps, key, cm, &old);
    c->generation++;
    if (rc != 0)
        cJSON_Delete(cm);
    cJSON_Delete(old);
    free(key);
    return rc;
}

int cache_apply_configmap(struct cluster_cache *c, cJSON *cm)
{
    cache_write_lock(c);
    int rc = apply_configmap_locked(c, cm);
    configmaps_changed(c);
    cache_unlock(c);
    return rc;
}

int cache_delete_configmap(struct cluster_cache *c, const char *ns, const char *name)
{
    size_t len = strlen(ns) + strlen(name) + 2;
    char *key = malloc(len);
    if (!key)
        return -1;
    snprintf(key, len, "%s/%s", ns, name);
    cache_write_lock(c);
    cJSON *old = dict_del(&c->configmaps, key);
    c->generation++;
    if (old)
        configmaps_changed(c);
    cache_unlock(c);
    cJSON_Delete(old);
    free(key);
    return 0;
}

/* ---- loaders -------------------------------------------------------------- */

struct pod_info *cache_pod_from_json(struct cluster_cache *c, cJSON *pod, char **err)
{
    if (c->cfg.prepare_pod && cJSON_IsObject(pod)) {
        cache_read_lock(c);
        c->cfg.prepare_pod(c->cfg.ctx, pod);
        cache_unlock(c);
    }
    return pod_info_from_json(pod, err);
}

bool cache_prepares_pods(struct cluster_cache *c)
{
    if (!c->cfg.prepare_pod)
        return false;
    if (!c->cfg.prepares_pods)
        return true;
    cache_read_lock(c);
    bool prepares = c->cfg.prepares_pods(c->cfg.ctx);
    cache_unlock(c);
    return prepares;
}

int cache_apply_object(struct cluster_cache *c, cJSON *obj, int64_t now, char **err)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
    const char *k = cJSON_IsString(kind) ? kind->valuestring : "";
    if (strcmp(k, "Node") == 0) {
        struct node_spec *spec = node_spec_from_json(obj, err);
        return !spec ? -1 : cache_apply_node(c, spec) == 0 ? 1 : -1;
    }
    if (strcmp(k, "Pod") == 0) {
        struct pod_info *pod = cache_pod_from_json(c, obj, err);
        return !pod ? -1 : cache_apply_pod(c, pod, now) == 0 ? 1 : -1;
    }
    if (strcmp(k, "ConfigMap") == 0) {
        cJSON *copy = cJSON_Duplicate(obj, 1);
        char *key = object_key(obj);
        int ok = copy && key;
        free(key);
        if (!ok) {
            cJSON_Delete(copy);
            if (err)
                *err = strdup("configmap has no metadata.name");
            return -1;
        }
        return cache_apply_configmap(c, copy) == 0 ? 1 : -1;
    }
    return 0;
}

/* ---- relists -------------------------------------------------------------- */

/* What a relist of one kind needs to know. Items are the kind's parsed
 * objects (node_spec, pod_info, cJSON ConfigMap). */
struct relist_kind {
    size_t table;                                                   /* offsetof the kind's dict in the cache */
    char *(*key_of)(const void *item);                              /* malloc'd, NULL on OOM */
    bool (*held)(const struct dict_entry *e, const void *scope);    /* an entry this relist replaces */
    int (*remove)(struct cluster_cache *c, const char *key);        /* 0, or -1 when memory ran out */
    int (*apply)(struct cluster_cache *c, void *item, int64_t now); /* takes item, also on failure */
    void (*free_item)(void *item);
    void (*changed)(struct cluster_cache *c); /* under the same lock, after; may be NULL */
};

/* Keys of held entries that the new list does not mention, collected before
 * any deletion (deleting while iterating a dict is not allowed). */
static char **stale_keys(const struct dict *have, const struct dict *keep, const struct relist_kind *k,
                         const void *scope, size_t *count)
{
    size_t n = 0, pos = 0;
    char **keys = calloc(dict_size(have) + 1, sizeof(*keys));
    struct dict_entry *e;
    while (keys && (e = dict_next(have, &pos))) {
        if (!k->held(e, scope) || dict_get(keep, e->key))
            continue;
        if (!(keys[n++] = strdup(e->key))) {
            for (size_t i = 0; i + 1 < n; i++)
                free(keys[i]);
            free(keys);
            return NULL;
        }
    }
    *count = n;
    return keys;
}

static void free_keys(char **keys, size_t n)
{
    for (size_t i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
}

/* The names of the new list, so that what it no longer holds can be found.
 * An item without a name (key_of gives NULL) cannot be told apart from the
 * others: it is freed and counted, the rest are listed. -1 only when the
 * index itself cannot be built. */
static int index_items(struct dict *keep, const struct relist_kind *k, void **items, size_t n, size_t *skipped)
{
    if (dict_init(keep, n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char *key = k->key_of(items[i]);
        if (!key) {
            k->free_item(items[i]);
            items[i] = NULL;
            (*skipped)++;
            continue;
        }
        int rc = dict_set(keep, key, items[i], NULL);
        free(key);
        if (rc != 0) {
            dict_free(keep);
            return -1;
        }
    }
    return 0;
}

/* Make the kind hold exactly items[0..n) under one write lock: readers see
 * the old set or the new one, never a mix, and nothing twice. One item that
 * cannot be applied is skipped and counted; it never fails the others. */
static int relist(struct cluster_cache *c, const struct relist_kind *k, void **items, size_t n, const void *scope,
                  int64_t now)
{
    struct dict keep;
    size_t skipped = 0;
    if (index_items(&keep, k, items, n, &skipped) != 0) {
        for (size_t i = 0; i < n; i++)
            if (items[i])
                k->free_item(items[i]);
        return -1;
    }
    cache_write_lock(c);
    size_t nstale = 0;
    char **stale = stale_keys((struct dict *)((char *)c + k->table), &keep, k, scope, &nstale);
    if (!stale) {
        /* Without the list of what went away the cache would keep it:
         * better to keep everything as it was and let the caller retry. */
        cache_unlock(c);
        dict_free(&keep);
        for (size_t i = 0; i < n; i++)
            if (items[i])
                k->free_item(items[i]);
        return -1;
    }
    for (size_t i = 0; i < nstale; i++)
        if (k->remove(c, stale[i]) != 0)
            log_error("relist: out of memory while removing %s", stale[i]);
    for (size_t i = 0; i < n; i++)
        if (items[i] && k->apply(c, items[i], now) != 0)
            skipped++;
    if (k->changed)
        k->changed(c);
    cache_unlock(c);
    free_keys(stale, nstale);
    dict_free(&keep);
    return skipped > (size_t)INT32_MAX ? INT32_MAX : (int)skipped;
}

static char *node_key(const void *item)
{
    return strdup(((const struct node_spec *)item)->name);
}

/* Placeholders are not nodes the list could mention; only present ones go. */
static bool node_held(const struct dict_entry *e, const void *scope)
{
    (void)scope;
    return ((const struct node_state *)e->value)->present;
}

static int node_apply(struct cluster_cache *c, void *item, int64_t now)
{
    (void)now;
    return apply_node_locked(c, item);
}

static void node_free(void *item)
{
    node_spec_free(item);
}

int cache_replace_nodes(struct cluster_cache *c, struct node_spec **specs, size_t n)
{
    static const struct relist_kind nodes = {
        offsetof(struct cluster_cache, nodes), node_key, node_held, delete_node_locked, node_apply, node_free, NULL};
    return relist(c, &nodes, (void **)specs, n, NULL, 0);
}

static char *pod_key(const void *item)
{
    return strdup(((const struct pod_info *)item)->key);
}

static bool every_entry(const struct dict_entry *e, const void *scope)
{
    (void)e;
    (void)scope;
    return true;
}

static int pod_remove(struct cluster_cache *c, const char *key)
{
    cache_delete_pod_locked(c, key);
    return 0;
}

static int pod_apply(struct cluster_cache *c, void *item, int64_t now)
{
    return cache_apply_pod_locked(c, item, now);
}

static void pod_free(void *item)
{
    pod_info_free(item);
}

int cache_replace_pods(struct cluster_cache *c, struct pod_info **pods, size_t n, int64_t now)
{
    static const struct relist_kind pods_kind = {
        offsetof(struct cluster_cache, pods), pod_key, every_entry, pod_remove, pod_apply, pod_free, NULL};
    return relist(c, &pods_kind, (void **)pods, n, NULL, now);
}

struct cm_scope {
    const char *ns;
    const char *name;
};

static char *configmap_key(const void *item)
{
    return object_key(item);
}

/* The namespace relisted, or (name given) just that one object. */
static bool configmap_held(const struct dict_entry *e, const void *scope)
{
    const struct cm_scope *s = scope;
    size_t nl = strlen(s->ns);
    if (strncmp(e->key, s->ns, nl) != 0 || e->key[nl] != '/')
        return false;
    return !s->name || strcmp(e->key + nl + 1, s->name) == 0;
}

static int configmap_remove(struct cluster_cache *c, const char *key)
{
    cJSON_Delete(dict_del(&c->configmaps, key));
    c->generation++;
    return 0;
}

static int configmap_apply(struct cluster_cache *c, void *item, int64_t now)
{
    (void)now;
    return apply_configmap_locked(c, item);
}

static void configmap_free(void *item)
{
    cJSON_Delete(item);
}

int cache_replace_configmaps(struct cluster_cache *c, const char *ns, const char *name, cJSON **cms, size_t n)
{
    /* Derived state (CRLs, quota) changes in the same step as the ConfigMaps. */
    static const struct relist_kind configmaps = {offsetof(struct cluster_cache, configmaps),
                                                  configmap_key,
                                                  configmap_held,
                                                  configmap_remove,
                                                  configmap_apply,
                                                  configmap_free,
                                                  configmaps_changed};
    struct cm_scope scope = {ns, name};
    return relist(c, &configmaps, (void **)cms, n, &scope, 0);
}
