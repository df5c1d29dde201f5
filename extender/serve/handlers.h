/*
 * handlers.h - what each endpoint of design.md section 2 answers.
 *
 * Owns one function per endpoint: the extender verbs (filter, prioritize,
 * bind, preemption), inspect (nodes, explain, quota, CRLs, informers),
 * health, readiness, version and metrics. Handlers turn
 * bad input into the documented error shape: a 200 with `Error` for filter
 * and bind (their answers have that field), a 500 with the message as plain
 * text for prioritize and preemption (theirs do not, and kube-scheduler
 * treats any non-200 as an error), a 4xx with {"error": ...} elsewhere.
 */
#ifndef GQA_HANDLERS_H
#define GQA_HANDLERS_H

#include <stdatomic.h>

#include <cjson/cJSON.h>

#include "extender/app.h"
#include "extender/serve/http.h"

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

/* The explain answer for a parsed pod over every node (used by simulate).
 * Returns a malloc'd JSON text, *fits_somewhere set; NULL on error (*err). */
char *explain_pod(struct app *app, cJSON *pod_json, int *fits_somewhere, char **err);

#endif
