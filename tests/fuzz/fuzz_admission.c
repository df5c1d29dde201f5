/* fuzz_admission.c - AdmissionReview bodies (admission/webhook.c), and the
 * response built from what was parsed. */
#include "fuzz_common.h"
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
        free(admission_response(req.uid, false, 403, req.kind, "[]", &len));
        admission_request_free(&req);
    }
    free(err);
    free(buf);
    return 0;
}
