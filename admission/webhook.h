/*
 * admission/webhook.h - AdmissionReview admission.k8s.io/v1 in and out.
 *
 * Owns the admission webhooks' wire format: decoding a review (uid, kind,
 * namespace, operation, object), and encoding the response (uid echoed,
 * allowed, status.code and status.message, and for mutation a base64 JSON
 * patch with patchType JSONPatch). The decisions themselves come from crl.h.
 */
#ifndef GQA_ADMISSION_WEBHOOK_H
#define GQA_ADMISSION_WEBHOOK_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

struct admission_request {
    cJSON *root; /* owns everything below */
    const char *uid;
    const char *kind;       /* request.kind.kind: "Pod", "ConfigMap" */
    const char *namespace_; /* NULL when absent (cluster-scoped objects) */
    const char *operation;  /* CREATE, UPDATE, DELETE, CONNECT */
    const cJSON *object;    /* request.object (NULL for DELETE) */
};

/* 0, or -1 with *err (malloc'd; NULL only when out of memory) naming what is
 * wrong with the review: not JSON, not an object, apiVersion/kind present but
 * not admission.k8s.io/v1 / AdmissionReview, no request object, uid not a
 * non-empty string, kind.kind not a string, namespace present but not a
 * string, an unknown operation, object missing for CREATE/UPDATE or not an
 * object. body need not be NUL-terminated. On error req is zeroed. */
int admission_parse(const char *body, size_t len, struct admission_request *req, char **err);
void admission_request_free(struct admission_request *req);

/* The AdmissionReview response (malloc'd JSON, NULL when out of memory;
 * *len set when len is not NULL). status is always written with code;
 * status.message only when message is not NULL. patch (JSON text of an
 * RFC 6902 patch) is base64-encoded (standard alphabet, padded) into
 * response.patch with patchType JSONPatch when not NULL and not "[]". */
char *admission_response(const char *uid, bool allowed, int code, const char *message, const char *patch, size_t *len);

#endif
