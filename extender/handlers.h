/*
 * handlers.h - what each endpoint of DESIGN section 2 answers.
 *
 * Owns the application state shared by the endpoints (struct app) and one
 * function per endpoint: the extender verbs (filter, prioritize), inspect
 * (nodes, explain), health, readiness, version and metrics. Handlers turn
 * bad input into the documented error shape: a 200 with `Error` on extender
 * paths, a 4xx with {"error": ...} elsewhere.
 */
#ifndef GQA_HANDLERS_H
#define GQA_HANDLERS_H

#include <stdatomic.h>

#include "admission/policy.h"
#include "extender/cache.h"
#include "extender/http.h"
#include "extender/options.h"
#include "extender/placement.h"

struct live;

struct app {
    const struct options *opts;
    struct cluster_cache cache;
    struct placement placement;
    struct admission_policy policy;   /* CRLs and quota from ConfigMaps */
    atomic_int ready;           /* offline: the state is loaded; live: see live_ready() */
    atomic_int is_leader;       /* live with --leader-elect: set by the elector */
    struct live *live;          /* NULL offline */
    char not_ready_reason[160];
};

int app_init(struct app *app, const struct options *opts);
void app_destroy(struct app *app);

void handle_filter(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_prioritize(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_bind(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_preemption(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_explain(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_inspect_nodes(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_inspect_quota(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_inspect_crl(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_inspect_informers(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_inspect_node(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_healthz(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_readyz(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_version(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_metrics(struct app *app, const struct http_request *req, struct http_response *resp);

/* Check a pod object against the enabled CRLs and write their defaults into
 * it, then parse it; a violation becomes the pod's request error (every
 * node refuses it with the CRL's name and rule). NULL with *err when the
 * object is not a usable Pod. */
struct pod_info *app_pod_from_json(struct app *app, cJSON *pod_json, char **err);

/* The explain answer for a parsed pod over every node (used by simulate).
 * Returns a malloc'd JSON text, *fits_somewhere set; NULL on error (*err). */
char *explain_pod(struct app *app, cJSON *pod_json, int *fits_somewhere, char **err);

#endif
