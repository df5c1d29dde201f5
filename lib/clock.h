/*
 * clock.h - the service's clocks.
 *
 * Owns reading time: wall-clock nanoseconds for what is compared with other
 * machines or written into objects (decision times, assume TTLs, log
 * stamps), and monotonic time for durations and deadlines, which must not
 * jump when the wall clock is set. Thread-safe, no state.
 */
#ifndef GQA_CLOCK_H
#define GQA_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define NS_PER_MS 1000000LL
#define NS_PER_S 1000000000LL

/* Unix time in nanoseconds (CLOCK_REALTIME). */
int64_t clock_realtime_ns(void);
/* Nanoseconds on CLOCK_MONOTONIC: for durations and deadlines only. */
int64_t clock_monotonic_ns(void);

static inline int64_t clock_monotonic_ms(void)
{
    return clock_monotonic_ns() / NS_PER_MS;
}
/* The CLOCK_MONOTONIC instant `after_ns` from now, for waits on a condition
 * variable created with pthread_condattr_setclock(CLOCK_MONOTONIC). */
struct timespec clock_monotonic_after(int64_t after_ns);
/* Initialise c so that its timed waits count on CLOCK_MONOTONIC (a wall
 * clock step neither ends them early nor stretches them). 0, or an errno. */
int clock_cond_init(pthread_cond_t *c);

#endif
