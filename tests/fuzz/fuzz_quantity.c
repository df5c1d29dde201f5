/* fuzz_quantity.c - Kubernetes quantities (lib/quantity.c), as every
 * resource amount from the API is read. An integer value must agree with
 * the milli-value whenever both parse. */
#include "fuzz_common.h"
#include "lib/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_exact(data, size);
    if (!buf)
        return 0;
    int64_t milli = 0, value = 0;
    qty_status ms = quantity_parse_milli(buf, size, &milli);
    qty_status is = quantity_parse_int(buf, size, &value);
    if (is == QTY_OK && value < 0)
        abort();
    if (is == QTY_OK && ms == QTY_OK && milli != value * 1000)
        abort();
    (void)quantity_status_text(ms);
    free(buf);
    return 0;
}
