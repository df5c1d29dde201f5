/*
 * podcompare.h - are two pod_infos the same? For the tests and the fuzz
 * target that hold podtext.c's reader to podspec.c's (tests only).
 *
 * pod_info_difference returns the name of the first field that differs, or
 * NULL when every field a pod_info has is equal: strings by content (NULL
 * only equals NULL), containers, decision tables, and HAMi's annotations.
 */
#ifndef GQA_TEST_PODCOMPARE_H
#define GQA_TEST_PODCOMPARE_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/hami_pod.h"
#include "cluster/podspec.h"

static inline bool podcmp_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static inline bool podcmp_list(const struct hami_list *a, const struct hami_list *b)
{
    if (a->count != b->count)
        return false;
    for (int i = 0; i < a->count; i++)
        if (!podcmp_str(a->items[i], b->items[i]))
            return false;
    return true;
}

static inline const char *podcmp_hami(const struct hami_pod *a, const struct hami_pod *b)
{
    if (!a || !b)
        return a == b ? NULL : "hami";
    if (!podcmp_list(&a->use_types, &b->use_types) || !podcmp_list(&a->nouse_types, &b->nouse_types) ||
        !podcmp_list(&a->use_uuids, &b->use_uuids) || !podcmp_list(&a->nouse_uuids, &b->nouse_uuids))
        return "hami lists";
    if (!podcmp_str(a->vgpu_mode, b->vgpu_mode) || a->gpu_policy != b->gpu_policy || a->node_policy != b->node_policy ||
        a->filters != b->filters)
        return "hami mode or policies";
    if (a->has_alloc != b->has_alloc || a->alloc_done != b->alloc_done || a->decision_keys != b->decision_keys ||
        !podcmp_str(a->alloc_error, b->alloc_error))
        return "hami allocation state";
    char *ta = hami_alloc_encode(&a->alloc), *tb = hami_alloc_encode(&b->alloc);
    bool same = podcmp_str(ta, tb);
    free(ta);
    free(tb);
    return same ? NULL : "hami allocation";
}

static inline const char *podcmp_container(const struct container_request *a, const struct container_request *b)
{
    if (!podcmp_str(a->name, b->name))
        return "container name";
    if (a->family != b->family || a->cores != b->cores || a->memory != b->memory ||
        a->memory_given != b->memory_given || a->whole_gpus != b->whole_gpus)
        return "container request";
    if (a->init_slot != b->init_slot || a->sidecar != b->sidecar)
        return "container init slot";
    if (a->hami.nums != b->hami.nums || a->hami.memory_mib != b->hami.memory_mib ||
        a->hami.memory_percent != b->hami.memory_percent || a->hami.cores != b->hami.cores)
        return "container hami request";
    return NULL;
}

static inline const char *podcmp_decision(const struct pod_decision *a, const struct pod_decision *b)
{
    if (!podcmp_str(a->node, b->node) || a->time_ns != b->time_ns || a->assigned != b->assigned)
        return "decision";
    if (a->nidx != b->nidx || !a->idx != !b->idx || !a->idx_count != !b->idx_count)
        return "decision tables";
    for (int i = 0; a->idx && i < a->nidx; i++) {
        if (a->idx_count[i] != b->idx_count[i] || !a->idx[i] != !b->idx[i])
            return "decision indices";
        if (a->idx[i] && memcmp(a->idx[i], b->idx[i], sizeof(int) * (size_t)a->idx_count[i]) != 0)
            return "decision indices";
    }
    return NULL;
}

static inline const char *pod_info_difference(const struct pod_info *a, const struct pod_info *b)
{
    if (!podcmp_str(a->key, b->key) || !podcmp_str(a->ns, b->ns) || !podcmp_str(a->name, b->name))
        return "key, namespace or name";
    if (!podcmp_str(a->uid, b->uid) || !podcmp_str(a->resource_version, b->resource_version))
        return "uid or resourceVersion";
    if (!podcmp_str(a->node_name, b->node_name) || a->terminal != b->terminal || a->terminating != b->terminating)
        return "node, phase or deletion";
    if (a->names_gpu != b->names_gpu || a->ninit != b->ninit)
        return "names_gpu or ninit";
    if (a->uses_gpu != b->uses_gpu || !podcmp_str(a->request_error, b->request_error))
        return "uses_gpu or request_error";
    if (a->ncontainers != b->ncontainers)
        return "container count";
    for (int i = 0; i < a->ncontainers; i++) {
        const char *d = podcmp_container(&a->containers[i], &b->containers[i]);
        if (d)
            return d;
    }
    const char *d = podcmp_decision(&a->decision, &b->decision);
    return d ? d : podcmp_hami(a->hami, b->hami);
}

#endif
