/*
 * admission/schedulername.h - which pods the scheduler-name webhook sends to
 * the product's own kube-scheduler, and the patch that does it.
 *
 * Owns the decision of POST /admission/mutate-scheduler-name (enabled by
 * --set-scheduler-name NAME; manifests/components/scheduler-name-webhook):
 * a pod that asks for a managed GPU resource (the managedResources of the
 * recommended scheduler-config: tencent.com/vcuda-core, vcuda-memory,
 * nvidia.com/mps-core, mps-memory, nvidia.com/gpu) in the requests or limits
 * of any container or init container, and that names no scheduler or the
 * default one, gets spec.schedulerName NAME. Every other pod is left as it
 * is: no GPU, or already sent to a scheduler of its own choosing.
 *
 * Pure functions on a cJSON pod: no state, no locking.
 */
#ifndef GQA_ADMISSION_SCHEDULERNAME_H
#define GQA_ADMISSION_SCHEDULERNAME_H

#include <cjson/cJSON.h>
#include <stdbool.h>

/* The name the API server gives a pod that names no scheduler. */
#define SCHEDNAME_DEFAULT "default-scheduler"

enum schedname_verdict {
    SCHEDNAME_SET,             /* patch spec.schedulerName to the name */
    SCHEDNAME_NO_GPU,          /* no container asks for a managed GPU resource */
    SCHEDNAME_OTHER_SCHEDULER, /* the pod names a scheduler other than the default */
    SCHEDNAME_ALREADY,         /* the pod already names this scheduler */
    SCHEDNAME_NOT_A_POD        /* spec missing or not an object; schedulerName not a string */
};

/* What the webhook does with pod for scheduler `name`. Reads only; pod may
 * come from anyone (wrong types are "no GPU" or NOT_A_POD, never a crash). */
enum schedname_verdict schedname_decide(const cJSON *pod, const char *name);

/* Whether any container or init container names a managed GPU resource in
 * resources.requests or resources.limits (any quantity, 0 included: the
 * extender is the one to judge it). */
bool schedname_asks_for_gpu(const cJSON *pod);

/* The RFC 6902 patch, as JSON text (malloc'd; NULL when out of memory):
 * [{"op":"add","path":"/spec/schedulerName","value":NAME}] ("add" replaces
 * a member that exists, such as the API server's default-scheduler). */
char *schedname_patch(const char *name);

/* A valid scheduler name: what the API server accepts in spec.schedulerName
 * (a DNS-1123 subdomain: 1..253 of [a-z0-9-.], dot-separated labels that
 * start and end with [a-z0-9]). */
bool schedname_valid(const char *name);

#endif
