/*
 * podlookup.h - the copy of a pod that a decision acts on.
 *
 * Owns which copy the decision core trusts. Decisions are keyed by UID: the
 * cache's copy when it holds the pod under that UID (no I/O); otherwise the
 * API server's, read once with a bounded timeout (the watch may lag a create,
 * or still hold the pod's previous incarnation under the same name), and fed
 * to the cache as the pod watch would feed it: parsed by cache_pod_from_json
 * so CustomResourceLimitation defaults apply, and applied only when the cache
 * does not meanwhile hold that UID (the watch's copy, when it came first, is
 * at least as new). Only when the API server does not have the pod either is
 * it an error, and the message says so. Checks on what the pod is (bound,
 * terminating, ...) belong on this copy, never on the request's.
 *
 * Offline (no sink to read from) the request's copy stands in for the API
 * server's. No lock is held while the API server is read.
 */
#ifndef GQA_PODLOOKUP_H
#define GQA_PODLOOKUP_H

#include "cluster/cache.h"

struct decision_sink;

/* The pod ns/name for a request about UID uid (NULL or "": any). request is
 * the request's copy (filter) or NULL (bind). Returns a malloc'd pod_info,
 * or NULL with *err (malloc'd). *fetched is set when it came from the API
 * server. */
struct pod_info *pod_lookup(struct cluster_cache *c, const struct decision_sink *sink, const char *ns, const char *name,
                            const char *uid, const struct pod_info *request, bool *fetched, char **err);

/* Do two copies name the same pod (equal UIDs, or one of them has none)? */
bool pod_same_uid(const struct pod_info *a, const char *uid);

#endif
