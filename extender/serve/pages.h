/*
 * pages.h - the endpoints made for people: GET /ui and GET /inspect/capacity.
 *
 * Owns serving the self-contained page of extender/serve/ui.html (compiled into
 * the binary at build time by cmake/embed.cmake; it loads nothing from
 * elsewhere and a Content-Security-Policy says so to the browser) and the
 * capacity figures it shows on top (capacity.h).
 */
#ifndef GQA_PAGES_H
#define GQA_PAGES_H

#include "extender/app.h"
#include "extender/serve/http.h"

void handle_ui(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_inspect_capacity(struct app *app, const struct http_request *req, struct http_response *resp);

#endif
