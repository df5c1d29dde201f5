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
 * Nodes.items: kube-scheduler keeps the Node objects it gets back and hands
 * them to its PreScore/Score plugins (PodTopologySpread reads their labels).
 * The Nodes form is walked with the jscan scanner: only each item's
 * metadata.name is decoded, everything else validated and skipped, and each
 * item's span in the body is remembered; the answer carries every kept node
 * as those exact bytes (a memcpy, never a re-serialisation).
 *
 * Errors kube-scheduler can see: ExtenderFilterResult and ExtenderBindingResult
 * have an Error field; HostPriorityList and ExtenderPreemptionResult do not, so
 * their handlers answer errors with a non-200 status instead (handlers.c).
 */
#ifndef GQA_WIRE_H
#define GQA_WIRE_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "extender/decide/namelist.h"
#include "extender/decide/placement.h"
#include "extender/serve/http.h"
#include "lib/jscan.h"
#include "lib/strbuf.h"

enum args_form { ARGS_NODE_NAMES = 0, ARGS_NODES };

struct extender_args {
    cJSON *pod; /* the Pod object */
    enum args_form form;
    size_t count;
    const char *const *names; /* count NUL-terminated names (point into names_buf) */
    const char *names_buf;    /* the names back to back, in order, each with its NUL */
    size_t names_len;         /* bytes of names_buf */
    /* ARGS_NODES: count spans, item i's exact JSON text in the request body
     * (the body must outlive these args); NULL in the NodeNames form. */
    struct jscan_span *items;
    /* ARGS_NODE_NAMES: count spans, name i's string token (quotes included)
     * when it can be answered as it came (no escapes, all ASCII), else
     * {NULL, 0}; NULL in the Nodes form. They point into list->raw. */
    const struct jscan_span *raw_names;
    /* ARGS_NODE_NAMES: the parsed array, shared with the memo (namelist.h),
     * which names, names_buf and raw_names belong to; else NULL. */
    struct name_list *list;
    /* ARGS_NODES: the names and their buffer, owned here. */
    char **own_names;
    char *own_names_buf;
};

/* Decode body[0..len).
 * Returns 0, or -1 with *err a malloc'd message saying what is wrong.
 * A key given twice counts the last time, as in Go's encoding/json. */
int wire_parse_args(const char *body, size_t len, struct extender_args *args, char **err);
/* The same, with memo (or NULL) remembering the last NodeNames array: the
 * same array again is not scanned again (namelist.h). */
int wire_parse_args_memo(const char *body, size_t len, struct name_list_memo *memo, struct extender_args *args,
                         char **err);
void wire_args_free(struct extender_args *args);

/* Large Nodes forms are scanned on two threads when a guessed item boundary
 * holds (wire.c): how often it held (taken) and failed (dropped), for the
 * gqa_nodes_form_splits_total metric. Thread-safe. */
void wire_items_splits(unsigned long long *taken, unsigned long long *dropped);
void wire_render_metrics(struct strbuf *out);

/* ExtenderFilterResult in the request's form: fitting nodes kept (in the
 * Nodes form as the request's bytes of each item), others in FailedNodes or
 * FailedAndUnresolvableNodes with their reasons. ev->verdicts[i] is the
 * verdict on args->names[i]. */
char *wire_filter_result(const struct extender_args *args, const struct evaluation *ev, size_t *len);
/* The same answer in pieces (http.h): the kept Nodes-form items stay in the
 * request body, *text (malloc'd) holds the rest. 0, or -1 on allocation
 * failure (nothing to free). Never more than WIRE_MAX_PIECES pieces: the
 * first runs of kept items are pieces of their own, the runs past the bound
 * are copied into *text. Each piece becomes an iovec entry of the response,
 * and libmicrohttpd 0.9.75 truncates (plain HTTP) or aborts (TLS) answers
 * of more than IOV_MAX (1024) entries; 64 leaves one large run (the usual
 * answer) uncopied. */
#define WIRE_MAX_PIECES 64
int wire_filter_result_pieces(const struct extender_args *args, const struct evaluation *ev, char **text,
                              struct http_piece **pieces, size_t *npieces);
/* ExtenderFilterResult carrying only Error. */
char *wire_filter_error(const char *message, size_t *len);
/* HostPriorityList, relative to the request's lowest score: each requested
 * node scoring above the lowest, with its score 0..10 minus the lowest; the
 * nodes at the lowest are left out. kube-scheduler (v1.27 and v1.31 alike)
 * adds a left-out node's extender score as 0 and adds every extender score
 * to the node's total, and picks the node of the highest total, so taking
 * the same amount from every node's score changes no choice; the answer
 * shrinks from every requested node to the few that stand out (under
 * binpack, the partly used nodes), which kube-scheduler decodes inside its
 * serial scheduling cycle. /inspect/explain keeps the absolute scores. */
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
/* ExtenderPreemptionResult: NodeNameToMetaVictims of the kept nodes and
 * victims, each node's NumPDBViolations never above its victims returned. */
char *wire_preemption_result(const struct preemption_args *a, size_t *len);
/* The NumPDBViolations answered for a node: see wire.c. */
int wire_pdb_violations(int requested, size_t kept, size_t total);

#endif
