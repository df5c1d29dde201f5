/*
 * router.h - which handler answers a method and path.
 *
 * Owns the endpoint table of design.md section 2 (with the filter/predicates and
 * prioritize/priorities aliases), 404 for unknown paths and 405 (with Allow)
 * for a known path with the wrong method, and the metric verb of each route.
 */
#ifndef GQA_ROUTER_H
#define GQA_ROUTER_H

#include <stdbool.h>

#include "extender/app.h"
#include "extender/decide/metrics.h"
#include "extender/serve/http.h"

/* Answer req into resp; returns the verb the request is counted under. */
enum metric_verb router_dispatch(struct app *app, const struct http_request *req, struct http_response *resp);
/* The same, on the probe listener (server.h: --listen-probes): only the
 * health endpoints (/livez, /readyz, /healthz) and /metrics; every other
 * path is 404 there. */
enum metric_verb router_dispatch_probe(struct app *app, const struct http_request *req, struct http_response *resp);
/* May answering req wait on the API server (live, a decision: filter in
 * filter mode, bind)? Those run on the decision workers (workers.h), never
 * on a listener thread. */
bool router_may_block(const struct app *app, const struct http_request *req);
/* Answer req with why instead of dispatching it (no worker free, shutting
 * down): the extender verbs' own error form (200 with Error), else 503. */
enum metric_verb router_refuse(const struct http_request *req, struct http_response *resp, const char *why);

#endif
