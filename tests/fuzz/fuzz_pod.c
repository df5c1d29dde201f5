/* fuzz_pod.c - Pod and Node objects (cluster/podspec.c, nodespec.c): the
 * slim pod parse the watch uses, the full parse, the decision annotations
 * written back, and the same object read as a Node. */
#include "fuzz_common.h"
#include "cluster/nodespec.h"
#include "cluster/podspec.h"

#include <cjson/cJSON.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    cJSON *slim = pod_slim_from_text(buf, size);
    cJSON *full = cJSON_ParseWithLength(buf, size);
    free(buf);
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
