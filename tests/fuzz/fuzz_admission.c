/* fuzz_admission.c - AdmissionReview bodies (admission/webhook.c), the
 * scheduler-name webhook's decision on the object (admission/schedulername.c),
 * and the response built from what was parsed. */
#include "fuzz_common.h"
#include "admission/schedulername.h"
#include "admission/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    struct admission_request req;
    char *err = NULL;
    if (admission_parse(buf, size, &req, &err) == 0) {
        size_t len = 0;
        char *patch = NULL;
        if (req.object && schedname_decide(req.object, "gpu-scheduler") == SCHEDNAME_SET)
            patch = schedname_patch("gpu-scheduler");
        free(admission_response(req.uid, false, 403, req.kind, patch ? patch : "[]", &len));
        free(patch);
        admission_request_free(&req);
    }
    free(err);
    free(buf);
    return 0;
}
