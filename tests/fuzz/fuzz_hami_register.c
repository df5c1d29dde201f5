/* fuzz_hami_register.c - HAMi's node registration (cluster/hami_node.c,
 * hami.io/node-nvidia-register in its colon, 9-field and JSON forms), alone
 * and as a Node's annotation beside the handshake. Every device read must
 * hold numbers in the parser's documented ranges (a JSON entry without
 * count has a split of 0: Go's zero value, a device of no tasks). */
#include "fuzz_common.h"
#include "cluster/hami_node.h"
#include "cluster/mig_place.h"

#include <cjson/cJSON.h>

static void check_devices(const struct hami_device *d, int count)
{
    if (count < 0 || (count > 0 && !d))
        abort();
    for (int i = 0; i < count; i++)
        if (!d[i].uuid || !d[i].type || !d[i].type_upper || d[i].split < 0 || d[i].split > HAMI_MAX_SPLIT || d[i].memory_mib < 1 ||
            d[i].cores < 0 || d[i].numa < -1 || d[i].index < 0)
            abort();
    /* A MIG-mode device keeps profiles only when they are a valid geometry
     * (HAMi v2.10 migProfiles), else the reason. */
    char why[128];
    for (int i = 0; i < count; i++)
        if ((d[i].mig && (d[i].mode != HAMI_MODE_MIG || d[i].mig_error || d[i].mig->ntemplates < 1 ||
                          mig_gpu_check(d[i].mig, why, sizeof(why)) != 0)) ||
            (d[i].mig_error && d[i].mig))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    struct hami_device *devs = NULL;
    int count = 0;
    char *err = NULL;
    if (hami_parse_register(text, &devs, &count, &err) == 0) {
        check_devices(devs, count);
        hami_devices_free(devs, count);
    } else {
        free(err);
    }
    cJSON *ann = cJSON_CreateObject();
    if (ann && cJSON_AddStringToObject(ann, "hami.io/node-nvidia-register", text) &&
        cJSON_AddStringToObject(ann, "hami.io/node-handshake", "Reported_2025-11-20 10:00:00")) {
        struct hami_node *h = NULL;
        if (hami_node_from_annotations(ann, (int64_t)size, "fuzz", &h) == 0 && h) {
            check_devices(h->devices, h->count);
            char buf[512];
            (void)hami_node_unusable(h, INT64_C(1763632800) * 1000000000, buf, sizeof(buf));
            hami_node_free(h);
        }
    }
    cJSON_Delete(ann);
    free(text);
    return 0;
}
