/* fuzz_hami_handshake.c - HAMi's handshake annotation (cluster/hami_node.c):
 * the time layout alone ("2006-01-02 15:04:05", dots from older plugins)
 * and the states Requesting_/Deleted_/Reported_ read from a Node beside a
 * valid registration, then judged at times far apart (overflow of the age
 * must not happen; issue 22: a year 5111 overflowed nanoseconds). */
#include "fuzz_common.h"
#include "cluster/hami_node.h"

#include <cjson/cJSON.h>

#define REGISTER "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla V100,0,true,0,hami-core:"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    int64_t t = hami_parse_handshake_time(text);
    if (t < -1)
        abort();
    static const char *const keys[] = {"hami.io/node-handshake", "hami.io/node-handshake-nvidia"};
    cJSON *ann = cJSON_CreateObject();
    if (ann && cJSON_AddStringToObject(ann, "hami.io/node-nvidia-register", REGISTER) &&
        cJSON_AddStringToObject(ann, keys[size & 1], text)) {
        struct hami_node *h = NULL;
        if (hami_node_from_annotations(ann, 10, "fuzz", &h) == 0 && h) {
            if (h->handshake_ns < 0)
                abort();
            char buf[512];
            static const int64_t when[] = {0, INT64_C(1763632800) * 1000000000, INT64_MAX / 2, INT64_MAX};
            for (size_t i = 0; i < sizeof(when) / sizeof(when[0]); i++)
                (void)hami_node_unusable(h, when[i], buf, sizeof(buf));
            (void)hami_handshake_due(h);
            hami_node_free(h);
        }
    }
    cJSON_Delete(ann);
    free(text);
    return 0;
}
