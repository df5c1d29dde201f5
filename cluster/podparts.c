/* podparts.c - the source-free steps of reading a pod. See podparts.h. */
#include "cluster/podparts.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool any_gpu(const struct container_request *c, int n, bool sidecars_only)
{
    for (int i = 0; i < n; i++)
        if (c[i].family && (!sidecars_only || c[i].sidecar))
            return true;
    return false;
}

int pod_place_init_containers(struct pod_info *pod, struct container_request *init, int ninit)
{
    bool running = any_gpu(pod->containers, pod->ncontainers, false) || any_gpu(init, ninit, true);
    int placed = 0;
    for (int j = 0; j < ninit; j++) {
        bool place = init[j].family && (init[j].sidecar || !running);
        init[j].init_slot = place ? j + 1 : 0;
        placed += place;
    }
    int rc = 0;
    struct container_request *all = NULL;
    if (placed > 0 && pod->ncontainers <= INT_MAX - placed)
        all = realloc(pod->containers, sizeof(*all) * (size_t)(pod->ncontainers + placed));
    if (placed > 0 && !all)
        rc = -1;
    else if (placed > 0)
        pod->containers = all;
    for (int j = 0; j < ninit; j++) {
        if (rc == 0 && init[j].init_slot > 0) {
            pod->containers[pod->ncontainers++] = init[j];
            pod->uses_gpu = true;
        } else {
            free(init[j].name);
        }
        init[j].name = NULL;
    }
    return rc;
}

int pod_app_containers(const struct pod_info *pod)
{
    int n = 0;
    while (n < pod->ncontainers && pod->containers[n].init_slot == 0)
        n++;
    return n;
}

int pod_hami_entries(const struct pod_info *pod)
{
    return pod->ninit + pod_app_containers(pod);
}

int pod_hami_entry(const struct pod_info *pod, int i)
{
    int slot = pod->containers[i].init_slot;
    return slot > 0 ? slot - 1 : pod->ninit + i;
}

char *pod_container_name(const char *name, size_t len, int i)
{
    if (name)
        return strndup(name, len);
    char fallback[32]; /* formatted only when needed: snprintf per container of every watched pod cost */
    snprintf(fallback, sizeof(fallback), "#%d", i);
    return strdup(fallback);
}

int pod_check_whole_gpu_limit(struct pod_info *pod)
{
    if (pod->request_error || !pod->uses_gpu)
        return 0;
    for (int i = 0; i < pod->ncontainers; i++) {
        if (pod->containers[i].whole_gpus > MAX_GPUS_PER_CONTAINER) {
            struct strbuf err;
            strbuf_init(&err);
            strbuf_printf(&err, "container \"%s\" asks for more than %d whole GPUs", pod->containers[i].name,
                          MAX_GPUS_PER_CONTAINER);
            pod->request_error = strbuf_detach(&err, NULL);
            return pod->request_error ? 0 : -1;
        }
    }
    return 0;
}

/* ---- decision annotations ---------------------------------------------- */

int parse_gpu_index_list(const char *text, int *out, int max)
{
    int n = 0;
    const char *p = text;
    if (*p == '\0')
        return 0;
    for (;;) {
        if (*p < '0' || *p > '9' || n >= max)
            return -1;
        errno = 0;
        char *end;
        long v = strtol(p, &end, 10);
        if (errno || v > 4096)
            return -1;
        out[n++] = (int)v;
        p = end;
        if (*p == '\0')
            return n;
        if (*p != ',')
            return -1;
        p++;
    }
}

static int64_t parse_time_ns(const char *text)
{
    if (!text)
        return 0;
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    return (errno || *end || v < 0) ? 0 : (int64_t)v;
}

/* An index annotation's key, prefix then container i in decimal, into key.
 * Not snprintf: reading them, it cost more than the two lookups it served,
 * for every container of every watched pod. */
const char *pod_index_key(char *key, size_t size, const char *prefix, int i)
{
    size_t len = strlen(prefix);
    if (len + STRBUF_I64_DIGITS + 1 > size)
        return "";
    memcpy(key, prefix, len);
    len += strbuf_i64_decimal(key + len, i);
    key[len] = '\0';
    return key;
}

const char *pod_gqa_index_key(char *key, size_t size, const struct pod_info *pod, int i)
{
    int slot = pod->containers[i].init_slot;
    if (slot > 0)
        return pod_index_key(key, size, ANN_GQA_INIT_IDX_PREFIX, slot - 1);
    return pod_index_key(key, size, ANN_GQA_IDX_PREFIX, i);
}

/* Index annotations are read for container i from the tencent.com key first:
 * GPU-Manager rewrites it with the minors it really used. It serves app
 * containers only: an init container has the gpu-admission.io key alone. */
static int read_container_indices(annotation_get_fn get, const void *src, const struct pod_info *pod, int i,
                                  struct pod_decision *d)
{
    char key[96];
    const char *text = NULL;
    if (pod->containers[i].init_slot == 0)
        text = get(src, pod_index_key(key, sizeof(key), ANN_TENCENT_IDX_PREFIX, i));
    if (!text)
        text = get(src, pod_gqa_index_key(key, sizeof(key), pod, i));
    if (!text)
        return 0;
    int tmp[MAX_GPUS_PER_CONTAINER];
    int n = parse_gpu_index_list(text, tmp, MAX_GPUS_PER_CONTAINER);
    if (n <= 0)
        return 0; /* unreadable: treated as absent, the pod is then unattributed */
    d->idx[i] = malloc(sizeof(int) * (size_t)n);
    if (!d->idx[i])
        return -1;
    memcpy(d->idx[i], tmp, sizeof(int) * (size_t)n);
    d->idx_count[i] = n;
    return 0;
}

int pod_decision_read(annotation_get_fn get, const void *src, const struct pod_info *pod, struct pod_decision *d)
{
    int ncontainers = pod->ncontainers;
    const char *node = get(src, ANN_TENCENT_NODE);
    if (!node)
        node = get(src, ANN_GQA_NODE);
    const char *time = get(src, ANN_TENCENT_TIME);
    if (!time)
        time = get(src, ANN_GQA_TIME);
    const char *assigned = get(src, ANN_TENCENT_ASSIGNED);
    d->assigned = assigned && strcmp(assigned, "true") == 0;
    d->time_ns = parse_time_ns(time);
    if (!node && !time) {
        /* A decision of HAMi's own scheduler: node, and Unix seconds. */
        node = get(src, HAMI_NODE_ANNOTATION);
        int64_t secs = parse_time_ns(get(src, HAMI_TIME_ANNOTATION));
        d->time_ns = secs > 0 && secs < INT64_MAX / 1000000000LL ? secs * 1000000000LL : 0;
    }
    if (node && !(d->node = strdup(node)))
        return -1;
    const char *proof = get(src, ANN_GQA_PROOF);
    if (proof && !(d->proof = strdup(proof)))
        return -1;
    if (ncontainers == 0)
        return 0;
    d->nidx = ncontainers;
    d->idx = calloc((size_t)ncontainers, sizeof(*d->idx));
    d->idx_count = calloc((size_t)ncontainers, sizeof(*d->idx_count));
    if (!d->idx || !d->idx_count)
        return -1;
    for (int i = 0; i < ncontainers; i++)
        if (read_container_indices(get, src, pod, i, d) != 0)
            return -1;
    return 0;
}

bool pod_wants_hami(const struct pod_info *pod)
{
    for (int i = 0; i < pod->ncontainers; i++)
        if (pod->containers[i].hami.nums > 0)
            return true;
    return false;
}

int pod_read_hami(struct pod_info *pod, const cJSON *ann)
{
    if (!pod_wants_hami(pod))
        return 0;
    char *problem = NULL;
    if (hami_pod_from_annotations(ann, &pod->hami, &problem) != 0)
        return -1;
    if (problem && !pod->request_error)
        pod->request_error = problem;
    else
        free(problem);
    return 0;
}
