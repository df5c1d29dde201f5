/*
 * leader.h - leader election on a coordination.k8s.io/v1 Lease.
 *
 * Owns the --leader-elect loop: acquire the Lease when it is free or its
 * holder's lease has expired, renew it every retry period, and give it up
 * (stop deciding at once) when a renewal has not succeeded within the renew
 * deadline or another holder appears. With a may_lead callback it campaigns
 * only while the caller is ready to serve, and a leader that stops being
 * ready releases the Lease at once. Only the leader answers filter and
 * bind. Callbacks let the service act when leadership starts and ends (the
 * extender labels the leader's pod so its Service routes there); they run
 * on the election thread. Timings follow kube-scheduler's defaults: lease
 * 15 s, renew deadline 10 s, retry period 2 s (followers look every 1 s).
 */
#ifndef GQA_LEADER_H
#define GQA_LEADER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/kubeclient.h"

struct leader_config {
    const char *namespace_;    /* --lease-namespace (default kube-system) */
    const char *name;          /* --lease-name (default gpu-quota-admission) */
    const char *identity;      /* holderIdentity: hostname + "_" + random suffix */
    int64_t lease_duration_ms; /* 15000 */
    int64_t renew_deadline_ms; /* 10000 */
    int64_t retry_period_ms;   /* 2000 */
};

struct leader_elector;

/* Called on the election thread; each call must bound its own I/O (well
 * under the renew deadline). ctx is passed to both. */
struct leader_callbacks {
    /* The Lease was just taken; *is_leader turns 1 when this returns. Non-zero
     * means not done: it is called again after each renewal of this term
     * until it returns 0. */
    int (*started)(void *ctx);
    /* *is_leader has just turned 0 (the Lease was lost, or is about to be
     * released at stop: this runs before the release). Also called once
     * when the election starts, before the first attempt: a process that
     * restarts in the same pod after a crash is a follower, and takes back
     * what its previous run left. */
    void (*stopped)(void *ctx);
    /* May this replica lead now? Asked before each election round (NULL:
     * always). 0 means not ready to serve (why, NUL-terminated, says why):
     * a follower does not campaign, and a leader gives the Lease up at once
     * (stopped runs, then the Lease is released) so a ready replica takes
     * over. Must not block: it reads state, it does no I/O. */
    int (*may_lead)(void *ctx, char *why, size_t size);
    void *ctx;
};

/* Start the election thread. is_leader is set to 1 while this process holds
 * the lease and to 0 the moment it may not (before the lease could have
 * been taken by someone else: renew deadline < lease duration). Needs
 * lease_duration_ms >= 1000 (the Lease stores whole seconds),
 * renew_deadline_ms < lease_duration_ms and retry_period_ms * 1.2 <
 * renew_deadline_ms, as client-go does. NULL with *err (malloc'd) on a bad
 * config or when the API client cannot be made. */
struct leader_elector *leader_start(const struct kube_config *kube, const struct leader_config *cfg,
                                    atomic_int *is_leader, char **err);
/* The same, with callbacks (copied; NULL: none). */
struct leader_elector *leader_start_with(const struct kube_config *kube, const struct leader_config *cfg,
                                         atomic_int *is_leader, const struct leader_callbacks *callbacks, char **err);
/* Stop the thread; a leader sets *is_leader to 0 and then releases the
 * lease (clears holderIdentity) so a follower can take over without waiting
 * for expiry. A wait is interrupted at once; a request in flight is not
 * (it ends within renew deadline / 2), and the release is given a retry
 * period. Frees le. NULL is a no-op. */
void leader_stop(struct leader_elector *le);

/* A description for /inspect and /readyz, one of:
 *   "leader"
 *   "follower: lease held by X until T" (T = holder's renewTime + duration,
 *       by the holder's clock; informative only)
 *   "follower: lease is free" / "follower: no lease observed yet"
 *   "error: <last API error>" (a follower whose last attempt failed)
 * Thread-safe. Writes at most size bytes, always NUL-terminated. */
void leader_describe(struct leader_elector *le, char *buf, size_t size);

/* Exposed for tests. */

/* Format unix microseconds as a Kubernetes MicroTime in UTC,
 * "2026-11-21T19:50:52.123456Z" (27 characters). 0, or -1 when buf is too
 * small or the year is outside 0000..9999. */
int leader_format_microtime(int64_t unix_us, char *buf, size_t size);
/* Parse an RFC 3339 time ("Z" or a +hh:mm/-hh:mm offset, any number of
 * fraction digits, truncated to microseconds) into unix microseconds.
 * 0, or -1 on anything malformed (the whole string must match). */
int leader_parse_microtime(const char *s, int64_t *unix_us);
/* client-go's rule for whether candidate `identity` may write a lease whose
 * holder is `holder`: yes when it has no holder or is ours; otherwise only
 * when the record has not changed for duration_s seconds, measured on the
 * candidate's own monotonic clock from observed_ns (when it last saw the
 * record change) to now_ns, so no two machines' clocks are compared. */
int leader_may_acquire(const char *holder, const char *identity, int64_t observed_ns, int64_t duration_s,
                       int64_t now_ns);

#endif
