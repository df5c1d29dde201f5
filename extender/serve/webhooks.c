/* webhooks.c - admission webhooks and validate-crl. See webhooks.h. */
#include "extender/serve/webhooks.h"
#include "admission/schedulername.h"
#include "admission/webhook.h"
#include "cluster/statefile.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CODE_INVALID 422   /* the ConfigMap is not a valid CRL */
#define CODE_FORBIDDEN 403 /* the pod breaks an enabled CRL */

static void answer(struct http_response *resp, const char *uid, bool allowed, int code, const char *message,
                   const char *patch)
{
    size_t len = 0;
    char *body = admission_response(uid, allowed, code, message, patch, &len);
    http_set_body(resp, 200, CONTENT_JSON, body, len);
}

static bool parse_review(const struct http_request *req, struct admission_request *ar, struct http_response *resp)
{
    char *err = NULL;
    if (admission_parse(req->body ? req->body : "", req->body_len, ar, &err) == 0)
        return true;
    http_json_error(resp, 400, err ? err : "out of memory");
    free(err);
    return false;
}

static bool is_kind(const struct admission_request *ar, const char *kind)
{
    return ar->kind && strcmp(ar->kind, kind) == 0;
}

static bool creates_or_updates(const struct admission_request *ar)
{
    return ar->operation && (!strcmp(ar->operation, "CREATE") || !strcmp(ar->operation, "UPDATE")) && ar->object;
}

static void validate_configmap(struct app *app, const struct admission_request *ar, struct http_response *resp)
{
    struct crl_problems problems = {0};
    const char *ns = app->policy.crl_namespace;
    cache_read_lock(&app->cache);
    if (crl_is_candidate(ar->object, ns))
        crl_validate_against(app->policy.crls, ar->object, ns, &problems);
    cache_unlock(&app->cache);
    char *msg = problems.count ? crl_problems_join(&problems) : NULL;
    if (problems.failed)
        http_json_error(resp, 500, "out of memory while validating");
    else
        answer(resp, ar->uid, problems.count == 0, problems.count ? CODE_INVALID : 200, msg, NULL);
    if (msg)
        log_info("admission: ConfigMap refused: %s", msg);
    free(msg);
    crl_problems_free(&problems);
}

/* Pods: check (and for mutate, default) against the enabled CRLs. */
static void review_pod(struct app *app, const struct admission_request *ar, struct http_response *resp, bool mutate)
{
    struct crl_problems violations = {0};
    struct crl_defaults defaults = {0};
    char *patch = NULL;
    cache_read_lock(&app->cache);
    int rc = crl_check_pod(app->policy.crls, ar->object, &violations, &defaults);
    if (rc == 0 && mutate)
        patch = crl_defaults_patch(ar->object, &defaults);
    cache_unlock(&app->cache);
    if (rc != 0 || violations.failed || (mutate && !patch)) {
        http_json_error(resp, 500, "out of memory while checking the pod");
    } else if (mutate) {
        /* Violations are the validating webhook's to refuse: mutate only adds. */
        answer(resp, ar->uid, true, 200, NULL, patch);
    } else {
        char *msg = violations.count ? crl_problems_join(&violations) : NULL;
        answer(resp, ar->uid, violations.count == 0, violations.count ? CODE_FORBIDDEN : 200, msg, NULL);
        free(msg);
    }
    free(patch);
    crl_problems_free(&violations);
    crl_defaults_free(&defaults);
}

void handle_admission_validate(struct app *app, const struct http_request *req, struct http_response *resp)
{
    struct admission_request ar;
    if (!parse_review(req, &ar, resp))
        return;
    if (is_kind(&ar, "ConfigMap") && creates_or_updates(&ar))
        validate_configmap(app, &ar, resp);
    else if (is_kind(&ar, "Pod") && creates_or_updates(&ar))
        review_pod(app, &ar, resp, false);
    else
        answer(resp, ar.uid, true, 200, NULL, NULL); /* nothing this webhook judges */
    admission_request_free(&ar);
}

void handle_admission_mutate(struct app *app, const struct http_request *req, struct http_response *resp)
{
    struct admission_request ar;
    if (!parse_review(req, &ar, resp))
        return;
    if (is_kind(&ar, "Pod") && ar.operation && !strcmp(ar.operation, "CREATE") && ar.object)
        review_pod(app, &ar, resp, true);
    else
        answer(resp, ar.uid, true, 200, NULL, NULL);
    admission_request_free(&ar);
}

/* Why a pod keeps its scheduler (debug log): the name of the verdict. */
static const char *verdict_name(enum schedname_verdict v)
{
    switch (v) {
    case SCHEDNAME_SET:
        return "set";
    case SCHEDNAME_NO_GPU:
        return "no managed GPU resource";
    case SCHEDNAME_OTHER_SCHEDULER:
        return "names another scheduler";
    case SCHEDNAME_ALREADY:
        return "already names it";
    case SCHEDNAME_NOT_A_POD:
        break;
    }
    return "no pod spec";
}

/* Pods asking for a managed GPU resource go to --set-scheduler-name's
 * scheduler; everything else is allowed unchanged (this webhook never
 * refuses: a pod it cannot read is the API server's to judge). */
void handle_admission_mutate_scheduler_name(struct app *app, const struct http_request *req, struct http_response *resp)
{
    const char *name = app->opts ? app->opts->set_scheduler_name : NULL;
    if (!name) {
        /* Refused as a call failure rather than allowed unchanged: with the
         * webhook configured and the flag forgotten, GPU pods must not go
         * to the default scheduler without anyone noticing. */
        http_json_error(resp, 404,
                        "the scheduler-name webhook is off: start the service with --set-scheduler-name NAME");
        return;
    }
    struct admission_request ar;
    if (!parse_review(req, &ar, resp))
        return;
    enum schedname_verdict v = SCHEDNAME_NOT_A_POD;
    if (is_kind(&ar, "Pod") && ar.operation && !strcmp(ar.operation, "CREATE") && ar.object)
        v = schedname_decide(ar.object, name);
    char *patch = v == SCHEDNAME_SET ? schedname_patch(name) : NULL;
    if (v == SCHEDNAME_SET && !patch)
        http_json_error(resp, 500, "out of memory while writing the patch");
    else
        answer(resp, ar.uid, true, 200, NULL, patch);
    log_debug("admission: scheduler name for pod %s: %s", ar.uid, verdict_name(v));
    free(patch);
    admission_request_free(&ar);
}

/* ---- validate-crl --------------------------------------------------------- */

struct crl_file {
    const char *path;
    cJSON *root;
};

/* Every object in a file: a single object, a List's items, or YAML documents. */
static void collect_objects(const cJSON *v, const cJSON ***out, size_t *n, size_t *cap)
{
    if (cJSON_IsArray(v)) {
        for (const cJSON *d = v->child; d; d = d->next)
            collect_objects(d, out, n, cap);
        return;
    }
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(v, "items");
    if (cJSON_IsArray(items)) {
        collect_objects(items, out, n, cap);
        return;
    }
    if (!cJSON_IsObject(v))
        return;
    const cJSON **p = grow_array(*out, cap, *n + 1, sizeof(**out), 16);
    if (!p)
        return;
    *out = p;
    (*out)[(*n)++] = v;
}

static const char *object_name(const cJSON *obj)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name");
    return cJSON_IsString(name) ? name->valuestring : "(no name)";
}

static int report(const char *path, const cJSON *cm, const struct crl_registry *r, const char *ns)
{
    struct crl_problems problems = {0};
    crl_validate_against(r, cm, ns, &problems);
    for (size_t i = 0; i < problems.count; i++)
        printf("%s: %s: %s\n", path, object_name(cm), problems.items[i]);
    int bad = problems.count > 0 || problems.failed;
    crl_problems_free(&problems);
    return bad;
}

static int parse_args(int argc, char **argv, const char **ns, int *first)
{
    *ns = "kube-public";
    *first = 0;
    while (*first < argc && strncmp(argv[*first], "--", 2) == 0) {
        if (strcmp(argv[*first], "--crl-namespace") == 0 && *first + 1 < argc) {
            *ns = argv[*first + 1];
            *first += 2;
        } else if (strncmp(argv[*first], "--crl-namespace=", 16) == 0) {
            *ns = argv[*first] + 16;
            *first += 1;
        } else {
            fprintf(stderr, "gpu-quota-admission validate-crl: unknown flag %s\n", argv[*first]);
            return -1;
        }
    }
    if (*first >= argc) {
        fprintf(stderr, "gpu-quota-admission validate-crl: give one or more files (YAML or JSON)\n");
        return -1;
    }
    return 0;
}

static int load_files(struct crl_file *files, int n, char **paths)
{
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        char *err = NULL;
        char *text = read_whole_file(paths[i], &len, &err);
        files[i].path = paths[i];
        files[i].root = text ? parse_object_text(text, len, &err) : NULL;
        free(text);
        if (!files[i].root) {
            fprintf(stderr, "gpu-quota-admission validate-crl: %s%s%s\n", text || !err ? paths[i] : "",
                    text || !err ? ": " : "", err ? err : "out of memory");
            free(err);
            return -1;
        }
    }
    return 0;
}

/* A CustomResourceLimitation is a v1 ConfigMap: anything else in the files
 * (a Secret carrying a CRL's data, a Deployment) is a problem of its own,
 * reported and kept out of the registry. */
static bool is_v1_configmap(const cJSON *obj)
{
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, "kind"));
    const char *api = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, "apiVersion"));
    return kind && api && strcmp(kind, "ConfigMap") == 0 && strcmp(api, "v1") == 0;
}

static void report_not_configmap(const char *path, const cJSON *obj)
{
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, "kind"));
    const char *api = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, "apiVersion"));
    printf("%s: %s: kind %s%s%s, apiVersion %s%s%s: a CustomResourceLimitation must be a ConfigMap of apiVersion "
           "v1\n",
           path, object_name(obj), kind ? "\"" : "", kind ? kind : "missing", kind ? "\"" : "", api ? "\"" : "",
           api ? api : "missing", api ? "\"" : "");
}

/* The v1 ConfigMaps among objs[0..n), moved to the front; the count. */
static size_t keep_configmaps(const cJSON **objs, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (is_v1_configmap(objs[i]))
            objs[k++] = objs[i];
    return k;
}

int validate_crl_main(int argc, char **argv)
{
    const char *ns;
    int first;
    if (parse_args(argc, argv, &ns, &first) != 0)
        return 2;
    int nfiles = argc - first;
    struct crl_file *files = calloc((size_t)nfiles, sizeof(*files));
    const cJSON **objs = NULL;
    size_t nobj = 0, cap = 0;
    int rc = 2;
    if (files && load_files(files, nfiles, argv + first) == 0) {
        size_t *start = calloc((size_t)nfiles + 1, sizeof(*start));
        for (int i = 0; start && i < nfiles; i++) {
            start[i] = nobj;
            collect_objects(files[i].root, &objs, &nobj, &cap);
        }
        const cJSON **maps = start ? malloc((nobj ? nobj : 1) * sizeof(*maps)) : NULL;
        size_t nmaps = 0;
        if (maps && nobj) {
            memcpy(maps, objs, nobj * sizeof(*maps));
            nmaps = keep_configmaps(maps, nobj);
        }
        struct crl_registry *r = maps ? crl_registry_build(maps, nmaps, ns) : NULL;
        rc = r ? 0 : 2;
        size_t checked = 0;
        for (int i = 0; r && i < nfiles; i++) {
            size_t end = i + 1 < nfiles ? start[i + 1] : nobj;
            for (size_t k = start[i]; k < end; k++) {
                bool configmap = is_v1_configmap(objs[k]);
                if (configmap && !crl_is_candidate(objs[k], ns))
                    continue; /* a ConfigMap that is no CRL */
                checked++;
                if (!configmap)
                    report_not_configmap(files[i].path, objs[k]);
                if (!configmap || report(files[i].path, objs[k], r, ns))
                    rc = 1;
            }
        }
        if (r)
            fprintf(stderr, "validate-crl: %zu CustomResourceLimitation(s) checked, %s\n", checked,
                    rc == 0 ? "all valid" : "some invalid");
        crl_registry_free(r);
        free(maps);
        free(start);
    }
    for (int i = 0; files && i < nfiles; i++)
        cJSON_Delete(files[i].root);
    free(files);
    free(objs);
    return rc;
}
