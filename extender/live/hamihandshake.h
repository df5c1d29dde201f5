/*
 * hamihandshake.h - writing HAMi's handshake requests (--hami-handshake write).
 *
 * Owns the scheduler's side of HAMi's node handshake (docs/hami.md), for
 * clusters where no HAMi scheduler process writes it any more: every
 * --hami-handshake-interval (HAMi's 15 s), while this replica may decide
 * (the leader, with leader election), each HAMi node whose handshake does
 * not already hold a Requesting_ value gets hami.io/node-handshake:
 * Requesting_<time> in HAMi's layout. The plugin answers Reported_<time>; a
 * request left unanswered past --hami-handshake-timeout then takes the
 * node's devices away (hami_node.h) unless the node still advertises
 * nvidia.com/gpu.
 *
 * A thread of its own with its own API client. It copies the names of the
 * nodes due under the cache's read lock and writes with no lock held; every
 * request has a deadline; stop wakes it and joins it at once.
 */
#ifndef GQA_HAMIHANDSHAKE_H
#define GQA_HAMIHANDSHAKE_H

#include <stdatomic.h>

#include "cluster/cache.h"
#include "kube/kubeclient.h"

#define HAMI_HANDSHAKE_WRITE_TIMEOUT_MS 2000

struct hami_handshaker;

/* Start writing (may_write: the leadership flag, NULL = always). NULL with
 * *err (malloc'd) when the client or the thread cannot be made. */
struct hami_handshaker *hami_handshaker_start(const struct kube_config *kube, struct cluster_cache *cache,
                                              const atomic_int *may_write, int64_t interval_ns, char **err);
void hami_handshaker_stop(struct hami_handshaker *h);

/* The names of the HAMi nodes due a request now (malloc'd array of
 * strdup'd names, *count of them; NULL with *count 0 when none or out of
 * memory). Takes the cache's read lock. */
char **hami_handshake_due_nodes(struct cluster_cache *cache, size_t *count);

#endif
