/*
 * kubeclient.h - a small Kubernetes API client on libcurl.
 *
 * Owns talking to the API server as a kube_config (kubeconfig.h) describes
 * it: TLS with the cluster CA, bearer tokens re-read from their file when it changes
 * (projected service-account tokens rotate), client certificates, exec
 * credential plugins (execcred.h: the plugin's credential is used until it
 * expires, and a 401 to it runs the plugin again and retries the request
 * once; a watch refused with 401 leaves the retry to its caller), HTTP/2
 * where libcurl offers it, connection reuse, timeouts, and errors that carry
 * the HTTP status and the API's Status.message.
 *
 * A kube_client is one connection context: not safe for concurrent use.
 * Each thread that talks to the API server (each informer, the decision
 * path, leader election) makes its own with kube_client_new() from one
 * shared, immutable kube_config.
 */
#ifndef GQA_KUBECLIENT_H
#define GQA_KUBECLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "kube/kubeconfig.h"

struct kube_client;

struct kube_client *kube_client_new(const struct kube_config *cfg, char **err);
void kube_client_free(struct kube_client *c);

struct kube_response {
    long status; /* HTTP status; 0 when no answer was received */
    char *body;  /* malloc'd, NUL-terminated (may be empty) */
    size_t body_len;
    char *error; /* malloc'd human message when status is 0 or >= 400:
                                   "GET /api/v1/pods: 403 Forbidden: pods is forbidden: ..."
                                   (the Status.message when the body is a Status) */
};

void kube_response_free(struct kube_response *r);

/* One request. path starts with "/" (query included). body may be NULL.
 * content_type is for the body (e.g. "application/merge-patch+json").
 * timeout_ms bounds the whole request (<= 0: 60 s). Returns 0 when an HTTP answer was
 * received (any status; check r->status), -1 on transport failure (r->error set,
 * status 0). r is overwritten, not freed: free a previous answer first. Only
 * when memory runs out can r->body, or an error that is due, be NULL. */
int kube_request(struct kube_client *c, const char *method, const char *path, const char *content_type,
                 const char *body, size_t body_len, long timeout_ms, struct kube_response *r);

/* A GET whose 200 answer is handed to on_data piece by piece as it arrives,
 * so a list of 160,000 pods never has to exist in memory at once. on_data
 * returns 0 to go on; anything else ends the request, which then fails
 * ("the receiver stopped the answer"). Any other status is collected and
 * reported as kube_request does (r->body, r->error). Returns as kube_request;
 * after a 200, r->body is empty. */
typedef int (*kube_data_fn)(void *ctx, const char *data, size_t len);
int kube_get_stream(struct kube_client *c, const char *path, kube_data_fn on_data, void *ctx, long timeout_ms,
                    struct kube_response *r);

/* A watch stream: GET path (which carries watch=1 and its parameters) and
 * call on_event for every complete newline-delimited JSON line as it
 * arrives (line is NUL-terminated, without its "\n"; empty lines are skipped;
 * a line over 64 MiB fails the watch). on_event returns 0 to continue,
 * non-zero to stop the stream.
 * Returns when the server ends the stream (timeoutSeconds), on_event stops
 * it, *stop becomes non-zero (checked at least every 500 ms), or the
 * transport fails. r receives the status and, for a non-200 answer, the
 * error (the body of a refused watch is not streamed to on_event; that case
 * returns 0 with r->status and r->error set). A stream cut or idle after its
 * 200 returns -1 with r->status 200 and r->error set.
 * Returns 0 on a clean end (server closed, stop, or on_event stop), -1 on a
 * transport failure. idle_timeout_ms: give up when no byte arrives for that
 * long (bookmarks keep a healthy watch busy; <= 0: never). stop may be NULL. */
/* on_event is also called once with len 0 (line "") when the server has
 * accepted the watch (200 and its headers complete), before any event. */
typedef int (*kube_line_fn)(void *ctx, const char *line, size_t len);
int kube_watch(struct kube_client *c, const char *path, kube_line_fn on_event, void *ctx, const volatile int *stop,
               long idle_timeout_ms, struct kube_response *r);

/* Percent-encode a query parameter value (selectors contain '=', '!' and ','). malloc'd. */
char *kube_escape(const char *value);

#endif
