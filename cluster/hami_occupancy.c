/* hami_occupancy.c - HAMi devices in the cache's occupancy index. See hami_occupancy.h. */
#include "cluster/hami_occupancy.h"
#include "cluster/mig_hami.h"
#include "cluster/occupancy.h"
#include "cluster/podparts.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device table matches the spec (a failed rebuild leaves it empty). */
static const struct hami_node *devices_of(const struct node_state *n)
{
    const struct hami_node *h = n->hami && n->spec ? n->spec->hami : NULL;
    return h && n->hami->count == h->count ? h : NULL;
}

int hami_occupancy_reset(struct node_state *n)
{
    const struct hami_node *h = n->spec ? n->spec->hami : NULL;
    free(n->hami);
    n->hami = NULL;
    if (!h)
        return 0;
    bool mig = hami_node_has_mig(h);
    /* The MIG table lives in the same block (after gpus[], whose entries
     * keep it aligned), so the cache frees both with one free(). */
    size_t gpus_size = sizeof(n->hami->gpus[0]) * (size_t)h->count;
    n->hami = calloc(1, sizeof(*n->hami) + gpus_size + (mig ? sizeof(struct hami_mig_use) * (size_t)h->count : 0));
    if (!n->hami)
        return -1;
    if (mig)
        n->hami->mig = (struct hami_mig_use *)((char *)n->hami->gpus + gpus_size);
    for (int i = 0; i < h->count; i++) {
        const struct hami_device *d = &h->devices[i];
        n->hami->gpus[i] = (struct hami_gpu_state){.split = d->split,
                                                   .cores = d->cores,
                                                   .memory_mib = d->memory_mib,
                                                   .inv_split = d->inv_split,
                                                   .inv_memory = d->inv_memory,
                                                   .inv_cores = d->inv_cores};
    }
    n->hami->count = h->count;
    return 0;
}

/* The device a UUID of an allocation names; MIG instances are written as
 * "GPU-...[t-i]" and belong to their GPU. */
static int device_of(const struct hami_node *h, const char *uuid)
{
    size_t n = strcspn(uuid, "[");
    for (int i = 0; i < h->count; i++)
        if (strncmp(h->devices[i].uuid, uuid, n) == 0 && h->devices[i].uuid[n] == '\0')
            return i;
    return -1;
}

/* Each device of entry c is one of the node's, none twice. */
static bool entry_on_node(const struct hami_alloc_container *c, const struct hami_node *h)
{
    uint64_t seen = 0;
    for (int k = 0; k < c->count; k++) {
        int d = device_of(h, c->devices[k].uuid);
        if (d < 0 || (seen >> d & 1))
            return false;
        seen |= 1ULL << d;
    }
    return true;
}

/* The entry of containers[i] in an allocation of `entries`: HAMi v2.9's
 * layout (init containers first) or the older one (app containers only,
 * where a placed init container has none). -1 when it has none. */
static int entry_of(const struct pod_info *p, int i, int entries)
{
    if (entries == pod_hami_entries(p))
        return pod_hami_entry(p, i);
    return p->containers[i].init_slot == 0 ? i : -1;
}

/* The allocation counts when it is for this node, lists every container
 * (in either layout), gives each HAMi container exactly its vGPUs on
 * distinct devices of the node, and nothing to the others; an init
 * container the service does not place may have devices of the node (HAMi
 * lists them; they are charged as HAMi charges them). */
static bool allocation_matches(const struct pod_info *p, const struct node_state *n, const struct hami_node *h)
{
    const struct hami_alloc *a = &p->hami->alloc;
    if (!p->hami->has_alloc || (a->ncontainers != pod_hami_entries(p) && a->ncontainers != pod_app_containers(p)))
        return false;
    if (p->decision.node && strcmp(p->decision.node, n->name) != 0)
        return false;
    uint64_t mapped[(HAMI_ALLOC_ENTRIES_MAX + 63) / 64] = {0};
    if (a->ncontainers > HAMI_ALLOC_ENTRIES_MAX)
        return false;
    for (int i = 0; i < p->ncontainers; i++) {
        int e = entry_of(p, i, a->ncontainers);
        int want = hami_container_on(&p->containers[i], n) ? p->containers[i].hami.nums : 0;
        if (e < 0 && want > 0)
            return false;
        if (e < 0)
            continue;
        mapped[e / 64] |= 1ULL << (e % 64);
        if (a->containers[e].count != want || !entry_on_node(&a->containers[e], h))
            return false;
    }
    for (int e = 0; e < a->ncontainers; e++)
        if (!(mapped[e / 64] >> (e % 64) & 1) && !entry_on_node(&a->containers[e], h))
            return false;
    return true;
}

/* ---- MIG instances ------------------------------------------------------------------ */

static uint32_t inst_mask(struct hami_mig_inst i)
{
    return i.size <= 0 ? 0 : (uint32_t)(((1ULL << i.size) - 1) << i.start);
}

bool hami_mig_free(const struct hami_mig_use *u, struct hami_mig_inst inst)
{
    if (u->n >= MIG_MAX_INUSE)
        return false;
    for (int k = 0; k < u->n; k++)
        if (inst_mask(u->inst[k]) & inst_mask(inst))
            return false;
    return true;
}

void hami_mig_add(struct hami_mig_use *u, struct hami_mig_inst inst)
{
    if (u->n < MIG_MAX_INUSE)
        u->inst[u->n++] = inst;
}

void hami_mig_remove(struct hami_mig_use *u, struct hami_mig_inst inst)
{
    for (int k = 0; k < u->n; k++)
        if (u->inst[k].tmpl == inst.tmpl && u->inst[k].start == inst.start && u->inst[k].size == inst.size) {
            u->inst[k] = u->inst[--u->n];
            return;
        }
}

void hami_mig_gpu(const struct mig_gpu *templates, const struct hami_mig_use *u, struct mig_gpu *out)
{
    out->ntemplates = templates->ntemplates;
    memcpy(out->templates, templates->templates, sizeof(out->templates[0]) * (size_t)templates->ntemplates);
    out->ninuse = 0;
    for (int k = 0; u && k < u->n && k < MIG_MAX_INUSE; k++) {
        struct mig_instance *m = &out->inuse[out->ninuse++];
        snprintf(m->profile, sizeof(m->profile), "%s", templates->templates[u->inst[k].tmpl].name);
        m->at = (struct mig_placement){u->inst[k].start, u->inst[k].size};
    }
}

double hami_mig_node_fragmentation(const struct node_state *n, int *devices)
{
    *devices = 0;
    const struct hami_node *h = devices_of(n);
    if (!h || !n->hami->mig)
        return 0;
    double worst = 0;
    for (int d = 0; d < h->count; d++) {
        if (!h->devices[d].mig)
            continue;
        struct mig_gpu g;
        hami_mig_gpu(h->devices[d].mig, &n->hami->mig[d], &g);
        double f = mig_fragmentation(&g);
        worst = f > worst ? f : worst;
        (*devices)++;
    }
    return worst;
}

/* The MIG instance the pod's hami.io/vgpu-mig-allocations gives HAMi entry
 * `entry`'s vGPU `k` on device dev: its profile must be one of the
 * device's, its placement one of that profile's, and it must overlap no
 * instance in use on the node nor one this pod took earlier (slots[0..n)).
 * tmpl -1 otherwise: the pod is then charged memory and cores only. */
static struct hami_mig_inst mig_of(const struct pod_info *p, const struct node_state *n, const struct hami_node *h,
                                   int dev, int entry, int k, const struct hami_charge *slots, int nslots)
{
    struct hami_mig_inst none = {.tmpl = -1};
    const struct mig_gpu *g = h->devices[dev].mig;
    if (!g || !n->hami->mig)
        return none;
    const struct mig_hami_allocation *a = NULL;
    for (int i = 0; i < p->hami->nmig && !a; i++) {
        const struct mig_hami_allocation *m = &p->hami->mig[i];
        if (m->container_index == entry && m->device_index == k && strcmp(m->gpu_uuid, h->devices[dev].uuid) == 0)
            a = m;
    }
    if (!a)
        return none;
    for (int t = 0; t < g->ntemplates; t++) {
        if (strcmp(g->templates[t].name, a->profile) != 0)
            continue;
        for (int q = 0; q < g->templates[t].nplacements; q++) {
            struct mig_placement pl = g->templates[t].placements[q];
            if (pl.start != a->placement.start || pl.size != a->placement.size)
                continue;
            struct hami_mig_inst inst = {(int16_t)t, (int8_t)pl.start, (int8_t)pl.size};
            struct hami_mig_use mine = {0};
            for (int s = 0; s < nslots; s++)
                if (slots[s].dev == dev && slots[s].mig.tmpl >= 0)
                    hami_mig_add(&mine, slots[s].mig);
            return hami_mig_free(&n->hami->mig[dev], inst) && hami_mig_free(&mine, inst) ? inst : none;
        }
    }
    return none;
}

static int attribute(struct pod_entry *e, const struct node_state *n, const struct hami_node *h)
{
    const struct hami_alloc *a = &e->info->hami->alloc;
    int total = 0;
    for (int i = 0; i < a->ncontainers; i++)
        total += a->containers[i].count;
    struct hami_pod_charge *c = calloc(1, sizeof(*c) + sizeof(c->slots[0]) * (size_t)total);
    if (!c)
        return -1;
    for (int i = 0; i < a->ncontainers; i++)
        for (int k = 0; k < a->containers[i].count; k++) {
            const struct hami_alloc_device *d = &a->containers[i].devices[k];
            int dev = device_of(h, d->uuid);
            struct hami_mig_inst mig = mig_of(e->info, n, h, dev, i, k, c->slots, c->nslots);
            c->slots[c->nslots++] = (struct hami_charge){dev, mig, d->memory_mib, d->cores};
        }
    e->hami_charge = c;
    return 0;
}

static int64_t average_memory(const struct hami_node *h)
{
    int64_t sum = 0;
    for (int i = 0; h && i < h->count; i++)
        sum += h->devices[i].memory_mib;
    return h && h->count ? sum / h->count : 0;
}

/* Without a usable allocation the pod's vGPUs are held against the node;
 * percentages take the node's average GPU memory. */
static int unattribute(struct pod_entry *e, const struct node_state *n)
{
    const struct pod_info *p = e->info;
    int64_t avg = average_memory(n->spec->hami);
    if (!(e->hami_charge = calloc(1, sizeof(*e->hami_charge))))
        return -1;
    struct hami_usage *u = &e->hami_charge->unattributed;
    for (int i = 0; i < p->ncontainers; i++) {
        const struct container_request *r = &p->containers[i];
        if (!hami_container_on(r, n))
            continue;
        u->vgpus += r->hami.nums;
        u->memory_mib += r->hami.nums * hami_request_memory(&r->hami, avg);
        u->cores += (int64_t)r->hami.nums * r->hami.cores;
    }
    u->pods = 1;
    return 0;
}

int hami_occupancy_charge(struct pod_entry *e, const struct node_state *n)
{
    const struct pod_info *p = e->info;
    if (!p->hami || !hami_node_is(n))
        return 0;
    bool any = false;
    for (int i = 0; i < p->ncontainers && !any; i++)
        any = hami_container_on(&p->containers[i], n);
    if (!any)
        return 0;
    const struct hami_node *h = devices_of(n);
    if (h && allocation_matches(p, n, h))
        return attribute(e, n, h);
    return unattribute(e, n);
}

static void add_usage(struct hami_usage *to, const struct hami_usage *u, int sign)
{
    to->vgpus += sign * u->vgpus;
    to->memory_mib += sign * u->memory_mib;
    to->cores += sign * u->cores;
    to->pods += sign * u->pods;
}

void hami_occupancy_apply(struct node_state *n, const struct pod_entry *e, int sign)
{
    const struct hami_pod_charge *pc = e->hami_charge;
    if (!pc || !n->hami)
        return;
    for (int i = 0; i < pc->nslots; i++) {
        const struct hami_charge *c = &pc->slots[i];
        struct hami_gpu_state *g = &n->hami->gpus[c->dev];
        g->tasks += sign;
        g->memory_used += sign * c->memory_mib;
        g->cores_used += sign * c->cores;
        if (c->mig.tmpl >= 0 && n->hami->mig && sign > 0)
            hami_mig_add(&n->hami->mig[c->dev], c->mig);
        else if (c->mig.tmpl >= 0 && n->hami->mig)
            hami_mig_remove(&n->hami->mig[c->dev], c->mig);
    }
    add_usage(&n->hami->unattributed, &pc->unattributed, sign);
}

void hami_occupancy_forget(struct pod_entry *e)
{
    free(e->hami_charge);
    e->hami_charge = NULL;
}

void hami_occupancy_check(const struct node_state *n)
{
#ifndef NDEBUG
    struct hami_usage sum = {0};
    const struct hami_node_state *h = n->hami;
    for (const struct pod_entry *e = n->charged; e; e = e->node_next)
        if (e->hami_charge) {
            assert(h);
            add_usage(&sum, &e->hami_charge->unattributed, +1);
        }
    if (!h)
        return;
    for (int d = 0; d < h->count; d++) {
        struct hami_gpu_state g = {.tasks = 0};
        for (const struct pod_entry *e = n->charged; e; e = e->node_next)
            for (int i = 0; e->hami_charge && i < e->hami_charge->nslots; i++)
                if (e->hami_charge->slots[i].dev == d) {
                    g.tasks++;
                    g.memory_used += e->hami_charge->slots[i].memory_mib;
                    g.cores_used += e->hami_charge->slots[i].cores;
                }
        assert(g.tasks == h->gpus[d].tasks && g.memory_used == h->gpus[d].memory_used &&
               g.cores_used == h->gpus[d].cores_used);
        int instances = 0;
        for (const struct pod_entry *e = n->charged; e; e = e->node_next)
            for (int i = 0; e->hami_charge && i < e->hami_charge->nslots; i++)
                instances += e->hami_charge->slots[i].dev == d && e->hami_charge->slots[i].mig.tmpl >= 0;
        assert(instances == (h->mig ? h->mig[d].n : 0));
    }
    assert(sum.vgpus == h->unattributed.vgpus && sum.memory_mib == h->unattributed.memory_mib &&
           sum.cores == h->unattributed.cores && sum.pods == h->unattributed.pods);
#else
    (void)n;
#endif
}

int64_t hami_quota_cores(const struct pod_info *p, const struct node_state *n)
{
    int64_t avg = average_memory(hami_node_is(n) ? n->spec->hami : NULL), cores = 0;
    for (int i = 0; i < p->ncontainers; i++) {
        const struct container_request *r = &p->containers[i];
        if (!hami_container_on(r, n))
            continue;
        int64_t share = r->hami.memory_mib > 0 ? (avg > 0 ? (r->hami.memory_mib * 100 + avg - 1) / avg : 100)
                                               : r->hami.memory_percent;
        share = share > 100 ? 100 : share;
        cores += r->hami.nums * (share > r->hami.cores ? share : r->hami.cores);
    }
    return cores;
}

/* ---- /inspect/nodes --------------------------------------------------------------- */

/* Does the pod use HAMi device dev (-1: unattributed HAMi use)? */
static bool uses_device(const struct pod_entry *e, int dev)
{
    const struct hami_pod_charge *pc = e->hami_charge;
    bool hit = pc && dev < 0 && pc->unattributed.pods > 0;
    for (int i = 0; pc && i < pc->nslots && !hit; i++)
        hit = pc->slots[i].dev == dev;
    return hit;
}

static void put_pods(struct strbuf *sb, const struct node_state *n, int dev)
{
    cache_put_charged_keys(sb, n, uses_device, dev);
}

/* `,"mig":{...}` of a MIG-mode device with profiles: its profiles, the
 * instances in use and its fragmentation. */
static void put_mig(struct strbuf *sb, const struct node_state *n, int i)
{
    const struct mig_gpu *t = n->spec->hami->devices[i].mig;
    if (!t || !n->hami->mig)
        return;
    strbuf_puts(sb, ",\"mig\":{\"profiles\":[");
    for (int k = 0; k < t->ntemplates; k++) {
        strbuf_puts(sb, k ? "," : "");
        strbuf_json_string(sb, t->templates[k].name);
    }
    strbuf_puts(sb, "],\"instances\":[");
    const struct hami_mig_use *u = &n->hami->mig[i];
    for (int k = 0; k < u->n; k++) {
        strbuf_puts(sb, k ? ",{\"profile\":" : "{\"profile\":");
        strbuf_json_string(sb, t->templates[u->inst[k].tmpl].name);
        strbuf_printf(sb, ",\"start\":%d,\"size\":%d}", u->inst[k].start, u->inst[k].size);
    }
    struct mig_gpu g;
    hami_mig_gpu(t, u, &g);
    strbuf_printf(sb, "],\"fragmentation\":%.4f}", mig_fragmentation(&g));
}

static void put_device(struct strbuf *sb, const struct node_state *n, int i)
{
    const struct hami_device *d = &n->spec->hami->devices[i];
    const struct hami_gpu_state *g = &n->hami->gpus[i];
    strbuf_printf(sb, "%s{\"index\":%d,\"uuid\":", i ? "," : "", d->index);
    strbuf_json_string(sb, d->uuid);
    strbuf_puts(sb, ",\"type\":");
    strbuf_json_string(sb, d->type);
    strbuf_printf(sb,
                  ",\"mode\":\"%s\",\"healthy\":%s,\"cordoned\":%s,\"numa\":%d,\"tasks\":%d,\"split\":%d,"
                  "\"memoryUsedMiB\":%" PRId64 ",\"memoryTotalMiB\":%" PRId64 ",\"coreUsed\":%" PRId64
                  ",\"coreTotal\":%d,\"pods\":",
                  hami_mode_name(d->mode), d->healthy ? "true" : "false", d->cordoned ? "true" : "false", d->numa,
                  g->tasks, d->split, g->memory_used, d->memory_mib, g->cores_used, d->cores);
    put_pods(sb, n, i);
    put_mig(sb, n, i);
    strbuf_putc(sb, '}');
}

void hami_occupancy_json(struct strbuf *sb, const struct node_state *n, int64_t now_ns)
{
    if (!hami_node_is(n))
        return;
    const struct hami_node *h = n->spec->hami;
    char why[512];
    const char *unusable = hami_node_unusable(h, now_ns, why, sizeof(why));
    strbuf_printf(sb, ",\"hami\":{\"usable\":%s,\"reason\":", unusable ? "false" : "true");
    strbuf_json_string(sb, unusable ? unusable : "");
    strbuf_puts(sb, ",\"handshake\":");
    if (h->handshake_value)
        strbuf_json_string(sb, h->handshake_value);
    else
        strbuf_puts(sb, "null");
    strbuf_puts(sb, ",\"devices\":[");
    for (int i = 0; devices_of(n) && i < n->hami->count; i++)
        put_device(sb, n, i);
    const struct hami_usage *u = &n->hami->unattributed;
    strbuf_printf(sb,
                  "],\"unattributed\":{\"vgpus\":%" PRId64 ",\"memoryMiB\":%" PRId64 ",\"cores\":%" PRId64 ",\"pods\":",
                  u->vgpus, u->memory_mib, u->cores);
    put_pods(sb, n, -1);
    strbuf_puts(sb, "}}");
}
