/*
 * http.h - the request/response pair shared by the server and the routes.
 *
 * The server (server.c) owns sockets, TLS and bodies; routes (router.c) and
 * handlers (handlers.c) see only these plain structs, so handlers can be
 * driven directly by `simulate` and by tests.
 */
#ifndef GQA_HTTP_H
#define GQA_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct http_request {
    const char *method;
    const char *path;
    const char *body;
    size_t body_len;
    /* Query parameters: query(query_ctx, name) is the decoded value of
     * ?name=..., or NULL. query may be NULL (no parameters). */
    const char *(*query)(void *query_ctx, const char *name);
    void *query_ctx;
    /* When a decision worker was asked to take it (clock_monotonic_ms), or 0
     * for a request answered where it arrived. */
    int64_t queued_ms;
};

/* A piece of a response body: [ptr, ptr+len). */
struct http_piece {
    const char *ptr;
    size_t len;
};

struct http_response {
    int status;
    char *body; /* malloc'd, owned by the response */
    size_t body_len;
    const char *content_type;            /* static string */
    const char *allow;                   /* Allow header for 405, static, or NULL */
    const char *content_security_policy; /* static, or NULL; when set, nosniff too */
    /* Optional, instead of the flat body: the body is pieces[0..npieces) in
     * order, each pointing into `body` or into the request body (which the
     * server keeps until the answer is sent). Large spans of the request are
     * so answered without being copied together. */
    struct http_piece *pieces; /* malloc'd, owned by the response */
    size_t npieces;
};

#define CONTENT_JSON "application/json"
#define CONTENT_TEXT "text/plain; charset=utf-8"
#define CONTENT_HTML "text/html; charset=utf-8"
#define CONTENT_METRICS "text/plain; version=0.0.4; charset=utf-8"

/* The query parameter name of req, or NULL when absent. */
const char *http_query(const struct http_request *req, const char *name);

/* Set a JSON body {"error": message} with the given status. */
void http_json_error(struct http_response *resp, int status, const char *message);
/* Take ownership of a malloc'd body (NULL means allocation failure -> 500). */
void http_set_body(struct http_response *resp, int status, const char *content_type, char *body, size_t len);
/* Take ownership of a body in pieces (see struct http_response); `text` is
 * what the pieces point into besides the request body. NULL pieces mean
 * allocation failure -> 500. */
void http_set_pieces(struct http_response *resp, int status, const char *content_type, char *text,
                     struct http_piece *pieces, size_t npieces);

#endif
