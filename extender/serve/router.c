/* router.c - endpoint table. See router.h. */
#include "extender/serve/router.h"
#include "extender/serve/handlers.h"
#include "extender/serve/pages.h"
#include "extender/serve/webhooks.h"
#include "extender/serve/wire.h"

#include <stdio.h>
#include <string.h>

typedef void (*handler_fn)(struct app *, const struct http_request *, struct http_response *);

struct route {
    const char *path;
    int prefix; /* path is a prefix ending in '/' followed by a name */
    const char *method;
    handler_fn handler;
    enum metric_verb verb;
};

static const struct route routes[] = {
    {"/scheduler/predicates", 0, "POST", handle_filter, VERB_FILTER},
    {"/scheduler/filter", 0, "POST", handle_filter, VERB_FILTER},
    {"/scheduler/priorities", 0, "POST", handle_prioritize, VERB_PRIORITIZE},
    {"/scheduler/prioritize", 0, "POST", handle_prioritize, VERB_PRIORITIZE},
    {"/scheduler/bind", 0, "POST", handle_bind, VERB_BIND},
    {"/scheduler/preemption", 0, "POST", handle_preemption, VERB_PREEMPTION},
    {"/admission/validate", 0, "POST", handle_admission_validate, VERB_ADMISSION},
    {"/admission/mutate", 0, "POST", handle_admission_mutate, VERB_ADMISSION},
    {"/admission/mutate-scheduler-name", 0, "POST", handle_admission_mutate_scheduler_name, VERB_ADMISSION},
    {"/inspect/explain", 0, "POST", handle_explain, VERB_EXPLAIN},
    {"/inspect/explain", 0, "GET", handle_explain, VERB_EXPLAIN}, /* ?namespace=&name=: a pod the cache holds */
    {"/inspect/nodes", 0, "GET", handle_inspect_nodes, VERB_INSPECT},
    {"/inspect/informers", 0, "GET", handle_inspect_informers, VERB_INSPECT},
    {"/inspect/quota", 0, "GET", handle_inspect_quota, VERB_INSPECT},
    {"/inspect/crl", 0, "GET", handle_inspect_crl, VERB_INSPECT},
    {"/inspect/nodes/", 1, "GET", handle_inspect_node, VERB_INSPECT},
    {"/healthz", 0, "GET", handle_healthz, VERB_HEALTH},
    {"/livez", 0, "GET", handle_healthz, VERB_HEALTH},
    {"/readyz", 0, "GET", handle_readyz, VERB_HEALTH},
    {"/version", 0, "GET", handle_version, VERB_VERSION},
    {"/metrics", 0, "GET", handle_metrics, VERB_METRICS},
    {"/inspect/capacity", 0, "GET", handle_inspect_capacity, VERB_INSPECT},
    {"/ui", 0, "GET", handle_ui, VERB_INSPECT},
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static int path_matches(const struct route *r, const char *path)
{
    if (!r->prefix)
        return strcmp(r->path, path) == 0;
    size_t n = strlen(r->path);
    return strncmp(r->path, path, n) == 0 && path[n] != '\0' && strchr(path + n, '/') == NULL;
}

/* GET routes also answer HEAD, as HTTP expects of them. */
static int method_matches(const struct route *r, const char *method)
{
    return strcmp(r->method, method) == 0 || (strcmp(r->method, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

static const struct route *route_of(const struct http_request *req)
{
    for (size_t i = 0; i < NROUTES; i++)
        if (path_matches(&routes[i], req->path) && method_matches(&routes[i], req->method))
            return &routes[i];
    return NULL;
}

enum metric_verb router_dispatch_probe(struct app *app, const struct http_request *req, struct http_response *resp)
{
    const struct route *r = NULL;
    for (size_t i = 0; i < NROUTES && !r; i++)
        if (path_matches(&routes[i], req->path))
            r = &routes[i];
    if (r && (r->verb == VERB_HEALTH || r->verb == VERB_METRICS))
        return router_dispatch(app, req, resp);
    char msg[160];
    snprintf(msg, sizeof(msg), "no endpoint %.80s on the probe listener (health and metrics only)", req->path);
    http_json_error(resp, 404, msg);
    return VERB_OTHER;
}

bool router_may_block(const struct app *app, const struct http_request *req)
{
    /* The decisions, live. Offline (a state file) nothing waits on an API
     * server, and a filter in bind mode only evaluates. */
    if (!app->live)
        return false;
    const struct route *r = route_of(req);
    return r && (r->verb == VERB_BIND || (r->verb == VERB_FILTER && app->placement.cfg.mode == PLACEMENT_FILTER));
}

enum metric_verb router_refuse(const struct http_request *req, struct http_response *resp, const char *why)
{
    const struct route *r = route_of(req);
    size_t len = 0;
    char *body = NULL;
    if (r && r->verb == VERB_BIND)
        body = wire_binding_result(why, &len);
    else if (r && r->verb == VERB_FILTER)
        body = wire_filter_error(why, &len);
    if (body)
        http_set_body(resp, 200, CONTENT_JSON, body, len);
    else
        http_json_error(resp, 503, why);
    return r ? r->verb : VERB_OTHER;
}

enum metric_verb router_dispatch(struct app *app, const struct http_request *req, struct http_response *resp)
{
    const struct route *path_hit = NULL;
    bool get = false; /* the path also answers GET (explain answers GET and POST) */
    for (size_t i = 0; i < NROUTES; i++) {
        const struct route *r = &routes[i];
        if (!path_matches(r, req->path))
            continue;
        if (!path_hit || strcmp(r->method, "GET") != 0)
            path_hit = r;
        get |= strcmp(r->method, "GET") == 0;
        if (method_matches(r, req->method)) {
            r->handler(app, req, resp);
            return r->verb;
        }
    }
    if (path_hit) {
        char msg[160];
        resp->allow = strcmp(path_hit->method, "GET") == 0           ? "GET, HEAD"
                      : get && strcmp(path_hit->method, "POST") == 0 ? "GET, HEAD, POST"
                                                                     : path_hit->method;
        snprintf(msg, sizeof(msg), "method %.16s is not allowed on %.64s; use %s", req->method, req->path, resp->allow);
        http_json_error(resp, 405, msg);
        return path_hit->verb;
    }
    char msg[160];
    snprintf(msg, sizeof(msg), "no endpoint %.100s", req->path);
    http_json_error(resp, 404, msg);
    return VERB_OTHER;
}
