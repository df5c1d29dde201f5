/* app.c - the application state the endpoints share. See app.h. */
#include "extender/app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int app_init(struct app *app, const struct options *opts)
{
    memset(app, 0, sizeof(*app));
    app->opts = opts;
    if (policy_init(&app->policy, opts->crl_namespace, opts->quota_configmap) != 0)
        return -1;
    nodespec_set_labels(opts->gpu_model_label, opts->gpu_pool_label);
    hami_set_config(&opts->hami);
    struct cache_config cc = {.assume_ttl_ns = opts->assume_ttl_ns,
                              .configmaps_changed = policy_rebuild,
                              .prepare_pod = policy_apply_defaults,
                              .prepares_pods = policy_writes_defaults,
                              .ctx = &app->policy};
    struct placement_config pc = {.mode = opts->placement, .policy = opts->policy, .filter_best = opts->filter_best};
    snprintf(app->not_ready_reason, sizeof(app->not_ready_reason), "initial state not loaded yet");
    if (cache_init(&app->cache, &cc) != 0) {
        policy_destroy(&app->policy);
        return -1;
    }
    if (placement_init(&app->placement, &app->cache, &pc) != 0) {
        cache_destroy(&app->cache);
        policy_destroy(&app->policy);
        return -1;
    }
    if (name_list_memo_init(&app->node_lists) != 0) {
        placement_destroy(&app->placement);
        cache_destroy(&app->cache);
        policy_destroy(&app->policy);
        return -1;
    }
    app->placement.policy = &app->policy;
    hami_quota_set_init(&app->hami_quota);
    if (opts->hami_resource_quota)
        app->placement.hami_quota = &app->hami_quota;
    return 0;
}

void app_destroy(struct app *app)
{
    name_list_memo_destroy(&app->node_lists);
    placement_destroy(&app->placement);
    cache_destroy(&app->cache);
    policy_destroy(&app->policy);
    hami_quota_set_free(&app->hami_quota);
}

struct pod_info *app_pod_from_json(struct app *app, cJSON *pod_json, char **err)
{
    cache_read_lock(&app->cache);
    char *violation = cJSON_IsObject(pod_json) ? policy_prepare_pod(&app->policy, pod_json) : NULL;
    cache_unlock(&app->cache);
    struct pod_info *pod = pod_info_from_json(pod_json, err);
    if (pod && violation) {
        free(pod->request_error);
        pod->request_error = violation;
        violation = NULL;
    }
    free(violation);
    return pod;
}
