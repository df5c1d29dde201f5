/*
 * family_mig.c - Multi-Instance GPU partitions as NVIDIA's device plugin
 * advertises them with the mixed strategy: nvidia.com/mig-<profile>
 * resources on the node, asked for by containers the same way. The device
 * plugin chooses the instances; this family counts them per node and
 * profile (what kube-scheduler's own fit also counts) so a pod goes where
 * its profile has free instances, is explained where it has none, is
 * charged in quota as its share of a GPU, and is shown. The family table
 * and its operations (cluster/family.h); the profile grammar and the
 * node's inventory are read by cluster/mig.c (docs/mig.md).
 *
 * Its node state (struct mig_units) belongs to the cache: changed under its
 * write lock, read under its read lock.
 */
#include "cluster/family.h"
#include "cluster/mig.h"
#include "cluster/nodespec.h"
#include "cluster/occupancy.h"
#include "cluster/podinfo.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct gpu_family gpu_family_mig;

/* Compute slices of the GPUs that have MIG (A100, H100, H200): a profile of
 * g slices is counted in quota as g/7 of a GPU. */
#define MIG_GPU_SLICES 7

/* Instances in use per profile of the node's inventory (spec->mig->profiles). */
struct mig_units {
    int nprofiles;
    int64_t used[MIG_MAX_NODE_PROFILES];
};

static bool mig_claims(const struct gpu_amounts *a)
{
    size_t plen = strlen(MIG_RESOURCE_PREFIX);
    for (int i = 0; i < a->nprefixed; i++)
        if (a->prefixed[i].value > 0 && strncmp(a->prefixed[i].name, MIG_RESOURCE_PREFIX, plen) == 0)
            return true;
    return false;
}

/* One profile per container: the device plugin would serve several, but a
 * container asking for two partition sizes is rare enough to refuse with a
 * reason rather than model. */
static int mig_classify(const struct gpu_amounts *a, struct container_request *c, struct strbuf *err)
{
    size_t plen = strlen(MIG_RESOURCE_PREFIX);
    struct mig_profile_name p;
    char why[128];
    for (int i = 0; i < a->nprefixed; i++) {
        const char *name = a->prefixed[i].name;
        if (a->prefixed[i].value <= 0 || strncmp(name, MIG_RESOURCE_PREFIX, plen) != 0)
            continue;
        if (c->instances > 0) {
            strbuf_printf(err,
                          "container \"%s\" asks for two MIG profiles (%s%s and %s); one per container is supported",
                          c->name, MIG_RESOURCE_PREFIX, c->profile, name);
            return -1;
        }
        if (mig_profile_parse_resource(name + plen, strlen(name + plen), &p, why, sizeof(why)) != 0) {
            strbuf_printf(err, "container \"%s\": %s is not a MIG profile: %s", c->name, name, why);
            return -1;
        }
        if (a->prefixed[i].value > MIG_MAX_REQUEST || strlen(p.resource) >= sizeof(c->profile)) {
            strbuf_printf(err, "container \"%s\" asks for %" PRId64 " %s; at most %d instances of a profile", c->name,
                          a->prefixed[i].value, name, MIG_MAX_REQUEST);
            return -1;
        }
        memcpy(c->profile, p.resource, strlen(p.resource) + 1);
        c->instances = a->prefixed[i].value;
        c->cores = (c->instances * p.slices * 100 + MIG_GPU_SLICES - 1) / MIG_GPU_SLICES;
    }
    return 0;
}

static bool mig_offered(const struct node_spec *s)
{
    if (!s->mig || s->mig->single)
        return false;
    return s->mig->nprofiles > 0;
}

static void mig_explain_not_offered(const char *container, struct strbuf *why)
{
    strbuf_printf(why, "node advertises no MIG instances (no %s<profile> resources); container \"%s\" asks for one",
                  MIG_RESOURCE_PREFIX, container);
}

/* ---- the node's units ---------------------------------------------------------- */

static int mig_node_reset(struct node_state *n, void **state)
{
    free(*state);
    *state = NULL;
    if (!n->spec || !mig_offered(n->spec))
        return 0;
    struct mig_units *u = calloc(1, sizeof(*u));
    if (!u)
        return -1;
    u->nprofiles = n->spec->mig->nprofiles;
    *state = u;
    return 0;
}

static void mig_node_free(void *state)
{
    free(state);
}

/* The profile's position in the node's inventory, or -1. */
static int profile_at(const struct node_state *n, const char *profile)
{
    const struct mig_node_profile *p = mig_node_find(n->spec->mig, profile);
    return p ? (int)(p - n->spec->mig->profiles) : -1;
}

/* A container for a profile the node does not advertise holds nothing
 * there: the device plugin could not have served it. */
static void mig_charge(void *state, const struct node_state *n, const struct container_request *r, int sign)
{
    struct mig_units *u = state;
    int at = profile_at(n, r->profile);
    if (at >= 0 && at < u->nprofiles)
        u->used[at] += sign * r->instances;
}

static int64_t allocatable_of(const struct mig_node_profile *p)
{
    return p->allocatable > 0 ? p->allocatable : 0;
}

/* Give back what the excluded pods hold of each profile on n. */
static void give_back(const struct node_state *n, const struct pod_entry *const *excluded, size_t nexcluded,
                      int64_t *used)
{
    for (size_t k = 0; k < nexcluded; k++) {
        const struct pod_entry *e = excluded[k];
        if (!e || e->node != n || !e->info)
            continue;
        for (int i = 0; i < e->info->ncontainers; i++) {
            const struct container_request *r = &e->info->containers[i];
            int at = r->family == &gpu_family_mig ? profile_at(n, r->profile) : -1;
            if (at >= 0)
                used[at] -= r->instances;
        }
    }
}

static void list_profiles(const struct mig_node *m, const int64_t *used, struct strbuf *why)
{
    int listed = 0;
    for (int i = 0; i < m->nprofiles; i++)
        if (allocatable_of(&m->profiles[i]) > 0)
            strbuf_printf(why, "%s%s %" PRId64 "/%" PRId64, listed++ ? ", " : "", m->profiles[i].profile.resource,
                          allocatable_of(&m->profiles[i]) - used[i], allocatable_of(&m->profiles[i]));
    if (!listed)
        strbuf_puts(why, "none");
}

static bool mig_fit_node(const void *state, const struct node_state *n, const struct pod_info *pod,
                         const struct pod_entry *const *excluded, size_t nexcluded, int *utilization,
                         struct strbuf *why)
{
    const struct mig_units *u = state;
    const struct mig_node *m = n->spec->mig;
    int64_t used[MIG_MAX_NODE_PROFILES];
    memcpy(used, u->used, sizeof(used));
    give_back(n, excluded, nexcluded, used);
    for (int i = 0; i < pod->ncontainers; i++) {
        const struct container_request *r = &pod->containers[i];
        if (r->family != &gpu_family_mig)
            continue;
        int at = profile_at(n, r->profile);
        if (at < 0 || allocatable_of(&m->profiles[at]) - used[at] < r->instances) {
            strbuf_printf(why, "container \"%s\" needs %" PRId64 " %s%s; free instances here: ", r->name, r->instances,
                          MIG_RESOURCE_PREFIX, r->profile);
            list_profiles(m, used, why);
            return false;
        }
        used[at] += r->instances;
    }
    int64_t in_use = 0, total = 0;
    for (int i = 0; i < m->nprofiles; i++) {
        in_use += used[i] > 0 ? used[i] : 0;
        total += allocatable_of(&m->profiles[i]);
    }
    *utilization = total > 0 ? (int)(in_use * 1000 / total) : 0;
    return true;
}

static void mig_units(const void *state, const struct node_state *n,
                      void (*put)(void *ctx, const char *resource, int64_t total, int64_t used), void *ctx)
{
    const struct mig_units *u = state;
    const struct mig_node *m = n->spec->mig;
    char name[sizeof(MIG_RESOURCE_PREFIX) + MIG_NAME_MAX];
    for (int i = 0; i < m->nprofiles && i < u->nprofiles; i++) {
        if (allocatable_of(&m->profiles[i]) == 0 && u->used[i] == 0)
            continue; /* a profile only labelled, never advertised */
        snprintf(name, sizeof(name), "%s%s", MIG_RESOURCE_PREFIX, m->profiles[i].profile.resource);
        put(ctx, name, allocatable_of(&m->profiles[i]), u->used[i]);
    }
}

/* A quota line may name a profile: "<node model>-MIG-<profile>", the
 * product GFD gives the profile's instances (docs/mig.md). */
static bool mig_quota_line(const struct node_spec *s, const struct container_request *r, char *buf, size_t size)
{
    if (!s->model || !r->profile[0])
        return false;
    struct mig_profile_name p;
    if (mig_profile_parse_resource(r->profile, strlen(r->profile), &p, NULL, 0) != 0)
        return false;
    int n = snprintf(buf, size, "%s-MIG-%s", s->model, p.canonical);
    return n > 0 && (size_t)n < size;
}

const struct gpu_family gpu_family_mig = {
    .name = "mig",
    .core_resource = MIG_RESOURCE_PREFIX "<profile>",
    .resource_prefix = MIG_RESOURCE_PREFIX,
    .kind = 3,
    .memory_pool = -1,
    .placement = GPU_PLACE_FAMILY,
    .claims = mig_claims,
    .classify = mig_classify,
    .offered = mig_offered,
    .explain_not_offered = mig_explain_not_offered,
    .node_reset = mig_node_reset,
    .node_free = mig_node_free,
    .charge = mig_charge,
    .fit_node = mig_fit_node,
    .units = mig_units,
    .quota_line = mig_quota_line,
};
