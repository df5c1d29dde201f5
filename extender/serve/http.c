/* http.c - the response helpers every handler uses. See http.h. */
#include "extender/serve/http.h"
#include "lib/strbuf.h"

#include <stdlib.h>
#include <string.h>

void http_set_body(struct http_response *resp, int status, const char *content_type, char *body, size_t len)
{
    free(resp->body);
    free(resp->pieces);
    resp->pieces = NULL;
    resp->npieces = 0;
    if (!body) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        resp->status = 500;
        resp->content_type = CONTENT_JSON;
        resp->body = strdup(oom);
        resp->body_len = resp->body ? sizeof(oom) - 1 : 0;
        return;
    }
    resp->status = status;
    resp->content_type = content_type;
    resp->body = body;
    resp->body_len = len;
}

void http_json_error(struct http_response *resp, int status, const char *message)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"error\":");
    strbuf_json_string(&sb, message);
    strbuf_putc(&sb, '}');
    size_t len = 0;
    char *body = strbuf_detach(&sb, &len);
    http_set_body(resp, status, CONTENT_JSON, body, len);
}

void http_set_pieces(struct http_response *resp, int status, const char *content_type, char *text,
                     struct http_piece *pieces, size_t npieces)
{
    if (!pieces || !text) {
        free(text);
        free(pieces);
        http_set_body(resp, 500, CONTENT_JSON, NULL, 0);
        return;
    }
    http_set_body(resp, status, content_type, text, 0);
    resp->pieces = pieces;
    resp->npieces = npieces;
}

const char *http_query(const struct http_request *req, const char *name)
{
    return req->query ? req->query(req->query_ctx, name) : NULL;
}
