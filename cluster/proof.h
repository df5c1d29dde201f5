/*
 * proof.h - proof that a decision on a pod was taken by this service.
 *
 * Owns the gpu-admission.io/proof annotation: an HMAC-SHA256 over what a
 * decision says (the pod's UID, the node, each container's GPU minors, the
 * HAMi devices and the decision time), keyed by a secret the replicas
 * share (--decision-key-file, from a Secret), so that a new leader can
 * verify its predecessor's decisions. Decision annotations anyone could
 * have written (a pod's creator, a direct caller) hold nothing unless the
 * proof matches (docs/security.md, "Who can influence a decision").
 *
 * The key is set once at start-up and only read afterwards: no lock.
 */
#ifndef GQA_PROOF_H
#define GQA_PROOF_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster/podspec.h"

/* "v1:" and 64 hex digits. */
#define DECISION_PROOF_LEN 67
#define DECISION_KEY_MIN 16
#define DECISION_KEY_MAX 4096

struct decision_key {
    unsigned char bytes[DECISION_KEY_MAX];
    size_t len;
    bool random; /* made up by this process: other replicas' decisions cannot be proven */
};

/* The key from a file (a Secret's value: trailing newlines are not part of
 * it), DECISION_KEY_MIN..DECISION_KEY_MAX bytes. 0, or -1 with *err
 * (malloc'd). */
int decision_key_load(struct decision_key *k, const char *path, char **err);
/* A random key of 32 bytes. 0, or -1 when the random source failed. */
int decision_key_random(struct decision_key *k);

/* The proof of pod's decision (node, time, minors, HAMi devices, UID) into
 * out (DECISION_PROOF_LEN + 1 bytes). 0, or -1 when the pod has no
 * decision or memory ran out. */
int decision_prove(const struct decision_key *k, const struct pod_info *pod, char *out);
/* Set pod->decision.proof to the proof of its decision. 0 or -1. */
int decision_sign(const struct decision_key *k, struct pod_info *pod);
/* Does pod's decision carry a proof made with k? */
bool decision_proven(const struct decision_key *k, const struct pod_info *pod);

#endif
