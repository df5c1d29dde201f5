/*
 * admission/schedulername.c - the scheduler-name webhook's decision and
 * patch; see schedulername.h.
 */
#include "admission/schedulername.h"

#include <stdlib.h>
#include <string.h>

#include "cluster/family.h"
#include "cluster/podspec.h"
#include "lib/strbuf.h"

/* The managedResources of scheduler-config/<version>/recommended.yaml and of
 * manifests/components/own-scheduler are the families' node resources
 * (cluster/family.h): kube-scheduler calls the extender for exactly these,
 * so these are the pods that must reach that scheduler. */
static bool is_managed(const char *name)
{
    for (size_t i = 0; i < gpu_family_count(); i++) {
        const struct gpu_family *f = gpu_family_at(i);
        if ((f->node_core_resource && strcmp(name, f->node_core_resource) == 0) ||
            (f->node_memory_resource && strcmp(name, f->node_memory_resource) == 0))
            return true;
    }
    return false;
}

static bool names_managed(const cJSON *list)
{
    if (!cJSON_IsObject(list))
        return false;
    for (const cJSON *r = list->child; r; r = r->next)
        if (r->string && is_managed(r->string))
            return true;
    return false;
}

static bool container_asks(const cJSON *c)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
    return names_managed(cJSON_GetObjectItemCaseSensitive(res, "requests")) ||
           names_managed(cJSON_GetObjectItemCaseSensitive(res, "limits"));
}

static bool any_container_asks(const cJSON *containers)
{
    if (!cJSON_IsArray(containers))
        return false;
    for (const cJSON *c = containers->child; c; c = c->next)
        if (container_asks(c))
            return true;
    return false;
}

bool schedname_asks_for_gpu(const cJSON *pod)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    return any_container_asks(cJSON_GetObjectItemCaseSensitive(spec, "containers")) ||
           any_container_asks(cJSON_GetObjectItemCaseSensitive(spec, "initContainers"));
}

enum schedname_verdict schedname_decide(const cJSON *pod, const char *name)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    if (!cJSON_IsObject(spec))
        return SCHEDNAME_NOT_A_POD;
    const cJSON *current = cJSON_GetObjectItemCaseSensitive(spec, "schedulerName");
    if (current && !cJSON_IsNull(current) && !cJSON_IsString(current))
        return SCHEDNAME_NOT_A_POD;
    const char *now = cJSON_IsString(current) ? current->valuestring : "";
    if (name && strcmp(now, name) == 0)
        return SCHEDNAME_ALREADY;
    /* Absent or empty is what the API server defaults to default-scheduler. */
    if (*now && strcmp(now, SCHEDNAME_DEFAULT) != 0)
        return SCHEDNAME_OTHER_SCHEDULER;
    return schedname_asks_for_gpu(pod) ? SCHEDNAME_SET : SCHEDNAME_NO_GPU;
}

char *schedname_patch(const char *name)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "[{\"op\":\"add\",\"path\":\"/spec/schedulerName\",\"value\":");
    strbuf_json_string(&sb, name);
    strbuf_puts(&sb, "}]");
    return strbuf_detach(&sb, NULL);
}

static bool label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool schedname_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool edge = i == 0 || i == n - 1 || name[i - 1] == '.' || name[i + 1] == '.';
        if (c == '.' ? edge : !(label_char(c) || (c == '-' && !edge)))
            return false;
    }
    return true;
}
