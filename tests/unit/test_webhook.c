/*
 * test_webhook.c - unit tests for admission/webhook.c: decoding
 * AdmissionReview v1 requests (and every malformed shape named in
 * webhook.h), encoding responses (allowed, denied with code and message,
 * base64 JSON patch checked with OpenSSL's independent decoder), and a
 * mutate round trip through crl.c.
 *
 * JSON in this file is written with single quotes; q() swaps them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "admission/crl.h"
#include "admission/webhook.h"
#include "tests/unit/support.h"

static int parse_text(const char *single_quoted, struct admission_request *req, char **err)
{
    char *body = q(single_quoted);
    int rc = admission_parse(body, strlen(body), req, err);
    free(body);
    return rc;
}

/* base64 -> bytes with OpenSSL (an implementation independent of ours). */
static char *b64_decode(const char *in)
{
    size_t len = strlen(in);
    assert_int_equal(len % 4, 0);
    unsigned char *out = malloc(len / 4 * 3 + 1);
    assert_non_null(out);
    int n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len);
    assert_true(n >= 0);
    /* EVP_DecodeBlock counts the bytes that padding stands for. */
    for (size_t i = len; i > 0 && in[i - 1] == '='; i--)
        n--;
    out[n] = '\0';
    return (char *)out;
}

/* ------------------------------------------------------------------ */
/* Requests                                                             */

static void test_parse_create_configmap(void **state)
{
    (void)state;
    struct admission_request req;
    char *err = (char *)"untouched";
    assert_int_equal(parse_text("{'apiVersion':'admission.k8s.io/v1','kind':'AdmissionReview','request':{"
                                "'uid':'705ab4f5-6393-11e8-b7cc-42010a800002',"
                                "'kind':{'group':'','version':'v1','kind':'ConfigMap'},"
                                "'resource':{'group':'','version':'v1','resource':'configmaps'},"
                                "'namespace':'kube-public','operation':'CREATE',"
                                "'object':{'metadata':{'name':'cf-crl-a-gpu'}},'oldObject':null}}",
                                &req, &err),
                     0);
    assert_null(err);
    assert_string_equal(req.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_string_equal(req.kind, "ConfigMap");
    assert_string_equal(req.namespace_, "kube-public");
    assert_string_equal(req.operation, "CREATE");
    assert_non_null(req.object);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetObjectItemCaseSensitive(req.object, "metadata"), "name")),
                        "cf-crl-a-gpu");
    admission_request_free(&req);
    assert_null(req.root);
    admission_request_free(&req);  /* twice is harmless */
}

static void test_parse_delete_and_cluster_scoped(void **state)
{
    (void)state;
    struct admission_request req;
    char *err = NULL;
    /* DELETE carries oldObject, not object; no namespace for cluster-scoped kinds. */
    assert_int_equal(parse_text("{'request':{'uid':'u','kind':{'kind':'Node'},'operation':'DELETE',"
                                "'object':null,'oldObject':{}}}",
                                &req, &err),
                     0);
    assert_null(req.object);
    assert_null(req.namespace_);
    assert_string_equal(req.operation, "DELETE");
    admission_request_free(&req);
    assert_int_equal(parse_text("{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'CONNECT'}}", &req, &err),
                     0);
    assert_null(req.object);
    admission_request_free(&req);
}

static void test_parse_uses_len(void **state)
{
    (void)state;
    /* Exactly len bytes: trailing garbage beyond len is not read. */
    char *body = q("{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'CREATE','object':{}}}GARBAGE");
    struct admission_request req;
    char *err = NULL;
    assert_int_equal(admission_parse(body, strlen(body) - 7, &req, &err), 0);
    admission_request_free(&req);
    /* Trailing whitespace is fine, trailing bytes are not. */
    char *spaced = q("{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'CREATE','object':{}}} \n");
    assert_int_equal(admission_parse(spaced, strlen(spaced), &req, &err), 0);
    admission_request_free(&req);
    free(spaced);
    assert_int_equal(admission_parse(body, strlen(body), &req, &err), -1);
    assert_string_equal(err, "the body is not valid JSON (an AdmissionReview was expected)");
    free(err);
    free(body);
}

static void test_parse_malformed(void **state)
{
    (void)state;
    const struct {
        const char *body, *err;
    } rows[] = {
        {"", "the body is not valid JSON (an AdmissionReview was expected)"},
        {"not json", "the body is not valid JSON (an AdmissionReview was expected)"},
        {"{'request':", "the body is not valid JSON (an AdmissionReview was expected)"},
        {"{} {}", "the body is not valid JSON (an AdmissionReview was expected)"},
        {"[]", "an AdmissionReview must be a JSON object"},
        {"'review'", "an AdmissionReview must be a JSON object"},
        {"{}", "AdmissionReview has no request object"},
        {"{'request':null}", "AdmissionReview has no request object"},
        {"{'request':[1]}", "AdmissionReview has no request object"},
        {"{'apiVersion':'admission.k8s.io/v1beta1','request':{}}",
         "AdmissionReview apiVersion must be \"admission.k8s.io/v1\", not \"admission.k8s.io/v1beta1\""},
        {"{'apiVersion':1,'request':{}}", "AdmissionReview apiVersion must be the string \"admission.k8s.io/v1\""},
        {"{'kind':'Pod','request':{}}", "AdmissionReview kind must be \"AdmissionReview\", not \"Pod\""},
        {"{'request':{'kind':{'kind':'Pod'},'operation':'CREATE','object':{}}}",
         "AdmissionReview request.uid must be a non-empty string"},
        {"{'request':{'uid':7,'kind':{'kind':'Pod'},'operation':'CREATE','object':{}}}",
         "AdmissionReview request.uid must be a non-empty string"},
        {"{'request':{'uid':'','kind':{'kind':'Pod'},'operation':'CREATE','object':{}}}",
         "AdmissionReview request.uid must be a non-empty string"},
        {"{'request':{'uid':'u','operation':'CREATE','object':{}}}",
         "AdmissionReview request.kind.kind must be a string"},
        {"{'request':{'uid':'u','kind':'Pod','operation':'CREATE','object':{}}}",
         "AdmissionReview request.kind.kind must be a string"},
        {"{'request':{'uid':'u','kind':{'kind':true},'operation':'CREATE','object':{}}}",
         "AdmissionReview request.kind.kind must be a string"},
        {"{'request':{'uid':'u','kind':{'kind':'Pod'},'namespace':3,'operation':'CREATE','object':{}}}",
         "AdmissionReview request.namespace must be a string"},
        {"{'request':{'uid':'u','kind':{'kind':'Pod'},'object':{}}}",
         "AdmissionReview request.operation must be one of CREATE, UPDATE, DELETE, CONNECT"},
        {"{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'create','object':{}}}",
         "AdmissionReview request.operation must be one of CREATE, UPDATE, DELETE, CONNECT"},
        {"{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'CREATE'}}",
         "AdmissionReview request.object is missing for CREATE"},
        {"{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'UPDATE','object':null}}",
         "AdmissionReview request.object is missing for UPDATE"},
        {"{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'CREATE','object':'pod'}}",
         "AdmissionReview request.object must be an object"},
        {"{'request':{'uid':'u','kind':{'kind':'Pod'},'operation':'DELETE','object':[]}}",
         "AdmissionReview request.object must be an object"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        print_message("%s\n", rows[i].body);
        struct admission_request req;
        char *err = NULL;
        assert_int_equal(parse_text(rows[i].body, &req, &err), -1);
        assert_non_null(err);
        assert_string_equal(err, rows[i].err);
        assert_null(req.root);
        assert_null(req.uid);
        free(err);
        /* err may be NULL when the caller does not want the text. */
        assert_int_equal(parse_text(rows[i].body, &req, NULL), -1);
    }
    struct admission_request req;
    char *err = NULL;
    assert_int_equal(admission_parse(NULL, 0, &req, &err), -1);
    free(err);
}

/* ------------------------------------------------------------------ */
/* Responses                                                            */

static void test_response_allowed(void **state)
{
    (void)state;
    size_t len = 0;
    char *out = admission_response("u-1", true, 200, NULL, NULL, &len);
    assert_string_equal(out, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":"
                             "{\"uid\":\"u-1\",\"allowed\":true,\"status\":{\"code\":200}}}");
    assert_int_equal(len, strlen(out));
    free(out);
    /* An empty patch is no patch. */
    out = admission_response("u-1", true, 200, NULL, " [ ]\n", NULL);
    assert_null(strstr(out, "patch"));
    free(out);
    out = admission_response("u-1", true, 200, NULL, "[]", NULL);
    assert_null(strstr(out, "patch"));
    free(out);
}

static void test_response_denied(void **state)
{
    (void)state;
    const char *msg = "container \"main\": tencent.com/vcuda-core is required in limits\nby X";
    char *out = admission_response("a\"b", false, 403, msg, NULL, NULL);
    assert_string_equal(out, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":"
                             "{\"uid\":\"a\\\"b\",\"allowed\":false,\"status\":{\"code\":403,\"message\":"
                             "\"container \\\"main\\\": tencent.com/vcuda-core is required in limits\\nby X\"}}}");
    cJSON *doc = cJSON_Parse(out);
    cJSON *resp = cJSON_GetObjectItemCaseSensitive(doc, "response");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "uid")), "a\"b");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(resp, "allowed")));
    cJSON *status = cJSON_GetObjectItemCaseSensitive(resp, "status");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(status, "code")->valueint, 403);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(status, "message")), msg);
    cJSON_Delete(doc);
    free(out);
    out = admission_response(NULL, false, 400, "bad", NULL, NULL);
    assert_non_null(strstr(out, "\"uid\":\"\""));
    free(out);
}

static void test_response_patch(void **state)
{
    (void)state;
    const char *patch = "[{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/tencent.com~1vcuda-memory\","
                        "\"value\":\"4\"}]";
    char *out = admission_response("u", true, 200, NULL, patch, NULL);
    cJSON *doc = cJSON_Parse(out);
    cJSON *resp = cJSON_GetObjectItemCaseSensitive(doc, "response");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "patchType")), "JSONPatch");
    char *decoded = b64_decode(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "patch")));
    assert_string_equal(decoded, patch);
    free(decoded);
    cJSON_Delete(doc);
    free(out);
}

/* RFC 4648 section 10 vectors, through the patch field. */
static void test_base64_vectors(void **state)
{
    (void)state;
    const struct {
        const char *in, *out;
    } rows[] = {{"f", "Zg=="},     {"fo", "Zm8="},         {"foo", "Zm9v"},
                {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
                {"\xff\xfe\xfd", "//79"}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *out = admission_response("u", true, 200, NULL, rows[i].in, NULL);
        char want[64];
        snprintf(want, sizeof(want), "\"patchType\":\"JSONPatch\",\"patch\":\"%s\"}}", rows[i].out);
        assert_non_null(strstr(out, want));
        free(out);
    }
}

/* AdmissionReview in, CRL check, patch, AdmissionReview out, patch decoded. */
static void test_mutate_round_trip(void **state)
{
    (void)state;
    char *core = q("{'metadata':{'name':'cf-crl-gpu-manager-vcuda-core','namespace':'kube-public','labels':{"
                   "'features.alauda.io/type':'CustomResourceLimitation','features.alauda.io/group':'gpu-manager',"
                   "'features.alauda.io/enabled':'true'}},'data':{'key':'tencent.com/vcuda-core',"
                   "'dataType':'integer','defaultValue':'20','group':'gpu-manager','limits':'optional',"
                   "'requests':'disabled'}}");
    char *mem = q("{'metadata':{'name':'cf-crl-gpu-manager-vcuda-memory','namespace':'kube-public','labels':{"
                  "'features.alauda.io/type':'CustomResourceLimitation','features.alauda.io/group':'gpu-manager',"
                  "'features.alauda.io/enabled':'true'}},'data':{'key':'tencent.com/vcuda-memory',"
                  "'dataType':'integer','defaultValue':'4','group':'gpu-manager','limits':'optional',"
                  "'requests':'disabled'}}");
    cJSON *cms[2] = {cJSON_Parse(core), cJSON_Parse(mem)};
    struct crl_registry *r = crl_registry_build((const cJSON *const *)cms, 2, "kube-public");
    assert_non_null(r);
    assert_int_equal(r->count, 2);

    struct admission_request req;
    char *err = NULL;
    assert_int_equal(parse_text("{'apiVersion':'admission.k8s.io/v1','kind':'AdmissionReview','request':{"
                                "'uid':'pod-1','kind':{'kind':'Pod'},'namespace':'default','operation':'CREATE',"
                                "'object':{'metadata':{'name':'p'},'spec':{'containers':[{'name':'main',"
                                "'resources':{'limits':{'tencent.com/vcuda-core':'50'}}}]}}}}",
                                &req, &err),
                     0);
    struct crl_problems v = {0};
    struct crl_defaults d = {0};
    assert_int_equal(crl_check_pod(r, req.object, &v, &d), 0);
    assert_int_equal(v.count, 0);
    char *patch = crl_defaults_patch(req.object, &d);
    char *out = admission_response(req.uid, true, 200, NULL, patch, NULL);
    cJSON *doc = cJSON_Parse(out);
    cJSON *resp = cJSON_GetObjectItemCaseSensitive(doc, "response");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "uid")), "pod-1");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed")));
    char *decoded = b64_decode(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "patch")));
    assert_string_equal(
        decoded,
        "[{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/limits/tencent.com~1vcuda-memory\",\"value\":\"4\"},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests\",\"value\":{}},"
        "{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests/tencent.com~1vcuda-memory\",\"value\":\"4\"}]");
    free(decoded);
    cJSON_Delete(doc);
    free(out);
    free(patch);
    crl_defaults_free(&d);
    crl_problems_free(&v);
    admission_request_free(&req);
    crl_registry_free(r);
    cJSON_Delete(cms[0]);
    cJSON_Delete(cms[1]);
    free(core);
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_create_configmap),
        cmocka_unit_test(test_parse_delete_and_cluster_scoped),
        cmocka_unit_test(test_parse_uses_len),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_response_allowed),
        cmocka_unit_test(test_response_denied),
        cmocka_unit_test(test_response_patch),
        cmocka_unit_test(test_base64_vectors),
        cmocka_unit_test(test_mutate_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
