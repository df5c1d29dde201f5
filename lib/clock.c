/* clock.c - wall-clock and monotonic time. See clock.h. */
#include "lib/clock.h"

static int64_t read_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

int64_t clock_realtime_ns(void)
{
    return read_ns(CLOCK_REALTIME);
}

int64_t clock_monotonic_ns(void)
{
    return read_ns(CLOCK_MONOTONIC);
}

struct timespec clock_monotonic_after(int64_t after_ns)
{
    int64_t at = read_ns(CLOCK_MONOTONIC) + (after_ns > 0 ? after_ns : 0);
    struct timespec ts = {(time_t)(at / NS_PER_S), (long)(at % NS_PER_S)};
    return ts;
}

int clock_cond_init(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}
