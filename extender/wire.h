/*
 * wire.h - kube-scheduler's extender wire format (k8s.io/kube-scheduler/extender/v1).
 *
 * Owns decoding ExtenderArgs and encoding ExtenderFilterResult and
 * HostPriorityList with the exact Go field names (no json tags upstream):
 * Pod, Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error,
 * Host, Score.
 *
 * ExtenderArgs comes in two forms. With nodeCacheCapable: true it carries
 * NodeNames, and the answer must carry NodeNames. Otherwise it carries Nodes, a
 * full v1 NodeList (about 5.6 KB per node), and the answer must carry
 * Nodes.items, from which kube-scheduler reads only the names. The Nodes form
 * is walked with the jscan scanner: only each item's metadata.name is
 * decoded, everything else validated and skipped; the answer's items carry
 * only {"metadata":{"name":...}} instead of re-serialised Node objects.
 */
#ifndef GQA_WIRE_H
#define GQA_WIRE_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "extender/placement.h"
#include "lib/jscan.h"

enum args_form { ARGS_NODE_NAMES = 0, ARGS_NODES };

struct extender_args {
    cJSON *pod; /* the Pod object */
    enum args_form form;
    size_t count;
    const char **names; /* count NUL-terminated names (point into names_buf) */
    char *names_buf;
};

/* Decode body[0..len).
 * Returns 0, or -1 with *err a malloc'd message saying what is wrong. */
int wire_parse_args(const char *body, size_t len, struct extender_args *args, char **err);
void wire_args_free(struct extender_args *args);

/* ExtenderFilterResult in the request's form: fitting nodes kept, others in
 * FailedNodes or FailedAndUnresolvableNodes with their reasons. */
char *wire_filter_result(const struct extender_args *args, const struct evaluation *ev, size_t *len);
/* ExtenderFilterResult carrying only Error. */
char *wire_filter_error(const char *message, size_t *len);
/* HostPriorityList: every requested node with its score 0..10. */
char *wire_priority_list(const struct extender_args *args, const struct evaluation *ev, size_t *len);

/* ExtenderBindingArgs: PodName, PodNamespace, PodUID, Node. */
struct binding_args {
    char *pod_name, *pod_namespace, *pod_uid, *node;
};

int wire_parse_binding(const char *body, size_t len, struct binding_args *b, char **err);
void wire_binding_free(struct binding_args *b);
/* ExtenderBindingResult: {"Error": message or ""}. */
char *wire_binding_result(const char *error, size_t *len);

/* ExtenderPreemptionArgs: Pod, and the victims per node either as full pods
 * (NodeNameToVictims) or by UID (NodeNameToMetaVictims). */
struct preemption_args {
    cJSON *root; /* owns everything below */
    const cJSON *pod;
    size_t count;
    struct preempt_node *nodes; /* victims point into root */
    const char **uids;          /* all victims' UIDs, back to back */
    int *pdb_violations;        /* per node */
};

int wire_parse_preemption(const char *body, size_t len, struct preemption_args *a, char **err);
void wire_preemption_free(struct preemption_args *a);
/* ExtenderPreemptionResult: NodeNameToMetaVictims of the kept nodes and victims. */
char *wire_preemption_result(const struct preemption_args *a, const char *error, size_t *len);

#endif
