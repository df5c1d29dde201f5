/* fuzz_pod.c - Pod and Node objects (cluster/podspec.c, nodespec.c): the
 * slim pod parse the watch uses, the full parse, the decision annotations
 * written back, and the same object read as a Node. The slim pod's
 * annotations and first container's resources must be cJSON's own parse
 * of the same text (the slim parse builds plain ones itself). */
#include "fuzz_common.h"
#include "cluster/nodespec.h"
#include "cluster/podspec.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

static const cJSON *at(const cJSON *obj, const char *a, const char *b, bool first_resources)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, a), b);
    return first_resources ? cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(v, 0), "resources") : v;
}

static void compare_plain_parts(const cJSON *slim, const cJSON *full)
{
    for (int k = 0; k < 2; k++) {
        const cJSON *a = k ? at(slim, "spec", "containers", true) : at(slim, "metadata", "annotations", false);
        const cJSON *b = k ? at(full, "spec", "containers", true) : at(full, "metadata", "annotations", false);
        if (!a || !b || !cJSON_IsObject(b))
            continue; /* the slim parse keeps only what it reads; others may differ in shape */
        char *pa = cJSON_PrintUnformatted(a), *pb = cJSON_PrintUnformatted(b);
        if (pa && pb && strcmp(pa, pb) != 0)
            abort();
        cJSON_free(pa);
        cJSON_free(pb);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    cJSON *slim = pod_slim_from_text(buf, size);
    cJSON *full = cJSON_ParseWithLength(buf, size);
    free(buf);
    if (slim && full)
        compare_plain_parts(slim, full);
    for (int k = 0; k < 2; k++) {
        cJSON *obj = k ? full : slim;
        if (!obj)
            continue;
        struct pod_info *pod = pod_info_from_json(obj, NULL);
        if (pod) {
            struct pod_info *copy = pod_info_clone(pod);
            cJSON *ann = cJSON_CreateObject();
            if (ann && pod->ncontainers > 0) {
                int *idx[1] = {NULL};
                int count[1] = {0};
                (void)decision_annotations(ann, "node", 1, pod->ncontainers < 1 ? pod->ncontainers : 1, idx, count,
                                           true);
            }
            cJSON_Delete(ann);
            pod_info_free(copy);
            pod_info_free(pod);
        }
        node_spec_free(node_spec_from_json(obj, NULL));
    }
    cJSON_Delete(slim);
    cJSON_Delete(full);
    return 0;
}
