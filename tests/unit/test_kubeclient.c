/*
 * test_kubeclient.c - unit tests for extender/kubeclient.c: kubeconfig and
 * in-cluster configuration, and requests and watches against a small
 * HTTP/1.1 server that the test runs itself on 127.0.0.1 (plain HTTP; TLS is
 * covered by the integration tests against tests/apisim).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kube/kubeclient.h"
#include "lib/strbuf.h"
#include "tests/unit/fakeapi.h"
#include "lib/version.h"

/* ---- files ---------------------------------------------------------------- */

#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlQ0EKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
#define CERT_PEM "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n"
#define KEY_PEM "-----BEGIN PRIVATE KEY-----\nMIIEkey\n-----END PRIVATE KEY-----\n"

static char *path_in(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static void write_in(const char *dir, const char *name, const char *text)
{
    char *p = path_in(dir, name);
    write_text(p, text);
    free(p);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tree(char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* Per-test temporary directory in *state, removed even when the test fails. */
static int temp_dir_setup(void **state)
{
    char tmpl[] = "/tmp/gqa-kubeclient-XXXXXX";
    if (!mkdtemp(tmpl) || !(*state = strdup(tmpl)))
        return -1;
    return 0;
}

static int temp_dir_teardown(void **state)
{
    remove_tree(*state);
    return 0;
}

/* ---- kubeconfig ----------------------------------------------------------- */

/* Write text as DIR/config and load it. */
static struct kube_config *load_kc(const char *dir, const char *text, char **err)
{
    char *path = path_in(dir, "config");
    write_text(path, text);
    struct kube_config *cfg = kube_config_from_file(path, err);
    free(path);
    return cfg;
}

static void test_kubeconfig_files_and_token(void **state)
{
    char *dir = *state;
    write_in(dir, "ca.crt", CA_PEM);
    write_in(dir, "client.crt", CERT_PEM);
    write_in(dir, "client.key", KEY_PEM);
    char *err = NULL;
    struct kube_config *cfg = load_kc(dir,
        "apiVersion: v1\n"
        "kind: Config\n"
        "current-context: prod\n"
        "contexts:\n"
        "- name: dev\n  context: {cluster: devc, user: devu}\n"
        "- name: prod\n  context:\n    cluster: prodc\n    user: produ\n    namespace: gpu\n"
        "clusters:\n"
        "- name: devc\n  cluster: {server: 'https://dev:6443'}\n"
        "- name: prodc\n  cluster:\n    server: https://10.0.0.1:6443//\n    certificate-authority: ca.crt\n"
        "users:\n"
        "- name: devu\n  user: {token: dev-token}\n"
        "- name: produ\n  user:\n    token: prod-token\n    client-certificate: client.crt\n"
        "    client-key: ./client.key\n",
        &err);
    assert_null(err);
    assert_non_null(cfg);
    assert_string_equal(cfg->server, "https://10.0.0.1:6443");
    char *ca = path_in(dir, "ca.crt"), *crt = path_in(dir, "client.crt"), *key = path_in(dir, "./client.key");
    char *src = path_in(dir, "config");
    assert_string_equal(cfg->ca_file, ca);
    assert_string_equal(cfg->client_cert_file, crt);
    assert_string_equal(cfg->client_key_file, key);
    assert_string_equal(cfg->token, "prod-token");
    assert_string_equal(cfg->source, src);
    assert_null(cfg->ca_data);
    assert_null(cfg->client_cert_data);
    assert_null(cfg->client_key_data);
    assert_null(cfg->token_file);
    assert_int_equal(cfg->insecure_skip_tls_verify, 0);
    free(ca), free(crt), free(key), free(src);
    kube_config_free(cfg);
}

static void test_kubeconfig_fixture_data_fields(void **state)
{
    (void)state;
    const char *root = getenv("GQA_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/unit/fixtures/kubeconfig/kind.yaml", root ? root : ".");
    if (access(path, R_OK) != 0)
        fail_msg("%s is not readable (set GQA_SOURCE_DIR to the repository root)", path);
    char *err = NULL;
    struct kube_config *cfg = kube_config_from_file(path, &err);
    if (!cfg)
        fail_msg("unexpected error: %s", err ? err : "(none)");
    assert_string_equal(cfg->server, "https://127.0.0.1:39017");
    assert_string_equal(cfg->ca_data, CA_PEM);
    assert_string_equal(cfg->client_cert_data, CERT_PEM);
    assert_string_equal(cfg->client_key_data, KEY_PEM);
    assert_null(cfg->ca_file);
    assert_null(cfg->client_cert_file);
    assert_null(cfg->client_key_file);
    assert_null(cfg->token);
    kube_config_free(cfg);
}

/* base64 as people paste it: wrapped lines (a YAML block keeps them),
 * padding dropped. */
static void test_kubeconfig_base64_forms(void **state)
{
    char *dir = *state;
    static const char *const forms[] = {
        "certificate-authority-data: |\n      LS0tLS1CRUdJTiBDRVJU\n      SUZJQ0FURS0tLS0tCk1J\n"
        "      SUJmYWtlQ0EKLS0tLS1F\n      TkQgQ0VSVElGSUNBVEUt\n      LS0tLQo=\n",
        "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlQ0EKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo\n",
        "certificate-authority-data: \"" CA_B64 "\"\n",
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        char text[2048];
        snprintf(text, sizeof(text),
                 "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
                 "clusters:\n- name: k\n  cluster:\n    server: https://k\n    %s", forms[i]);
        char *err = NULL;
        struct kube_config *cfg = load_kc(dir, text, &err);
        if (!cfg)
            fail_msg("form %zu: %s", i, err ? err : "(none)");
        assert_string_equal(cfg->ca_data, CA_PEM);
        kube_config_free(cfg);
    }
}

/* JSON (as apisim writes it), tokenFile, insecure-skip-tls-verify, a user
 * left out (anonymous), and *-data winning over the file, as in kubectl. */
static void test_kubeconfig_json_and_precedence(void **state)
{
    char *dir = *state;
    write_in(dir, "tok", "abc\n");
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"current-context\": \"x\", \"contexts\": [{\"name\": \"x\", \"context\": {\"cluster\": \"k\", "
             "\"user\": \"u\"}}], \"clusters\": [{\"name\": \"k\", \"cluster\": {\"server\": \"10.1.2.3:443\", "
             "\"insecure-skip-tls-verify\": true, \"certificate-authority\": \"/nonexistent/ignored.crt\", "
             "\"certificate-authority-data\": \"%s\"}}], \"users\": [{\"name\": \"u\", \"user\": "
             "{\"tokenFile\": \"%s/tok\"}}]}",
             CA_B64, dir);
    char *err = NULL;
    struct kube_config *cfg = load_kc(dir, text, &err);
    if (!cfg)
        fail_msg("%s", err ? err : "(none)");
    assert_string_equal(cfg->server, "https://10.1.2.3:443");
    assert_int_equal(cfg->insecure_skip_tls_verify, 1);
    assert_string_equal(cfg->ca_data, CA_PEM);
    assert_null(cfg->ca_file);
    char *tok = path_in(dir, "tok");
    assert_string_equal(cfg->token_file, tok);
    free(tok);
    assert_null(cfg->token);
    kube_config_free(cfg);

    cfg = load_kc(dir,
                  "current-context: a\ncontexts: [{name: a, context: {cluster: k}}]\n"
                  "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:8080'}}]\n",
                  &err);
    assert_non_null(cfg);
    assert_string_equal(cfg->server, "http://127.0.0.1:8080");
    assert_null(cfg->token);
    assert_null(cfg->token_file);
    assert_null(cfg->client_cert_file);
    kube_config_free(cfg);

    cfg = load_kc(dir,
                  "current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                  "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                  "users: [{name: u, user: {token-file: tok}}]\n",
                  &err);
    assert_non_null(cfg);
    assert_non_null(strstr(cfg->token_file, "/tok"));
    kube_config_free(cfg);
}

/* A kubeconfig named without a directory: its files are next to it. */
static void test_kubeconfig_relative_to_cwd(void **state)
{
    char *dir = *state;
    write_in(dir, "ca.crt", CA_PEM);
    write_in(dir, "kc",
             "current-context: a\ncontexts: [{name: a, context: {cluster: k}}]\n"
             "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority: ca.crt}}]\n");
    char old[4096];
    assert_non_null(getcwd(old, sizeof(old)));
    assert_int_equal(chdir(dir), 0);
    char *err = NULL;
    struct kube_config *cfg = kube_config_from_file("kc", &err);
    assert_int_equal(chdir(old), 0);
    assert_non_null(cfg);
    assert_string_equal(cfg->ca_file, "./ca.crt");
    assert_string_equal(cfg->source, "kc");
    kube_config_free(cfg);
}

struct kc_error_case {
    const char *text;
    const char *message;    /* after "kubeconfig DIR/config: "; %s is DIR */
};

#define KC_HEAD "current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
#define KC_CLUSTER "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"

static const struct kc_error_case kc_errors[] = {
    {"kind: Config\n", "no current-context"},
    {"current-context: ''\n", "no current-context"},
    {"- a\n- b\n", "not a kubeconfig (the document is not a mapping)"},
    {"current-context: [a\n", "line 2, column 1: did not find expected ',' or ']' (while parsing a flow sequence at line 1, column 18)"},
    {"current-context: foo\n", "current-context \"foo\" not found in contexts"},
    {"current-context: foo\ncontexts: [{name: bar, context: {cluster: k}}]\n",
     "current-context \"foo\" not found in contexts"},
    {"current-context: a\ncontexts: {a: b}\n", "contexts must be a list"},
    {"current-context: 7\n", "top level: current-context must be a string"},
    {"current-context: a\ncontexts: [{name: a}]\n", "context \"a\" has no cluster"},
    {"current-context: a\ncontexts: [{name: a, context: [x]}]\n", "context \"a\": context must be a mapping"},
    {"current-context: a\ncontexts: [{name: a, context: {cluster: k}}]\n", "cluster \"k\" not found in clusters"},
    {"current-context: a\ncontexts: [{name: a, context: {cluster: k}}]\nclusters: [{name: k, cluster: {}}]\n",
     "cluster \"k\" has no server"},
    {"current-context: a\ncontexts: [{name: a, context: {cluster: k}}]\nclusters: [{name: k}]\n",
     "cluster \"k\" has no server"},
    {KC_HEAD "clusters: [{name: k, cluster: {server: 5}}]\n", "cluster \"k\": server must be a string"},
    {KC_HEAD KC_CLUSTER, "user \"u\" not found in users"},
    {KC_HEAD "clusters: [{name: k, cluster: {server: 'https://k', insecure-skip-tls-verify: maybe}}]\n",
     "cluster \"k\": insecure-skip-tls-verify must be true or false"},
    {KC_HEAD "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority-data: 'LS0t*'}}]\n",
     "cluster \"k\": certificate-authority-data is not valid base64"},
    {KC_HEAD "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority-data: 'aGVsbG8=='}}]\n",
     "cluster \"k\": certificate-authority-data is not valid base64"},
    {KC_HEAD "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority-data: 'aGVsbG8=aGk='}}]\n",
     "cluster \"k\": certificate-authority-data is not valid base64"},
    {KC_HEAD "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority-data: 'aGVsbG8='}}]\n",
     "cluster \"k\": certificate-authority-data does not hold PEM data"},
    {KC_HEAD "clusters: [{name: k, cluster: {server: 'https://k', certificate-authority: missing.crt}}]\n",
     "cluster \"k\": certificate-authority %s/missing.crt: No such file or directory"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {command: aws}}}]\n",
     "user \"u\": exec.apiVersion is missing (client.authentication.k8s.io/v1 or "
     "client.authentication.k8s.io/v1beta1)"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1alpha1, "
                        "command: aws}}}]\n",
     "user \"u\": exec.apiVersion client.authentication.k8s.io/v1alpha1 is not supported "
     "(client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1)"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                        "command: aws}}}]\n",
     "user \"u\": exec.interactiveMode must be given for client.authentication.k8s.io/v1 (Never, IfAvailable or "
     "Always)"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                        "interactiveMode: Sometimes, command: aws}}}]\n",
     "user \"u\": exec.interactiveMode Sometimes is not Never, IfAvailable or Always"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1}}}]\n",
     "user \"u\": exec.command is missing"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                        "command: aws, args: [1]}}}]\n",
     "user \"u\": exec.args must be a list of strings"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                        "command: aws, env: [{name: 'A=B', value: c}]}}}]\n",
     "user \"u\": exec.env entries need a name (without '=') and a string value"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                        "command: aws, env: {A: b}}}}]\n",
     "user \"u\": exec.env must be a list of {name, value}"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                        "command: aws, provideClusterInfo: yes please}}}]\n",
     "user \"u\": provideClusterInfo must be true or false"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {token: t, exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                        "command: aws}}}]\n",
     "user \"u\": exec cannot be combined with token, tokenFile or a client certificate"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {exec: [aws]}}]\n", "user \"u\": exec must be a mapping"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n",
     "user \"u\": auth-provider plugins are not supported (their exec replacements are: gke-gcloud-auth-plugin, "
     "kubelogin; or use a token, tokenFile or a client certificate)"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {username: admin, password: secret}}]\n",
     "user \"u\": basic authentication (username/password) is not supported"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {client-certificate-data: '" CA_B64 "'}}]\n",
     "user \"u\" has a client certificate but no client key"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {client-key-data: '" CA_B64 "'}}]\n",
     "user \"u\" has a client key but no client certificate"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {tokenFile: /nonexistent/token}}]\n",
     "user \"u\": tokenFile /nonexistent/token: No such file or directory"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {token: [1]}}]\n", "user \"u\": token must be a string"},
    {KC_HEAD KC_CLUSTER "users: [{name: u, user: {client-key: k.pem, client-certificate: c.pem}}]\n",
     "user \"u\": client-certificate %s/c.pem: No such file or directory"},
};

static void test_kubeconfig_errors(void **state)
{
    char *dir = *state;
    for (size_t i = 0; i < sizeof(kc_errors) / sizeof(kc_errors[0]); i++) {
        char *err = NULL;
        struct kube_config *cfg = load_kc(dir, kc_errors[i].text, &err);
        if (cfg)
            fail_msg("case %zu: expected an error", i);
        assert_non_null(err);
        char expected[1024], message[512];
        snprintf(message, sizeof(message), kc_errors[i].message, dir);
        snprintf(expected, sizeof(expected), "kubeconfig %s/config: %s", dir, message);
        if (strcmp(err, expected) != 0)
            fail_msg("case %zu:\n got      %s\n expected %s", i, err, expected);
        free(err);
    }
    char *err = NULL;
    assert_null(kube_config_from_file("/nonexistent/kubeconfig", &err));
    assert_string_equal(err, "kubeconfig /nonexistent/kubeconfig: No such file or directory");
    free(err);
    assert_null(kube_config_from_file("/nonexistent/kubeconfig", NULL));   /* err is optional */
}

/* ---- in-cluster ----------------------------------------------------------- */

static void test_in_cluster(void **state)
{
    char *dir = *state;
    write_in(dir, "ca.crt", CA_PEM);
    write_in(dir, "token", "sa-token\n");
    setenv("GQA_SERVICEACCOUNT_DIR", dir, 1);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    char *err = NULL;
    struct kube_config *cfg = kube_config_in_cluster(&err);
    assert_null(err);
    assert_non_null(cfg);
    assert_string_equal(cfg->server, "https://10.96.0.1:443");
    char *ca = path_in(dir, "ca.crt"), *tok = path_in(dir, "token");
    assert_string_equal(cfg->ca_file, ca);
    assert_string_equal(cfg->token_file, tok);
    assert_null(cfg->token);
    assert_string_equal(cfg->source, "in-cluster");
    kube_config_free(cfg);

    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    cfg = kube_config_in_cluster(&err);
    assert_non_null(cfg);
    assert_string_equal(cfg->server, "https://[fd00:10:96::1]:443");
    kube_config_free(cfg);

    unlink(tok);
    assert_null(kube_config_in_cluster(&err));
    char expected[1024];
    snprintf(expected, sizeof(expected), "in-cluster config: %s: No such file or directory", tok);
    assert_string_equal(err, expected);
    free(err);
    unlink(ca);
    assert_null(kube_config_in_cluster(&err));
    snprintf(expected, sizeof(expected), "in-cluster config: %s: No such file or directory", ca);
    assert_string_equal(err, expected);
    free(err);

    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_null(kube_config_in_cluster(&err));
    assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set"));
    free(err);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_null(kube_config_in_cluster(&err));
    free(err);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("GQA_SERVICEACCOUNT_DIR");
    free(ca), free(tok);
}

/* ---- the test server's answers (tests/unit/fakeapi) ---------------------- */

#define STATUS_409 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\"," \
    "\"message\":\"Operation cannot be fulfilled on pods \\\"b\\\": the object has been modified; please apply " \
    "your changes to the latest version and try again\",\"reason\":\"Conflict\",\"details\":{\"name\":\"b\"," \
    "\"kind\":\"pods\"},\"code\":409}"
#define STATUS_410 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\"," \
    "\"message\":\"too old resource version: 1 (5)\",\"reason\":\"Expired\",\"code\":410}"
#define POD_JSON "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"b\",\"namespace\":\"a\"}}"

static int serve_split(struct fake_conn *fd)
{
    /* Lines cut mid-token, a blank line, a CRLF line, two lines in one chunk. */
    static const char *const pieces[] = {
        "{\"type\":\"ADD", "ED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"MOD",
        "IFIED\"}", "\n", "\n", "{\"type\":\"BOOKMARK\"}\r\n{\"type\":\"DELETED\"}\n",
    };
    if (fake_start_chunked(fd) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
        if (fake_chunk_str(fd, pieces[i]) != 0)
            return -1;
    return fake_end_chunked(fd);
}

/* A single line of `bytes` bytes followed by '\n', sent in 1 MiB chunks. */
static int serve_big(struct fake_conn *fd, const char *path)
{
    const char *q = strstr(path, "bytes=");
    size_t total = q ? (size_t)atol(q + 6) : 0, step = (size_t)1 << 20;
    char *block = malloc(step);
    if (!block || fake_start_chunked(fd) != 0) {
        free(block);
        return -1;
    }
    memset(block, 'x', step);
    int rc = 0;
    for (size_t sent = 0; rc == 0 && sent < total; sent += step) {
        size_t n = total - sent < step ? total - sent : step;
        rc = fake_chunk(fd, block, n);
    }
    free(block);
    if (rc == 0)
        rc = fake_chunk_str(fd, "\n");
    return rc == 0 ? fake_end_chunked(fd) : -1;
}

static int path_is(const char *path, const char *want)
{
    size_t n = strlen(want);
    return strncmp(path, want, n) == 0 && (path[n] == '\0' || path[n] == '?');
}

/* One answer; -1 closes the connection. */
static int respond(void *ctx, struct fake_conn *c, const struct fake_request *rq)
{
    (void)ctx;
    struct fake_conn *fd = c;
    const char *p = rq->path;
    if (path_is(p, "/api/v1/namespaces/a/pods/b"))
        return fake_reply(fd, 200, "OK", "application/json", POD_JSON);
    if (path_is(p, "/echo"))
        return fake_reply(fd, 200, "OK", "application/json", rq->body);
    if (path_is(p, "/conflict"))
        return fake_reply(fd, 409, "Conflict", "application/json", STATUS_409);
    if (path_is(p, "/text404"))
        return fake_reply(fd, 404, "Not Found", "text/plain", "404 page not found\n");
    if (path_is(p, "/empty500"))
        return fake_reply(fd, 500, "Internal Server Error", "text/plain", "");
    if (path_is(p, "/slow") || path_is(p, "/watch/silent"))
        return fake_hold(c);
    if (path_is(p, "/watch/split"))
        return serve_split(fd);
    if (path_is(p, "/watch/three"))
        return fake_start_chunked(fd) || fake_chunk_str(fd, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n") || fake_end_chunked(fd) ? -1 : 0;
    if (path_is(p, "/watch/hold"))
        return fake_start_chunked(fd) || fake_chunk_str(fd, "{\"n\":1}\n") ? -1 : fake_hold(c);
    if (path_is(p, "/watch/trickle")) {
        if (fake_start_chunked(fd) != 0)
            return -1;
        for (int i = 0; i < 12; i++) {
            if (fake_chunk_str(fd, "{\"type\":\"BOOKMARK\"}\n") != 0)
                return -1;
            fake_sleep_ms(250);
        }
        return fake_end_chunked(fd);
    }
    if (path_is(p, "/watch/gone"))
        return fake_reply(fd, 410, "Gone", "application/json", STATUS_410);
    if (path_is(p, "/watch/cut")) {     /* then close without the last chunk */
        if (fake_start_chunked(fd) == 0)
            fake_chunk_str(fd, "{\"n\":1}\n{\"partial");
        return -1;
    }
    if (path_is(p, "/watch/tail"))
        return fake_reply(fd, 200, "OK", "application/json", "{\"a\":1}\n{\"b\":2}");
    if (path_is(p, "/watch/big"))
        return serve_big(fd, p);
    return fake_reply(fd, 404, "Not Found", "application/json", "{\"kind\":\"Status\",\"message\":\"no route\"}");
}

static int server_start(void **state)
{
    (void)state;
    return fakeapi_start(respond, NULL);
}

static int server_stop(void **state)
{
    (void)state;
    fakeapi_stop();
    return 0;
}

/* ---- requests ------------------------------------------------------------- */

static char server_url[64];

static struct kube_client *client_with(const char *token, const char *token_file)
{
    snprintf(server_url, sizeof(server_url), "%s", fakeapi_url());
    struct kube_config cfg = {.server = server_url, .token = (char *)token, .token_file = (char *)token_file};
    char *err = NULL;
    struct kube_client *c = kube_client_new(&cfg, &err);
    if (!c)
        fail_msg("kube_client_new: %s", err ? err : "(none)");
    assert_null(err);
    return c;
}

static void test_request_get_json(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct kube_response r;
    assert_int_equal(kube_request(c, "GET", "/api/v1/namespaces/a/pods/b", NULL, NULL, 0, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, POD_JSON);
    assert_int_equal(r.body_len, strlen(POD_JSON));
    assert_null(r.error);
    struct fake_request s = fakeapi_last();
    assert_string_equal(s.method, "GET");
    assert_string_equal(s.path, "/api/v1/namespaces/a/pods/b");
    assert_string_equal(s.accept, "application/json");
    assert_string_equal(s.agent, "gpu-quota-admission/" GQA_VERSION);
    assert_string_equal(s.auth, "");
    kube_response_free(&r);
    kube_response_free(&r);     /* idempotent */
    kube_client_free(c);
}

/* Every method with and without a body, one after another on one handle:
 * the method options must not leak from one request into the next. */
static void test_request_methods_and_bodies(void **state)
{
    (void)state;
    struct kube_client *c = client_with("static-token", NULL);
    static const struct { const char *method, *body, *ctype; } steps[] = {
        {"PATCH", "{\"metadata\":{\"annotations\":{\"a\":\"1\"}}}", "application/merge-patch+json"},
        {"GET", NULL, NULL},
        {"POST", "{\"kind\":\"Binding\"}", "application/json"},
        {"DELETE", NULL, NULL},
        {"PUT", "{\"kind\":\"Lease\"}", "application/json"},
        {"POST", "", "application/json"},
        {"GET", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        struct kube_response r;
        const char *body = steps[i].body;
        int rc = kube_request(c, steps[i].method, "/echo?x=1", steps[i].ctype, body, body ? strlen(body) : 0, 5000, &r);
        if (rc != 0)
            fail_msg("step %zu: %s", i, r.error ? r.error : "(none)");
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, body ? body : "");
        struct fake_request s = fakeapi_last();
        assert_string_equal(s.method, steps[i].method);
        assert_string_equal(s.path, "/echo?x=1");
        assert_string_equal(s.ctype, steps[i].ctype ? steps[i].ctype : "");
        assert_string_equal(s.auth, "Bearer static-token");
        kube_response_free(&r);
    }
    kube_client_free(c);
}

static void test_request_error_statuses(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct kube_response r;
    assert_int_equal(kube_request(c, "PATCH", "/conflict", "application/merge-patch+json", "{}", 2, 5000, &r), 0);
    assert_int_equal(r.status, 409);
    assert_string_equal(r.error, "PATCH /conflict: 409 Conflict: Operation cannot be fulfilled on pods \"b\": the "
                                 "object has been modified; please apply your changes to the latest version and try "
                                 "again");
    assert_string_equal(r.body, STATUS_409);
    kube_response_free(&r);

    assert_int_equal(kube_request(c, "GET", "/text404", NULL, NULL, 0, 5000, &r), 0);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.error, "GET /text404: 404 Not Found: 404 page not found");
    kube_response_free(&r);

    assert_int_equal(kube_request(c, "GET", "/empty500", NULL, NULL, 0, 5000, &r), 0);
    assert_int_equal(r.status, 500);
    assert_string_equal(r.error, "GET /empty500: 500 Internal Server Error");
    assert_string_equal(r.body, "");
    kube_response_free(&r);
    kube_client_free(c);
}

static void test_request_timeout(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct kube_response r;
    int64_t t0 = fake_mono_ms();
    assert_int_equal(kube_request(c, "GET", "/slow", NULL, NULL, 0, 300, &r), -1);
    int64_t took = fake_mono_ms() - t0;
    assert_true(took >= 250 && took < 3000);
    assert_int_equal(r.status, 0);
    assert_non_null(r.error);
    if (strncmp(r.error, "GET /slow: Timeout was reached", 30) != 0)
        fail_msg("unexpected error: %s", r.error);
    assert_string_equal(r.body, "");
    kube_response_free(&r);
    /* The client is still usable after an aborted transfer. */
    assert_int_equal(kube_request(c, "GET", "/api/v1/namespaces/a/pods/b", NULL, NULL, 0, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    kube_response_free(&r);
    kube_client_free(c);
}

static void test_request_connection_refused(void **state)
{
    (void)state;
    /* A port that was just free: bind, read the port, close. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    struct kube_config cfg = {.server = url};
    struct kube_client *c = kube_client_new(&cfg, NULL);
    assert_non_null(c);
    struct kube_response r;
    assert_int_equal(kube_request(c, "GET", "/api", NULL, NULL, 0, 5000, &r), -1);
    assert_int_equal(r.status, 0);
    if (!strstr(r.error, "GET /api: Couldn't connect to server"))
        fail_msg("unexpected error: %s", r.error);
    kube_response_free(&r);
    kube_client_free(c);
}

static void test_request_keepalive(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    int before = fakeapi_connections();
    for (int i = 0; i < 5; i++) {
        struct kube_response r;
        assert_int_equal(kube_request(c, "GET", "/api/v1/namespaces/a/pods/b", NULL, NULL, 0, 5000, &r), 0);
        kube_response_free(&r);
    }
    assert_int_equal(fakeapi_connections() - before, 1);
    kube_client_free(c);
}

static char *seen_auth_after_request(struct kube_client *c)
{
    struct kube_response r;
    if (kube_request(c, "GET", "/echo", NULL, NULL, 0, 5000, &r) != 0)
        fail_msg("request failed: %s", r.error ? r.error : "(none)");
    kube_response_free(&r);
    struct fake_request s = fakeapi_last();
    char *auth = strdup(s.auth);
    assert_non_null(auth);
    return auth;
}

static void assert_auth(struct kube_client *c, const char *expected)
{
    char *auth = seen_auth_after_request(c);
    assert_string_equal(auth, expected);
    free(auth);
}

/* Set the file's mtime to a fixed second, so a rewrite is told apart by its
 * content identity alone where the test wants that. */
static void set_mtime(const char *path, time_t sec)
{
    struct timespec times[2] = {{sec, 0}, {sec, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
}

static void test_token_file_rotation(void **state)
{
    char *dir = *state;
    char *tok = path_in(dir, "token"), *tmp = path_in(dir, "token.new");
    write_text(tok, "first-token\n");
    set_mtime(tok, 1000000);
    struct kube_client *c = client_with("static-fallback", tok);
    assert_auth(c, "Bearer first-token");
    assert_auth(c, "Bearer first-token");

    write_text(tok, "second-token-longer\n");          /* size changes */
    set_mtime(tok, 1000000);
    assert_auth(c, "Bearer second-token-longer");

    write_text(tok, "third--token-longer\n");          /* same size, new mtime */
    set_mtime(tok, 2000000);
    assert_auth(c, "Bearer third--token-longer");

    write_text(tmp, "fourth-token-longe\n\n");         /* same size and mtime, new file (kubelet's rename) */
    set_mtime(tmp, 2000000);
    assert_int_equal(rename(tmp, tok), 0);
    assert_auth(c, "Bearer fourth-token-longe");

    unlink(tok);                                       /* mid-rotation: keep the last good token */
    assert_auth(c, "Bearer fourth-token-longe");
    write_text(tok, "   \n");                          /* empty: likewise */
    assert_auth(c, "Bearer fourth-token-longe");
    write_text(tok, "fifth");
    assert_auth(c, "Bearer fifth");
    kube_client_free(c);

    /* With no token ever read and no static one, the request fails. */
    unlink(tok);
    c = client_with(NULL, tok);
    struct kube_response r;
    assert_int_equal(kube_request(c, "GET", "/echo", NULL, NULL, 0, 5000, &r), -1);
    char expected[1024];
    snprintf(expected, sizeof(expected), "GET /echo: token file %s: No such file or directory", tok);
    assert_string_equal(r.error, expected);
    assert_int_equal(r.status, 0);
    kube_response_free(&r);
    kube_client_free(c);
    free(tok), free(tmp);
}

static void test_client_new(void **state)
{
    (void)state;
    char *err = NULL;
    struct kube_config empty = {0};
    assert_null(kube_client_new(&empty, &err));
    assert_string_equal(err, "kube client: no API server address");
    free(err);
    assert_null(kube_client_new(NULL, NULL));
    /* Inline PEM goes to libcurl as blobs; the build must accept them. */
    struct kube_config blobs = {.server = "https://127.0.0.1:1", .ca_data = CA_PEM, .client_cert_data = CERT_PEM,
                                .client_key_data = KEY_PEM};
    struct kube_client *c = kube_client_new(&blobs, &err);
    if (!c)
        fail_msg("%s", err);
    kube_client_free(c);
    struct kube_config insecure = {.server = "https://127.0.0.1:1", .insecure_skip_tls_verify = 1,
                                   .ca_file = "/nonexistent"};
    c = kube_client_new(&insecure, &err);
    assert_non_null(c);
    kube_client_free(c);
    kube_client_free(NULL);
}

/* ---- watches -------------------------------------------------------------- */

struct events {
    char *lines[16];
    size_t count;
    size_t stop_after;          /* on_event returns 1 after this many (0: never) */
    size_t big_len;             /* a line longer than 1 KiB: only its length is kept */
    int opened;                 /* zero-length "watch accepted" calls seen */
};

static int collect(void *ctx, const char *line, size_t len)
{
    struct events *e = ctx;
    assert_int_equal(strlen(line), len);   /* NUL-terminated, no embedded NUL */
    if (len == 0) {
        /* The open notification: once, before any event. */
        assert_int_equal(e->opened, 0);
        assert_int_equal(e->count, 0);
        e->opened++;
        return 0;
    }
    if (len > 1024) {
        e->big_len = len;
        assert_true(line[0] == 'x' && line[len - 1] == 'x');
    } else if (e->count < 16) {
        e->lines[e->count] = strdup(line);
    }
    e->count++;
    return e->stop_after && e->count >= e->stop_after;
}

static void events_free(struct events *e)
{
    for (size_t i = 0; i < e->count && i < 16; i++)
        free(e->lines[i]);
}

/* What a streamed GET received, and when to stop it. */
struct received {
    struct strbuf text;
    int pieces;
    int stop_at; /* on_data returns 1 at this piece (1-based); 0: never */
};

static int receive(void *ctx, const char *data, size_t len)
{
    struct received *rc = ctx;
    strbuf_append(&rc->text, data, len);
    return ++rc->pieces == rc->stop_at;
}

static void test_get_stream(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct kube_response r;
    /* A 200 in pieces: every byte arrives, in order; nothing is collected. */
    struct received got = {0};
    strbuf_init(&got.text);
    assert_int_equal(kube_get_stream(c, "/watch/split", receive, &got, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    assert_null(r.error);
    assert_string_equal(r.body, "");
    assert_string_equal(got.text.data, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
                                       "{\"type\":\"MODIFIED\"}\n\n{\"type\":\"BOOKMARK\"}\r\n{\"type\":\"DELETED\"}\n");
    assert_true(got.pieces >= 1);
    kube_response_free(&r);
    strbuf_free(&got.text);
    /* Any other status is the error, as for kube_request; nothing streams. */
    struct received none = {0};
    strbuf_init(&none.text);
    assert_int_equal(kube_get_stream(c, "/conflict", receive, &none, 5000, &r), 0);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.error, "409 Conflict: Operation cannot be fulfilled"));
    assert_int_equal(none.pieces, 0);
    kube_response_free(&r);
    /* The receiver stops a big answer: the request fails and says so, and
     * the client goes on with the next request. */
    struct received one = {.stop_at = 1};
    strbuf_init(&one.text);
    assert_int_equal(kube_get_stream(c, "/watch/big?bytes=8388608", receive, &one, 5000, &r), -1);
    assert_int_equal(one.pieces, 1);
    assert_string_equal(r.error, "GET /watch/big?bytes=8388608: the receiver stopped the answer");
    kube_response_free(&r);
    strbuf_free(&one.text);
    assert_int_equal(kube_request(c, "GET", "/api/v1/namespaces/a/pods/b", NULL, NULL, 0, 5000, &r), 0);
    assert_string_equal(r.body, POD_JSON);
    kube_response_free(&r);
    kube_client_free(c);
}

static void test_watch_split_lines(void **state)
{
    (void)state;
    struct kube_client *c = client_with("t", NULL);
    struct events e = {0};
    struct kube_response r;
    volatile int stop = 0;
    assert_int_equal(kube_watch(c, "/watch/split?watch=1", collect, &e, &stop, 5000, &r), 0);
    assert_int_equal(e.opened, 1);
    assert_int_equal(r.status, 200);
    assert_null(r.error);
    assert_string_equal(r.body, "");
    assert_int_equal(e.count, 4);
    assert_string_equal(e.lines[0], "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}");
    assert_string_equal(e.lines[1], "{\"type\":\"MODIFIED\"}");
    assert_string_equal(e.lines[2], "{\"type\":\"BOOKMARK\"}");
    assert_string_equal(e.lines[3], "{\"type\":\"DELETED\"}");
    assert_string_equal(fakeapi_last().auth, "Bearer t");
    kube_response_free(&r);
    events_free(&e);
    kube_client_free(c);
}

static void test_watch_callback_stops(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct events e = {.stop_after = 2};
    struct kube_response r;
    assert_int_equal(kube_watch(c, "/watch/three", collect, &e, NULL, 0, &r), 0);
    assert_int_equal(e.count, 2);
    assert_int_equal(r.status, 200);
    assert_null(r.error);
    kube_response_free(&r);
    events_free(&e);
    /* The same client goes on with a request. */
    assert_int_equal(kube_request(c, "GET", "/api/v1/namespaces/a/pods/b", NULL, NULL, 0, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    kube_response_free(&r);
    kube_client_free(c);
}

struct stopper {
    volatile int *flag;
    long after_ms;
};

static void *stop_later(void *arg)
{
    struct stopper *s = arg;
    fake_sleep_ms(s->after_ms);
    *s->flag = 1;
    return NULL;
}

static void test_watch_stop_flag(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct events e = {0};
    struct kube_response r;
    volatile int stop = 0;
    struct stopper s = {&stop, 300};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_later, &s), 0);
    int64_t t0 = fake_mono_ms();
    assert_int_equal(kube_watch(c, "/watch/hold", collect, &e, &stop, 0, &r), 0);
    int64_t took = fake_mono_ms() - t0;
    pthread_join(t, NULL);
    assert_true(took >= 250 && took < 1500);
    assert_int_equal(e.count, 1);
    assert_int_equal(r.status, 200);
    assert_null(r.error);
    kube_response_free(&r);
    events_free(&e);

    /* Already stopped: back at once, nothing delivered. */
    struct events none = {0};
    t0 = fake_mono_ms();
    assert_int_equal(kube_watch(c, "/watch/hold", collect, &none, &stop, 0, &r), 0);
    assert_true(fake_mono_ms() - t0 < 1000);
    assert_int_equal(none.count, 0);
    assert_null(r.error);
    kube_response_free(&r);
    kube_client_free(c);
}

static void test_watch_idle_timeout(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct events e = {0};
    struct kube_response r;
    int64_t t0 = fake_mono_ms();
    assert_int_equal(kube_watch(c, "/watch/hold", collect, &e, NULL, 400, &r), -1);
    int64_t took = fake_mono_ms() - t0;
    /* Not before the idle time; were it never cut, the fake server's hold
     * would keep the test waiting (CTest's timeout), so no upper bound here:
     * a loaded machine may be slow to notice. */
    assert_true(took >= 350);
    assert_int_equal(e.count, 1);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.error, "GET /watch/hold: no data from the API server for 400 ms");
    kube_response_free(&r);
    events_free(&e);

    /* No answer at all: the idle clock runs from the start. */
    struct events none = {0};
    assert_int_equal(kube_watch(c, "/watch/silent", collect, &none, NULL, 300, &r), -1);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.error, "GET /watch/silent: no data from the API server for 300 ms");
    kube_response_free(&r);

    /* Steady bookmarks every 250 ms for 3 s, longer than the 2 s idle
     * timeout but each gap far inside it (margin for a loaded machine): the
     * timer restarts on data, so a healthy watch is never cut. */
    struct events ticks = {0};
    assert_int_equal(kube_watch(c, "/watch/trickle", collect, &ticks, NULL, 2000, &r), 0);
    assert_int_equal(ticks.count, 12);
    assert_null(r.error);
    kube_response_free(&r);
    events_free(&ticks);
    kube_client_free(c);
}

static void test_watch_refused(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct events e = {0};
    struct kube_response r;
    assert_int_equal(kube_watch(c, "/watch/gone?watch=1&resourceVersion=1", collect, &e, NULL, 5000, &r), 0);
    assert_int_equal(r.status, 410);
    assert_int_equal(e.count, 0);
    assert_int_equal(e.opened, 0);   /* a refused watch never opened */
    assert_string_equal(r.body, STATUS_410);
    assert_string_equal(r.error, "GET /watch/gone?watch=1&resourceVersion=1: 410 Gone: too old resource version: 1 (5)");
    kube_response_free(&r);
    kube_client_free(c);
}

static void test_watch_cut_and_tail(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct events e = {0};
    struct kube_response r;
    /* The connection drops mid-stream: the partial line is not delivered. */
    assert_int_equal(kube_watch(c, "/watch/cut", collect, &e, NULL, 5000, &r), -1);
    assert_int_equal(e.count, 1);
    assert_int_equal(r.status, 200);
    assert_non_null(r.error);
    assert_int_equal(strncmp(r.error, "GET /watch/cut: ", 16), 0);
    kube_response_free(&r);
    events_free(&e);
    /* A body that ends cleanly without '\n' still completes its last line. */
    struct events tail = {0};
    assert_int_equal(kube_watch(c, "/watch/tail", collect, &tail, NULL, 5000, &r), 0);
    assert_int_equal(tail.count, 2);
    assert_string_equal(tail.lines[1], "{\"b\":2}");
    kube_response_free(&r);
    events_free(&tail);
    kube_client_free(c);
}

static void test_watch_big_lines(void **state)
{
    (void)state;
    struct kube_client *c = client_with(NULL, NULL);
    struct events e = {0};
    struct kube_response r;
    size_t big = ((size_t)5 << 20) + 12345;
    char path[128];
    snprintf(path, sizeof(path), "/watch/big?bytes=%zu", big);
    assert_int_equal(kube_watch(c, path, collect, &e, NULL, 5000, &r), 0);
    assert_int_equal(e.count, 1);
    assert_int_equal(e.big_len, big);
    kube_response_free(&r);

    struct events over = {0};
    snprintf(path, sizeof(path), "/watch/big?bytes=%zu", ((size_t)64 << 20) + 1);
    assert_int_equal(kube_watch(c, path, collect, &over, NULL, 20000, &r), -1);
    assert_int_equal(over.count, 0);
    char expected[256];
    snprintf(expected, sizeof(expected), "GET %s: a watch event is larger than 64 MiB", path);
    assert_string_equal(r.error, expected);
    kube_response_free(&r);
    kube_client_free(c);
}

/* ---- escaping ------------------------------------------------------------- */

static void test_escape(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"status.phase!=Succeeded,status.phase!=Failed", "status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"},
        {"app in (a, b)", "app%20in%20%28a%2C%20b%29"},
        {"A-z_0.9~", "A-z_0.9~"},
        {"k8s.io/x=y&z?#%+", "k8s.io%2Fx%3Dy%26z%3F%23%25%2B"},
        {"\xc3\xa9", "%C3%A9"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *e = kube_escape(cases[i][0]);
        assert_non_null(e);
        assert_string_equal(e, cases[i][1]);
        free(e);
    }
    char *e = kube_escape(NULL);
    assert_string_equal(e, "");
    free(e);
}

int main(void)
{
    const struct CMUnitTest config_tests[] = {
        cmocka_unit_test_setup_teardown(test_kubeconfig_files_and_token, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test(test_kubeconfig_fixture_data_fields),
        cmocka_unit_test_setup_teardown(test_kubeconfig_base64_forms, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_json_and_precedence, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_relative_to_cwd, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_errors, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_client_new),
    };
    const struct CMUnitTest server_tests[] = {
        cmocka_unit_test(test_request_get_json),
        cmocka_unit_test(test_request_methods_and_bodies),
        cmocka_unit_test(test_request_error_statuses),
        cmocka_unit_test(test_request_timeout),
        cmocka_unit_test(test_request_connection_refused),
        cmocka_unit_test(test_request_keepalive),
        cmocka_unit_test_setup_teardown(test_token_file_rotation, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test(test_watch_split_lines),
        cmocka_unit_test(test_watch_callback_stops),
        cmocka_unit_test(test_watch_stop_flag),
        cmocka_unit_test(test_watch_idle_timeout),
        cmocka_unit_test(test_watch_refused),
        cmocka_unit_test(test_watch_cut_and_tail),
        cmocka_unit_test(test_watch_big_lines),
        cmocka_unit_test(test_get_stream),
    };
    int failed = cmocka_run_group_tests_name("kubeconfig", config_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("client", server_tests, server_start, server_stop);
    return failed;
}
