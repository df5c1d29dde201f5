/*
 * admission/webhook.c - AdmissionReview admission.k8s.io/v1; see webhook.h.
 *
 * The review is decoded with cJSON (reviews are small: one object) and the
 * response is written with strbuf, so the uid and message are escaped by the
 * same code as every other response.
 */
#include "admission/webhook.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/strbuf.h"

#define REVIEW_API_VERSION "admission.k8s.io/v1"
#define REVIEW_KIND "AdmissionReview"

static int fail(struct admission_request *req, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Reports why, then drops what was parsed (in that order: the arguments may
 * point into the parsed tree); always -1. */
static int fail(struct admission_request *req, char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vset_error(err, fmt, ap);
    va_end(ap);
    cJSON_Delete(req->root);
    memset(req, 0, sizeof(*req));
    return -1;
}

/* A member that, when present, must be the string want: answering a
 * v1beta1 review in v1 would confuse the API server. Absent is accepted (the
 * API server always sends both; hand-written reviews may not). 0, or -1
 * through fail(). */
static int check_header(struct admission_request *req, char **err, const char *member, const char *want)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req->root, member);
    if (!v)
        return 0;
    const char *s = cJSON_GetStringValue(v);
    if (!s)
        return fail(req, err, "AdmissionReview %s must be the string \"%s\"", member, want);
    if (strcmp(s, want) != 0)
        return fail(req, err, "AdmissionReview %s must be \"%s\", not \"%s\"", member, want, s);
    return 0;
}

static bool known_operation(const char *op)
{
    static const char *const ops[] = {"CREATE", "UPDATE", "DELETE", "CONNECT"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(op, ops[i]) == 0)
            return true;
    return false;
}

/* The request's fields, once root is known to be an object with a request
 * object. 0, or -1 through fail(). */
static int parse_request(const cJSON *request, struct admission_request *req, char **err)
{
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(request, "uid");
    if (!cJSON_IsString(uid) || !*uid->valuestring)
        return fail(req, err, "AdmissionReview request.uid must be a non-empty string");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(request, "kind"), "kind");
    if (!cJSON_IsString(kind))
        return fail(req, err, "AdmissionReview request.kind.kind must be a string");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(request, "namespace");
    if (ns && !cJSON_IsString(ns))
        return fail(req, err, "AdmissionReview request.namespace must be a string");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(request, "operation");
    if (!cJSON_IsString(op) || !known_operation(op->valuestring))
        return fail(req, err, "AdmissionReview request.operation must be one of CREATE, UPDATE, DELETE, CONNECT");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(request, "object");
    bool needs_object = strcmp(op->valuestring, "CREATE") == 0 || strcmp(op->valuestring, "UPDATE") == 0;
    if (obj && !cJSON_IsNull(obj) && !cJSON_IsObject(obj))
        return fail(req, err, "AdmissionReview request.object must be an object");
    if (needs_object && !cJSON_IsObject(obj))
        return fail(req, err, "AdmissionReview request.object is missing for %s", op->valuestring);
    req->uid = uid->valuestring;
    req->kind = kind->valuestring;
    req->namespace_ = ns ? ns->valuestring : NULL;
    req->operation = op->valuestring;
    req->object = cJSON_IsObject(obj) ? obj : NULL;
    return 0;
}

/* cJSON stops after the first value; anything but whitespace after it
 * means the body is not one JSON document. */
static cJSON *parse_whole(const char *body, size_t len)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root)
        return NULL;
    for (; end && end < body + len; end++) {
        if (!strchr(" \t\r\n", *end) || *end == '\0') {
            cJSON_Delete(root);
            return NULL;
        }
    }
    return root;
}

int admission_parse(const char *body, size_t len, struct admission_request *req, char **err)
{
    memset(req, 0, sizeof(*req));
    if (err)
        *err = NULL;
    req->root = body ? parse_whole(body, len) : NULL;
    if (!req->root)
        return fail(req, err, "the body is not valid JSON (an AdmissionReview was expected)");
    if (!cJSON_IsObject(req->root))
        return fail(req, err, "an AdmissionReview must be a JSON object");
    if (check_header(req, err, "apiVersion", REVIEW_API_VERSION) != 0 ||
        check_header(req, err, "kind", REVIEW_KIND) != 0)
        return -1;
    const cJSON *request = cJSON_GetObjectItemCaseSensitive(req->root, "request");
    if (!cJSON_IsObject(request))
        return fail(req, err, "AdmissionReview has no request object");
    return parse_request(request, req, err);
}

void admission_request_free(struct admission_request *req)
{
    if (!req)
        return;
    cJSON_Delete(req->root);
    memset(req, 0, sizeof(*req));
}

/* "[]" (any spacing) adds nothing, so it is left out like NULL. */
static bool patch_is_empty(const char *patch)
{
    if (!patch)
        return true;
    const char *p = patch + strspn(patch, " \t\r\n");
    if (*p++ != '[')
        return false;
    p += strspn(p, " \t\r\n");
    if (*p++ != ']')
        return false;
    return p[strspn(p, " \t\r\n")] == '\0';
}

char *admission_response(const char *uid, bool allowed, int code, const char *message, const char *patch, size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "{\"apiVersion\":\"" REVIEW_API_VERSION "\",\"kind\":\"" REVIEW_KIND "\",\"response\":{\"uid\":");
    strbuf_json_string(&sb, uid ? uid : "");
    strbuf_printf(&sb, ",\"allowed\":%s,\"status\":{\"code\":%d", allowed ? "true" : "false", code);
    if (message) {
        strbuf_puts(&sb, ",\"message\":");
        strbuf_json_string(&sb, message);
    }
    strbuf_putc(&sb, '}');
    if (!patch_is_empty(patch)) {
        strbuf_puts(&sb, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
        base64_append(&sb, (const unsigned char *)patch, strlen(patch));
        strbuf_putc(&sb, '"');
    }
    strbuf_puts(&sb, "}}");
    return strbuf_detach(&sb, len);
}
