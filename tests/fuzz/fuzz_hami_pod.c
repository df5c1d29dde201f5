/* fuzz_hami_pod.c - a pod's HAMi annotations (cluster/hami_pod.c): the
 * decision/allocation annotation (hami.io/vgpu-devices-allocated and
 * -to-allocate) alone, encoded back and decoded again to the same text, and
 * the input read as an annotations object (type and UUID lists, vgpu-mode,
 * policies, allocation) whose lists are then matched against a device; the
 * same object also as the annotations of a pod asking for a vGPU, read the
 * way the cache and the filter read pods (cluster/podspec.c, podparts.c:
 * HAMi's decision annotations hami.io/vgpu-node and vgpu-time too). */
#include "fuzz_common.h"
#include "cluster/hami_node.h"
#include "cluster/hami_pod.h"
#include "cluster/podspec.h"

#include <cjson/cJSON.h>

static void alloc_round_trip(const char *text)
{
    struct hami_alloc a;
    char *err = NULL;
    if (hami_alloc_decode(text, &a, &err) != 0) {
        free(err);
        return;
    }
    char *enc = hami_alloc_encode(&a);
    if (enc) {
        struct hami_alloc b;
        if (hami_alloc_decode(enc, &b, &err) != 0)
            abort(); /* what we write must read back */
        char *again = hami_alloc_encode(&b);
        if (again && strcmp(again, enc) != 0)
            abort();
        free(again);
        hami_alloc_free(&b);
    }
    free(enc);
    hami_alloc_free(&a);
}

static void annotations(const char *text, size_t size)
{
    cJSON *ann = cJSON_ParseWithLength(text, size);
    if (!ann)
        return;
    struct hami_pod *p = NULL;
    char *problem = NULL;
    if (hami_pod_from_annotations(ann, &p, &problem) == 0 && p) {
        char uuid[] = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec", type[] = "NVIDIA-Tesla V100",
             upper[] = "NVIDIA-TESLA V100";
        struct hami_device d = {.uuid = uuid, .type = type, .type_upper = upper, .split = 10, .memory_mib = 1,
                                .cores = 100, .healthy = true, .mode = HAMI_MODE_HAMI_CORE};
        (void)hami_pod_type_ok(p, &d);
        (void)hami_pod_uuid_ok(p, &d);
        (void)hami_pod_mode_ok(p, &d);
        struct hami_pod *c = hami_pod_clone(p);
        hami_pod_free(c);
        hami_pod_free(p);
    }
    free(problem);
    cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"uid\":\"u\"},"
                             "\"spec\":{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":"
                             "{\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"1000\"}}}]}}");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    if (meta && cJSON_AddItemToObject(meta, "annotations", ann)) {
        ann = NULL; /* the pod owns it now */
        struct pod_info *info = pod_info_from_json(pod, NULL);
        pod_info_free(info);
    }
    cJSON_Delete(pod);
    cJSON_Delete(ann);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    alloc_round_trip(text);
    annotations(text, size);
    free(text);
    return 0;
}
