/* admission/policy.c - CRL registry and quota derived from ConfigMaps. See policy.h. */
#include "admission/policy.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct crl_default;
static int apply_default(cJSON *pod, const struct crl_default *d);

int policy_init(struct admission_policy *p, const char *crl_namespace, const char *quota_configmap)
{
    memset(p, 0, sizeof(*p));
    const char *slash = strchr(quota_configmap, '/');
    if (!slash)
        return -1;
    p->crl_namespace = strdup(crl_namespace);
    p->quota_namespace = strndup(quota_configmap, (size_t)(slash - quota_configmap));
    p->quota_name = strdup(slash + 1);
    p->crls = crl_registry_build(NULL, 0, crl_namespace);
    if (!p->crl_namespace || !p->quota_namespace || !p->quota_name || !p->crls) {
        policy_destroy(p);
        return -1;
    }
    return 0;
}

void policy_destroy(struct admission_policy *p)
{
    crl_registry_free(p->crls);
    quota_free(p->quota);
    free(p->quota_error);
    free(p->crl_namespace);
    free(p->quota_namespace);
    free(p->quota_name);
    memset(p, 0, sizeof(*p));
}

static void rebuild_crls(struct admission_policy *p, struct cluster_cache *c)
{
    size_t n = 0, pos = 0;
    const cJSON **cms = calloc(dict_size(&c->configmaps) + 1, sizeof(*cms));
    struct dict_entry *e;
    while (cms && (e = dict_next(&c->configmaps, &pos)))
        cms[n++] = e->value;
    struct crl_registry *r = cms ? crl_registry_build(cms, n, p->crl_namespace) : NULL;
    free(cms);
    if (!r) {
        log_error("out of memory rebuilding the CustomResourceLimitation registry; keeping the previous one");
        return;
    }
    for (size_t i = 0; i < r->invalid_count; i++)
        log_warn("CustomResourceLimitation %s ignored: %zu problem(s), first: %s", r->invalid[i].name,
                 r->invalid[i].problems.count, r->invalid[i].problems.count ? r->invalid[i].problems.items[0] : "");
    crl_registry_free(p->crls);
    p->crls = r;
}

static void rebuild_quota(struct admission_policy *p, struct cluster_cache *c)
{
    char key[320];
    snprintf(key, sizeof(key), "%s/%s", p->quota_namespace, p->quota_name);
    const cJSON *cm = dict_get(&c->configmaps, key);
    char *err = NULL;
    struct quota_config *q = cm ? quota_parse_configmap(cm, &err) : NULL;
    if (cm && !q)
        log_warn("quota ConfigMap %s ignored: %s", key, err ? err : "out of memory");
    quota_free(p->quota);
    free(p->quota_error);
    p->quota = q;
    p->quota_error = err;
}

void policy_rebuild(void *ctx, struct cluster_cache *c)
{
    struct admission_policy *p = ctx;
    rebuild_crls(p, c);
    rebuild_quota(p, c);
}

static cJSON *object_at(cJSON *parent, const char *name)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(parent, name);
    if (cJSON_IsObject(v))
        return v;
    if (v)
        cJSON_DeleteItemFromObjectCaseSensitive(parent, name);
    return cJSON_AddObjectToObject(parent, name);
}

/* Write one default into the container's limits (and requests), as the
 * mutating webhook would have. */
static int apply_default(cJSON *pod, const struct crl_default *d)
{
    cJSON *containers = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers");
    cJSON *container = cJSON_GetArrayItem(containers, d->container);
    cJSON *resources = container ? object_at(container, "resources") : NULL;
    cJSON *limits = resources ? object_at(resources, "limits") : NULL;
    if (!limits)
        return -1;
    if (!cJSON_GetObjectItemCaseSensitive(limits, d->key) && !cJSON_AddStringToObject(limits, d->key, d->value))
        return -1;
    if (!d->set_request)
        return 0;
    cJSON *requests = object_at(resources, "requests");
    if (!requests)
        return -1;
    if (!cJSON_GetObjectItemCaseSensitive(requests, d->key) && !cJSON_AddStringToObject(requests, d->key, d->value))
        return -1;
    return 0;
}

/* Check a pod against the enabled CRLs and write their defaults into it.
 * With violation non-NULL, a pod breaking a CRL gets no defaults and
 * *violation the joined problems; with NULL, defaults are written whatever
 * the pod breaks. 0, or -1 on allocation failure. */
static int check_and_default(const struct admission_policy *p, cJSON *pod, char **violation)
{
    struct crl_problems violations = {0};
    struct crl_defaults defaults = {0};
    int rc = crl_check_pod(p->crls, pod, &violations, &defaults);
    if (rc == 0 && violation && violations.count) {
        *violation = crl_problems_join(&violations);
        rc = *violation ? 0 : -1;
    } else {
        for (size_t i = 0; rc == 0 && i < defaults.count; i++)
            rc = apply_default(pod, &defaults.items[i]);
    }
    crl_problems_free(&violations);
    crl_defaults_free(&defaults);
    return rc;
}

char *policy_prepare_pod(const struct admission_policy *p, cJSON *pod)
{
    char *violation = NULL;
    if (check_and_default(p, pod, &violation) != 0) {
        free(violation);
        return strdup("out of memory while checking CustomResourceLimitations");
    }
    return violation;
}

void policy_apply_defaults(void *ctx, cJSON *pod)
{
    if (check_and_default(ctx, pod, NULL) != 0)
        log_error("out of memory applying CustomResourceLimitation defaults");
}

bool policy_writes_defaults(void *ctx)
{
    const struct admission_policy *p = ctx;
    return crl_registry_has_defaults(p->crls);
}

/* Does an excluded pod's quota usage count against (ns, model)? */
static bool same_usage(const struct pod_entry *e, const char *ns, const char *model)
{
    if (!e || !e->usage_key || strcmp(e->info->ns, ns) != 0)
        return false;
    return strcmp(strchr(e->usage_key, '\x1f') + 1, model) == 0;
}

static char *check_quota(const struct admission_policy *p, const struct cluster_cache *c, const struct pod_info *pod,
                         const struct pod_entry *const *excluded, size_t nexcluded, const struct node_state *n,
                         enum quota_refusal *why);

char *policy_check_quota(const struct admission_policy *p, const struct cluster_cache *c, const struct pod_info *pod,
                         const struct pod_entry *self, const struct node_state *n, enum quota_refusal *why)
{
    return check_quota(p, c, pod, &self, 1, n, why);
}

bool policy_quota_binds(const struct admission_policy *p, const char *ns)
{
    return quota_find(p->quota, ns) != NULL;
}

char *policy_check_quota_excluding(const struct admission_policy *p, const struct cluster_cache *c,
                                   const struct pod_info *pod, const struct pod_entry *const *excluded,
                                   size_t nexcluded, const struct node_state *n)
{
    return check_quota(p, c, pod, excluded, nexcluded, n, NULL);
}

int64_t policy_quota_left(const struct admission_policy *p, const struct cluster_cache *c, const struct pod_info *pod,
                          const struct pod_entry *self, const struct node_state *n)
{
    const struct quota_entry *e = quota_find(p->quota, pod->ns);
    if (!e)
        return -1;
    const char *model = n->spec && n->spec->model ? n->spec->model : "";
    int64_t used = cache_usage(c, pod->ns, model) - (same_usage(self, pod->ns, model) ? self->usage_cores : 0);
    char reason[512];
    /* Asking for nothing: refused only when the pool or the model is not the namespace's. */
    if (quota_check(e, model, n->spec ? n->spec->pool : NULL, used, 0, reason, sizeof(reason)) != QUOTA_ALLOWED)
        return 0;
    for (size_t i = 0; i < e->nmodels; i++)
        if (strcmp(e->models[i].model, model) == 0)
            return e->models[i].gpus * 100 > used ? e->models[i].gpus * 100 - used : 0;
    return 0;
}

static bool names_model(const struct quota_entry *e, const char *model)
{
    for (size_t i = 0; i < e->nmodels; i++)
        if (strcmp(e->models[i].model, model) == 0)
            return true;
    return false;
}

/* A pod's instances against a quota line naming their profile
 * (pod_instance_line; docs/mig.md): QUOTA_ALLOWED when the namespace has
 * no such line. *skip_model: the line is there and the node's model line
 * is not, so only the instance line applies. */
static enum quota_refusal check_instance_line(const struct quota_entry *e, const struct cluster_cache *c,
                                              const struct pod_info *pod, const struct pod_entry *const *excluded,
                                              size_t nexcluded, const struct node_state *n, const char *model,
                                              bool *skip_model, char *reason, size_t size)
{
    char line[128];
    int64_t units;
    *skip_model = false;
    if (!pod_instance_line(pod, n, line, sizeof(line), &units) || !names_model(e, line))
        return QUOTA_ALLOWED;
    int64_t used = cache_usage(c, pod->ns, line);
    for (size_t i = 0; i < nexcluded; i++)
        if (excluded[i] && excluded[i]->line_key && strcmp(excluded[i]->info->ns, pod->ns) == 0 &&
            strcmp(strchr(excluded[i]->line_key, '\x1f') + 1, line) == 0)
            used -= excluded[i]->line_units;
    *skip_model = !names_model(e, model);
    return quota_check(e, line, n->spec ? n->spec->pool : NULL, used, units, reason, size);
}

static char *check_quota(const struct admission_policy *p, const struct cluster_cache *c, const struct pod_info *pod,
                         const struct pod_entry *const *excluded, size_t nexcluded, const struct node_state *n,
                         enum quota_refusal *why)
{
    const struct quota_entry *e = quota_find(p->quota, pod->ns);
    if (!e)
        return NULL;
    const char *model = n->spec && n->spec->model ? n->spec->model : "";
    char reason[512];
    bool skip_model;
    enum quota_refusal line =
        check_instance_line(e, c, pod, excluded, nexcluded, n, model, &skip_model, reason, sizeof(reason));
    if (line != QUOTA_ALLOWED || skip_model) {
        if (why)
            *why = line;
        return line == QUOTA_ALLOWED ? NULL : strdup(reason);
    }
    int64_t used = cache_usage(c, pod->ns, model);
    for (size_t i = 0; i < nexcluded; i++)
        if (same_usage(excluded[i], pod->ns, model))
            used -= excluded[i]->usage_cores;
    enum quota_refusal refusal =
        quota_check(e, model, n->spec ? n->spec->pool : NULL, used, pod_quota_cores(pod, n), reason, sizeof(reason));
    if (why)
        *why = refusal;
    return refusal == QUOTA_ALLOWED ? NULL : strdup(reason);
}
