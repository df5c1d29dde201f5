/* fuzz_hami_lock.c - HAMi's node lock (cluster/hami_decision.c,
 * hami.io/mutex.lock: "TIME,NAMESPACE,NAME" or a bare RFC 3339 time). A
 * parsed lock has a time in Unix ns (0..INT64_MAX), NUL-terminated owner
 * names, and a value this service writes for it parses back to the same. */
#include "fuzz_common.h"
#include "cluster/hami_decision.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet();
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    int64_t t = hami_parse_rfc3339(text);
    if (t < -1)
        abort();
    struct hami_lock lock;
    if (hami_lock_parse(text, &lock) == 0) {
        if (lock.time_ns < 0 || memchr(lock.ns, '\0', sizeof(lock.ns)) == NULL ||
            memchr(lock.name, '\0', sizeof(lock.name)) == NULL)
            abort();
        /* Our own value for the same owner reads back as written (whole seconds). */
        char buf[640];
        if (lock.has_owner && !strchr(lock.ns, ',') && !strchr(lock.name, ',') &&
            hami_lock_value(buf, sizeof(buf), lock.time_ns, lock.ns, lock.name) == 0) {
            struct hami_lock back;
            if (hami_lock_parse(buf, &back) != 0 || back.time_ns != lock.time_ns / 1000000000 * 1000000000 ||
                strcmp(back.ns, lock.ns) != 0 || strcmp(back.name, lock.name) != 0)
                abort();
        }
    }
    static const int64_t when[] = {0, INT64_C(1763632800) * 1000000000, INT64_MAX};
    for (size_t i = 0; i < sizeof(when) / sizeof(when[0]); i++)
        (void)hami_lock_check(text, when[i], INT64_C(300) * 1000000000, "default", "p");
    free(text);
    return 0;
}
