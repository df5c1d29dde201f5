/* pages.c - /ui and /inspect/capacity. See pages.h. */
#include "extender/serve/pages.h"
#include "extender/decide/capacity.h"
#include "lib/strbuf.h"

#include <stdlib.h>
#include <string.h>

/* Generated from extender/serve/ui.html (cmake/embed.cmake). */
extern const unsigned char gqa_ui_html[];
extern const size_t gqa_ui_html_len;

/* Only what the page itself carries: inline script and style, requests to
 * this service (the inspect API, relative to the page), no frames. */
static const char ui_policy[] = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                                "frame-ancestors 'none'";

void handle_ui(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)app;
    (void)req;
    char *body = malloc(gqa_ui_html_len + 1);
    if (body)
        memcpy(body, gqa_ui_html, gqa_ui_html_len + 1);
    http_set_body(resp, 200, CONTENT_HTML, body, gqa_ui_html_len);
    if (body)
        resp->content_security_policy = ui_policy;
}

void handle_inspect_capacity(struct app *app, const struct http_request *req, struct http_response *resp)
{
    (void)req;
    struct strbuf sb;
    strbuf_init(&sb);
    cache_expire(&app->cache, clock_realtime_ns());
    capacity_render_json(&app->cache, &sb);
    size_t len = 0;
    char *body = strbuf_detach(&sb, &len);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
}
