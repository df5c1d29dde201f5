/*
 * recorder.h - decisions written to the API server.
 *
 * Owns the live decision sink of placement.h: the decision annotations of
 * design.md section 4 as one JSON merge patch of the pod (with the pod's
 * resourceVersion as a precondition, so a pod that changed meanwhile is
 * re-read and checked before the patch is retried), their removal, the
 * pod's Binding, and reading a pod the watch has not delivered yet. Every
 * request has a deadline.
 *
 * Decisions for different pods write in parallel: each call takes an API
 * client (one connection) from a pool of idle ones, or makes one, and gives
 * it back after. The pool's mutex is held only to take or give a client,
 * never across I/O.
 */
#ifndef GQA_RECORDER_H
#define GQA_RECORDER_H

#include "extender/decide/placement.h"
#include "kube/kubeclient.h"

#define RECORDER_TIMEOUT_MS 3000
/* Reading a pod the cache lacks comes before the decision's own writes,
 * all within kube-scheduler's extender timeout (5 s by default). */
#define RECORDER_FETCH_TIMEOUT_MS 2000
#define RECORDER_CONFLICT_RETRIES 3

struct recorder;

struct recorder *recorder_new(const struct kube_config *cfg, char **err);
void recorder_free(struct recorder *r);
const struct decision_sink *recorder_sink(struct recorder *r);

#endif
