/* hami_decision.c - HAMi decisions as annotations; the node lock. See hami_decision.h. */
#include "cluster/hami_decision.h"
#include "cluster/podparts.h"
#include "lib/clock.h"
#include "lib/jsonset.h"
#include "lib/rfc3339.h"
#include "lib/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fill_container(const struct hami_node *h, const struct container_request *c, uint64_t mask,
                          struct hami_alloc_container *out)
{
    int n = __builtin_popcountll(mask);
    if (n == 0)
        return 0;
    if (!(out->devices = calloc((size_t)n, sizeof(*out->devices))))
        return -1;
    for (int d = 0; d < h->count; d++) {
        if (!(mask >> d & 1))
            continue;
        struct hami_alloc_device *a = &out->devices[out->count++];
        a->uuid = strdup(h->devices[d].uuid);
        a->vendor = strdup(HAMI_VENDOR);
        a->memory_mib = hami_request_memory(&c->hami, h->devices[d].memory_mib);
        a->cores = c->hami.cores;
        if (!a->uuid || !a->vendor)
            return -1;
    }
    return 0;
}

int hami_alloc_from_fit(const struct hami_node *h, const struct pod_info *pod, const uint64_t *masks,
                        struct hami_alloc *out, char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    uint64_t valid = h->count >= 64 ? ~0ULL : (1ULL << h->count) - 1;
    for (int i = 0; i < pod->ncontainers; i++) {
        const struct container_request *c = &pod->containers[i];
        int bits = __builtin_popcountll(masks[i]);
        if ((masks[i] & ~valid) != 0 || (bits != 0 && bits != c->hami.nums))
            return strbuf_set_error(err, "container \"%s\": %d devices chosen for %d vGPUs", c->name, bits,
                                    c->hami.nums);
    }
    /* HAMi v2.9's layout: init containers first (empty entries for those
     * without vGPUs), then the app containers. */
    int entries = pod_hami_entries(pod);
    if (entries == 0)
        return 0;
    if (!(out->containers = calloc((size_t)entries, sizeof(*out->containers))))
        return -1;
    out->ncontainers = entries;
    for (int i = 0; i < pod->ncontainers; i++)
        if (fill_container(h, &pod->containers[i], masks[i], &out->containers[pod_hami_entry(pod, i)]) != 0) {
            hami_alloc_free(out);
            return -1;
        }
    return 0;
}

int hami_decision_annotations(cJSON *ann, const char *node, int64_t now_ns, const char *allocation)
{
    char secs[24];
    snprintf(secs, sizeof(secs), "%" PRId64, (int64_t)(now_ns / NS_PER_S));
    if (json_set_string(ann, HAMI_TO_ALLOCATE_ANNOTATION, allocation) ||
        json_set_string(ann, HAMI_ALLOCATED_ANNOTATION, allocation) ||
        json_set_string(ann, HAMI_NODE_ANNOTATION, node) || json_set_string(ann, HAMI_TIME_ANNOTATION, secs))
        return -1;
    return 0;
}

int hami_decision_mig_annotation(cJSON *ann, const struct hami_pod *pod)
{
    if (!pod->mig || pod->nmig <= 0)
        return cJSON_AddNullToObject(ann, MIG_HAMI_ALLOCATIONS_ANNOTATION) ? 0 : -1;
    char *err = NULL;
    char *value = mig_hami_encode_allocations(pod->mig, pod->nmig, &err);
    free(err);
    int rc = value ? json_set_string(ann, MIG_HAMI_ALLOCATIONS_ANNOTATION, value) : -1;
    free(value);
    return rc;
}

static bool label_char(char c, bool edge)
{
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    return alnum || (!edge && (c == '-' || c == '_' || c == '.'));
}

bool hami_label_value_valid(const char *value)
{
    size_t n = strlen(value);
    if (n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!label_char(value[i], i == 0 || i == n - 1))
            return false;
    return true;
}

int hami_decision_label(cJSON *labels, const char *node)
{
    if (!node)
        return cJSON_AddNullToObject(labels, HAMI_NODE_ANNOTATION) ? 0 : -1;
    if (!hami_label_value_valid(node))
        return 0;
    return json_set_string(labels, HAMI_NODE_ANNOTATION, node);
}

int hami_bind_annotations(cJSON *ann, int64_t now_ns)
{
    char secs[24];
    snprintf(secs, sizeof(secs), "%" PRId64, (int64_t)(now_ns / NS_PER_S));
    return json_set_string(ann, HAMI_BIND_PHASE_ANNOTATION, HAMI_PHASE_ALLOCATING) ||
                   json_set_string(ann, HAMI_BIND_TIME_ANNOTATION, secs)
               ? -1
               : 0;
}

int hami_bind_failed_annotation(cJSON *ann)
{
    return json_set_string(ann, HAMI_BIND_PHASE_ANNOTATION, HAMI_PHASE_FAILED);
}

/* ---- the node lock -------------------------------------------------------------- */

int hami_lock_value(char *buf, size_t size, int64_t now_ns, const char *ns, const char *name)
{
    time_t t = (time_t)((int64_t)(now_ns / NS_PER_S));
    struct tm tm;
    gmtime_r(&t, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(buf, size, "%s,%s,%s", when, ns, name);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

int64_t hami_parse_rfc3339(const char *s)
{
    return rfc3339_parse_ns(s);
}

int hami_lock_parse(const char *value, struct hami_lock *out)
{
    memset(out, 0, sizeof(*out));
    const char *c1 = strchr(value, ',');
    char when[64];
    if (!c1) {
        out->time_ns = hami_parse_rfc3339(value);
        return out->time_ns < 0 ? -1 : 0;
    }
    const char *c2 = strchr(c1 + 1, ',');
    if (!c2 || strchr(c2 + 1, ',') || (size_t)(c1 - value) >= sizeof(when) ||
        (size_t)(c2 - c1 - 1) >= sizeof(out->ns) || strlen(c2 + 1) >= sizeof(out->name))
        return -1;
    memcpy(when, value, (size_t)(c1 - value));
    when[c1 - value] = '\0';
    memcpy(out->ns, c1 + 1, (size_t)(c2 - c1 - 1));
    out->ns[c2 - c1 - 1] = '\0';
    strcpy(out->name, c2 + 1);
    out->time_ns = hami_parse_rfc3339(when);
    out->has_owner = out->ns[0] && out->name[0];
    return out->time_ns < 0 ? -1 : 0;
}

enum hami_lock_state hami_lock_check(const char *value, int64_t now_ns, int64_t timeout_ns, const char *ns,
                                     const char *name)
{
    if (!value)
        return HAMI_LOCK_FREE;
    struct hami_lock lock;
    if (hami_lock_parse(value, &lock) != 0)
        return HAMI_LOCK_UNREADABLE;
    if (lock.has_owner && strcmp(lock.ns, ns) == 0 && strcmp(lock.name, name) == 0)
        return HAMI_LOCK_OURS;
    return now_ns - lock.time_ns > timeout_ns ? HAMI_LOCK_EXPIRED : HAMI_LOCK_HELD;
}
