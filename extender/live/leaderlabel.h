/*
 * leaderlabel.h - routing to the leader by a label on its pod.
 *
 * Owns the label gpu-admission.io/leader=true that the extender Service
 * selects on (manifests/services.yaml), so verbs reach the Lease holder
 * while every synced replica reports ready. As leader election callbacks
 * (leader.h): right after taking the Lease, before deciding, the leader
 * labels its own pod (POD_NAMESPACE/POD_NAME, from the downward API) and
 * takes the label off every other pod of its namespace that still carries
 * it (a previous leader that died); a replica that loses or releases the
 * Lease takes the label off its own pod first.
 *
 * Runs on the election thread only, which is the only user of this
 * module's API client. Every request has a deadline.
 */
#ifndef GQA_LEADERLABEL_H
#define GQA_LEADERLABEL_H

#include <stdbool.h>

#include "kube/kubeclient.h"
#include "kube/leader.h"

#define LEADER_LABEL "gpu-admission.io/leader"
#define LEADER_LABEL_TIMEOUT_MS 2000

struct leader_label;

/* For the pod ns/name. NULL with *err (malloc'd) when the client cannot be made. */
struct leader_label *leader_label_new(const struct kube_config *kube, const char *ns, const char *pod, char **err);
void leader_label_free(struct leader_label *l);
/* The callbacks to give leader_start_with; valid while l lives. */
const struct leader_callbacks *leader_label_callbacks(struct leader_label *l);

/* The merge patch that sets (true) or removes the label (exposed for tests). malloc'd. */
char *leader_label_patch(bool set);

#endif
