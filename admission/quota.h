/*
 * admission/quota.h - per-namespace GPU quota (design.md section 6).
 *
 * Owns the quota ConfigMap's format (key gpu_quota, tkestack gpu-admission's
 * JSON: {"<namespace>": {"pool": ["public"], "quota": {"<gpu-model>": <whole
 * GPUs>}}}) and the per-node verdict: a namespace with an entry may use only
 * nodes in its pools, and per GPU model only up to its quota (usage in
 * cores, 100 = one GPU; a shared container counts its cores). Namespaces
 * without an entry are unrestricted. Usage itself is counted by the cache.
 */
#ifndef GQA_ADMISSION_QUOTA_H
#define GQA_ADMISSION_QUOTA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct quota_model {
    char *model;
    int64_t gpus;
};

struct quota_entry {
    char *namespace_;
    char **pools;
    size_t npools;
    struct quota_model *models;
    size_t nmodels;
};

struct quota_config {
    struct quota_entry *entries;
    size_t count;
    char *source; /* namespace/name of the ConfigMap */
};

/* Parse the ConfigMap's data.gpu_quota. NULL with *err (malloc'd, naming the
 * namespace and field) when it is malformed; a ConfigMap without the key is
 * an empty (unrestricted) configuration. */
struct quota_config *quota_parse_configmap(const cJSON *configmap, char **err);
void quota_free(struct quota_config *q);
const struct quota_entry *quota_find(const struct quota_config *q, const char *ns);

/* Why quota refuses a node (quota_check). */
enum quota_refusal { QUOTA_ALLOWED = 0, QUOTA_NOT_IN_POOL, QUOTA_NO_MODEL, QUOTA_EXHAUSTED };

/* quota_allows, saying which rule refused. */
enum quota_refusal quota_check(const struct quota_entry *e, const char *model, const char *pool, int64_t used_cores,
                               int64_t cores, char *reason, size_t size);

/* Can namespace ns put `cores` more on a node of this model and pool, with
 * `used_cores` already in use by the namespace on that model? true, or false
 * with reason written (at most size bytes). */
bool quota_allows(const struct quota_entry *e, const char *model, const char *pool, int64_t used_cores, int64_t cores,
                  char *reason, size_t size);

/* JSON for /inspect/quota: every entry with its pools, quota and usage, the
 * usage coming from used(ctx, ns, model) in cores. */
typedef int64_t (*quota_usage_fn)(void *ctx, const char *ns, const char *model);
char *quota_render(const struct quota_config *q, const char *error, quota_usage_fn used, void *ctx);

#endif
