/*
 * recorder.h - decisions written to the API server.
 *
 * Owns the live decision sink of placement.h: the decision annotations of
 * DESIGN section 4 as one JSON merge patch of the pod (with the pod's
 * resourceVersion as a precondition, so a pod that changed meanwhile is
 * re-read and checked before the patch is retried), their removal, the
 * pod's Binding, and reading a pod the watch has not delivered yet.
 * Decisions are already serialised by placement; a mutex guards the one
 * API connection anyway.
 */
#ifndef GQA_RECORDER_H
#define GQA_RECORDER_H

#include "extender/placement.h"
#include "kube/kubeclient.h"

#define RECORDER_TIMEOUT_MS 3000
#define RECORDER_CONFLICT_RETRIES 3

struct recorder;

struct recorder *recorder_new(const struct kube_config *cfg, char **err);
void recorder_free(struct recorder *r);
const struct decision_sink *recorder_sink(struct recorder *r);

#endif
