/* fuzz_quota.c - the quota ConfigMap (admission/quota.c): key gpu_quota's
 * JSON, read from a ConfigMap given as YAML or JSON, then rendered as
 * /inspect/quota does and queried for a namespace. */
#include "fuzz_common.h"
#include "admission/quota.h"
#include "lib/yamljson.h"

#include <cjson/cJSON.h>

static int64_t used(void *ctx, const char *ns, const char *model)
{
    (void)ctx;
    return (int64_t)(strlen(ns) * 100 + (model ? strlen(model) : 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    cJSON *cm = yaml_to_json(buf, size, NULL);
    free(buf);
    if (!cm)
        return 0;
    char *err = NULL;
    struct quota_config *q = quota_parse_configmap(cm, &err);
    free(quota_render(q, err, used, NULL));
    if (q) {
        const struct quota_entry *e = quota_find(q, "team-a");
        if (e) {
            char why[256];
            (void)quota_allows(e, "A100", "public", 100, 50, why, sizeof(why));
        }
        quota_free(q);
    }
    free(err);
    cJSON_Delete(cm);
    return 0;
}
