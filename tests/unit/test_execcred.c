/*
 * test_execcred.c - unit tests for kube/execcred.c and the exec stanza of
 * kube/kubeconfig.c: the ExecCredential as a plugin prints it, the
 * kubeconfig's exec fields as the command sees them (argv, env,
 * KUBERNETES_EXEC_INFO with the cluster), re-runs on expiry and on 401, and
 * the messages when the command fails. The plugins are small shell scripts
 * the tests write; the API server is tests/unit/fakeapi.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/execcred.h"
#include "kube/kubeclient.h"
#include "lib/strbuf.h"
#include "tests/unit/fakeapi.h"

#define V1 "client.authentication.k8s.io/v1"
#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlQ0EKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="

/* ---- files ---------------------------------------------------------------- */

static char *path_in(const char *dir, const char *name)
{
    char *p = strbuf_format("%s/%s", dir, name);
    assert_non_null(p);
    return p;
}

static void write_in(const char *dir, const char *name, const char *text, mode_t mode)
{
    char *p = path_in(dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(p, mode), 0);
    free(p);
}

static char *read_in(const char *dir, const char *name)
{
    char *p = path_in(dir, name);
    struct strbuf sb;
    strbuf_init(&sb);
    assert_int_equal(strbuf_read_file(&sb, p), 0);
    free(p);
    return strbuf_detach(&sb, NULL);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int temp_dir_setup(void **state)
{
    char tmpl[] = "/tmp/gqa-execcred-XXXXXX";
    if (!mkdtemp(tmpl) || !(*state = strdup(tmpl)))
        return -1;
    return 0;
}

static int temp_dir_teardown(void **state)
{
    nftw(*state, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(*state);
    return 0;
}

/* A plugin script in dir: counts its runs in dir/runs, then runs body. */
static void write_plugin(const char *dir, const char *name, const char *body)
{
    char *text = strbuf_format("#!/bin/sh\n"
                               "n=$(cat '%s/runs' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '%s/runs'\n"
                               "%s\n",
                               dir, dir, body);
    assert_non_null(text);
    write_in(dir, name, text, 0755);
    free(text);
}

static struct kube_config *load_kc(const char *dir, const char *text)
{
    write_in(dir, "config", text, 0600);
    char *path = path_in(dir, "config"), *err = NULL;
    struct kube_config *cfg = kube_config_from_file(path, &err);
    if (!cfg)
        fail_msg("kubeconfig: %s", err);
    free(path);
    return cfg;
}

/* A kubeconfig whose user runs `command` (v1, interactiveMode Never), plus `extra` exec fields. */
static struct kube_config *exec_kc(const char *dir, const char *server, const char *command, const char *extra)
{
    char *text = strbuf_format("current-context: a\n"
                               "contexts: [{name: a, context: {cluster: k, user: u}}]\n"
                               "clusters: [{name: k, cluster: {server: '%s'}}]\n"
                               "users: [{name: u, user: {exec: {apiVersion: " V1 ", interactiveMode: Never, "
                               "command: '%s'%s}}}]\n",
                               server, command, extra ? extra : "");
    assert_non_null(text);
    struct kube_config *cfg = load_kc(dir, text);
    free(text);
    return cfg;
}

/* Shell that prints an ExecCredential with this token (shell words: "tok-$n" expands) and extra status fields. */
#define PRINT_TOKEN(token, expiry)                                                                  \
    "echo '{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"'" token \
    "'\"" expiry "}}'"

/* ---- the ExecCredential --------------------------------------------------- */

struct parse_case {
    const char *text;
    const char *error; /* NULL: parses */
};

static const struct parse_case parse_cases[] = {
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}", NULL},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"spec\":{},\"status\":{\"token\":\"t\","
     "\"expirationTimestamp\":\"2030-01-02T03:04:05Z\"}}",
     NULL},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"clientCertificateData\":\"" CA_PEM
     "\",\"clientKeyData\":\"-----BEGIN PRIVATE KEY-----\\nk\\n-----END PRIVATE KEY-----\\n\"}}",
     NULL},
    {"not json", "its output is not a JSON ExecCredential"},
    {"[]", "its output is not a JSON ExecCredential"},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"Secret\",\"status\":{\"token\":\"t\"}}",
     "its output is not an ExecCredential (kind)"},
    {"{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":"
     "\"t\"}}",
     "it printed apiVersion client.authentication.k8s.io/v1beta1, the kubeconfig asks for " V1},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\"}", "its ExecCredential has no status"},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{}}",
     "status has neither a token nor clientCertificateData and clientKeyData"},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":7}}",
     "status.token, clientCertificateData, clientKeyData and expirationTimestamp must be strings"},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"clientCertificateData\":\"" CA_PEM
     "\"}}",
     "status has clientCertificateData but no clientKeyData"},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"clientCertificateData\":\"x\","
     "\"clientKeyData\":\"y\"}}",
     "status.clientCertificateData and clientKeyData must be PEM"},
    {"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\","
     "\"expirationTimestamp\":\"tomorrow\"}}",
     "status.expirationTimestamp is not an RFC 3339 time"},
};

static void test_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
        struct kube_exec_cred cred;
        char *err = NULL;
        int rc = kube_exec_parse(V1, parse_cases[i].text, strlen(parse_cases[i].text), &cred, &err);
        if (parse_cases[i].error && (rc == 0 || !err || strcmp(err, parse_cases[i].error) != 0))
            fail_msg("case %zu: got %d %s, expected %s", i, rc, err ? err : "(no error)", parse_cases[i].error);
        if (!parse_cases[i].error && rc != 0)
            fail_msg("case %zu: %s", i, err);
        kube_exec_cred_clear(&cred);
        free(err);
    }
    struct kube_exec_cred cred;
    char *err = NULL;
    const char *text = parse_cases[1].text;
    assert_int_equal(kube_exec_parse(V1, text, strlen(text), &cred, &err), 0);
    assert_string_equal(cred.token, "t");
    assert_int_equal(cred.expiry_ns, 1893553445LL * 1000000000LL); /* 2030-01-02T03:04:05Z */
    kube_exec_cred_clear(&cred);
    text = parse_cases[2].text;
    assert_int_equal(kube_exec_parse(V1, text, strlen(text), &cred, &err), 0);
    assert_null(cred.token);
    assert_string_equal(cred.cert_pem, CA_PEM);
    assert_non_null(cred.key_pem);
    kube_exec_cred_clear(&cred);
}

/* ---- what the command sees ------------------------------------------------ */

static void test_command_sees_args_env_and_cluster(void **state)
{
    const char *dir = *state;
    char *bin = path_in(dir, "bin");
    assert_int_equal(mkdir(bin, 0755), 0);
    free(bin);
    char *script = strbuf_format("printf '%%s\\n' \"$@\" > '%s/args'\n"
                                 "printf '%%s' \"$KUBERNETES_EXEC_INFO\" > '%s/info'\n"
                                 "printf '%%s|%%s' \"$GREETING\" \"$HOME\" > '%s/env'\n" PRINT_TOKEN("tok", ""),
                                 dir, dir, dir);
    assert_non_null(script);
    write_plugin(dir, "bin/plugin", script);
    free(script);
    write_in(dir, "ca.crt", CA_PEM, 0644);
    struct kube_config *cfg = load_kc(
        dir, "current-context: a\n"
             "contexts: [{name: a, context: {cluster: k, user: u}}]\n"
             "clusters: [{name: k, cluster: {server: 'https://k:6443', certificate-authority: ca.crt,\n"
             "  extensions: [{name: client.authentication.k8s.io/exec, extension: {audience: gpu}}]}}]\n"
             "users: [{name: u, user: {exec: {apiVersion: " V1 ", interactiveMode: IfAvailable,\n"
             "  command: ./bin/plugin, args: [get-token, --cluster, 'a b'],\n"
             "  env: [{name: GREETING, value: hello}, {name: HOME, value: /elsewhere}],\n"
             "  provideClusterInfo: true}}}]\n");
    assert_non_null(cfg->exec);
    assert_null(cfg->token);
    struct kube_exec_cred cred;
    char *err = NULL;
    if (kube_exec_current(cfg->exec, 0, &cred, &err) != 1)
        fail_msg("%s", err);
    assert_string_equal(cred.token, "tok");
    assert_int_equal(cred.serial, 1);
    kube_exec_cred_clear(&cred);

    char *args = read_in(dir, "args"), *env = read_in(dir, "env"), *info = read_in(dir, "info");
    assert_string_equal(args, "get-token\n--cluster\na b\n"); /* argv as given: no shell splits "a b" */
    assert_string_equal(env, "hello|/elsewhere");             /* env added, and wins over the inherited */
    cJSON *j = cJSON_Parse(info);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "apiVersion")->valuestring, V1);
    assert_string_equal(cJSON_GetObjectItem(j, "kind")->valuestring, "ExecCredential");
    cJSON *spec = cJSON_GetObjectItem(j, "spec"), *cluster = cJSON_GetObjectItem(spec, "cluster");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(spec, "interactive"))); /* stdin is no terminal it may use */
    assert_string_equal(cJSON_GetObjectItem(cluster, "server")->valuestring, "https://k:6443");
    assert_string_equal(cJSON_GetObjectItem(cluster, "certificate-authority-data")->valuestring, CA_B64);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(cluster, "config"), "audience")->valuestring, "gpu");
    cJSON_Delete(j);
    free(args);
    free(env);
    free(info);
    kube_config_free(cfg);
}

/* Without provideClusterInfo the command is told no cluster. */
static void test_no_cluster_info_by_default(void **state)
{
    const char *dir = *state;
    char *script = strbuf_format("printf '%%s' \"$KUBERNETES_EXEC_INFO\" > '%s/info'\n" PRINT_TOKEN("tok", ""), dir);
    write_plugin(dir, "plugin", script);
    free(script);
    struct kube_config *cfg = exec_kc(dir, "https://k", "./plugin", NULL);
    struct kube_exec_cred cred;
    char *err = NULL;
    assert_int_equal(kube_exec_current(cfg->exec, 0, &cred, &err), 1);
    kube_exec_cred_clear(&cred);
    char *info = read_in(dir, "info");
    assert_string_equal(info, "{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
                              "\",\"spec\":{\"interactive\":false}}");
    free(info);
    kube_config_free(cfg);
}

static char *failure_of(const char *dir, const char *command, const char *extra, long timeout_ms);

/* A bare name is looked up on PATH (the kubeconfig's directory plays no part). */
static void test_name_found_on_path(void **state)
{
    const char *dir = *state;
    char *bin = path_in(dir, "bin");
    assert_int_equal(mkdir(bin, 0755), 0);
    write_plugin(dir, "bin/gqa-test-auth", PRINT_TOKEN("from-path", ""));
    write_in(dir, "bin/not-executable", "#!/bin/sh\n", 0644);
    const char *old = getenv("PATH");
    char *saved = old ? strdup(old) : NULL;
    char *path = strbuf_format("/nonexistent-dir:%s:%s", bin, saved ? saved : "/usr/bin:/bin");
    assert_int_equal(setenv("PATH", path, 1), 0);
    struct kube_config *cfg = exec_kc(dir, "https://k", "gqa-test-auth", NULL);
    struct kube_exec_cred cred;
    char *err = NULL;
    if (kube_exec_current(cfg->exec, 0, &cred, &err) != 1)
        fail_msg("%s", err);
    assert_string_equal(cred.token, "from-path");
    kube_exec_cred_clear(&cred);
    kube_config_free(cfg);
    err = failure_of(dir, "not-executable", NULL, 0);
    assert_non_null(strstr(err, "exec plugin not-executable: not executable: Permission denied"));
    free(err);
    if (saved)
        setenv("PATH", saved, 1);
    free(saved);
    free(path);
    free(bin);
}

/* ---- when it runs --------------------------------------------------------- */

static int runs_of(const char *dir)
{
    char *text = read_in(dir, "runs");
    int n = atoi(text);
    free(text);
    return n;
}

static void test_expiry_runs_again(void **state)
{
    const char *dir = *state;
    /* Expired as soon as printed: every use runs the command again. */
    write_plugin(dir, "expired", PRINT_TOKEN("tok-$n", ",\"expirationTimestamp\":\"2001-01-01T00:00:00Z\""));
    struct kube_config *cfg = exec_kc(dir, "https://k", "./expired", NULL);
    struct kube_exec_cred cred;
    char *err = NULL;
    uint64_t have = 0;
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(kube_exec_current(cfg->exec, have, &cred, &err), 1);
        char want[16];
        snprintf(want, sizeof(want), "tok-%d", i);
        assert_string_equal(cred.token, want);
        have = cred.serial;
        kube_exec_cred_clear(&cred);
    }
    assert_int_equal(runs_of(dir), 3);
    kube_config_free(cfg);

    /* Valid for years: one run serves every use. */
    write_in(dir, "runs", "0\n", 0644);
    write_plugin(dir, "lasting", PRINT_TOKEN("tok-$n", ",\"expirationTimestamp\":\"2200-01-01T00:00:00+01:00\""));
    cfg = exec_kc(dir, "https://k", "./lasting", NULL);
    assert_int_equal(kube_exec_current(cfg->exec, 0, &cred, &err), 1);
    have = cred.serial;
    kube_exec_cred_clear(&cred);
    for (int i = 0; i < 3; i++)
        assert_int_equal(kube_exec_current(cfg->exec, have, &cred, &err), 0); /* the caller's copy is current */
    assert_int_equal(runs_of(dir), 1);
    /* Refused by the API server: the next use runs it again; a stale serial changes nothing. */
    kube_exec_invalidate(cfg->exec, have);
    kube_exec_invalidate(cfg->exec, have + 7);
    assert_int_equal(kube_exec_current(cfg->exec, have, &cred, &err), 1);
    assert_string_equal(cred.token, "tok-2");
    kube_exec_cred_clear(&cred);
    assert_int_equal(kube_exec_runs(cfg->exec), 2);
    kube_config_free(cfg);
}

/* ---- failures ------------------------------------------------------------- */

static char *failure_of(const char *dir, const char *command, const char *extra, long timeout_ms)
{
    struct kube_config *cfg = exec_kc(dir, "https://k", command, extra);
    if (timeout_ms)
        kube_exec_configure(cfg->exec, timeout_ms, true);
    struct kube_exec_cred cred;
    char *err = NULL;
    assert_int_equal(kube_exec_current(cfg->exec, 0, &cred, &err), -1);
    assert_null(cred.token);
    assert_non_null(err);
    kube_config_free(cfg);
    return err;
}

static void expect_failure(const char *dir, const char *command, const char *extra, long timeout_ms,
                           const char *tail)
{
    char *err = failure_of(dir, command, extra, timeout_ms);
    char *want = strbuf_format("kubeconfig %s/config: user \"u\": exec plugin %s: %s", dir, command, tail);
    if (strcmp(err, want) != 0)
        fail_msg("got      %s\nexpected %s", err, want);
    free(want);
    free(err);
}

static void test_failures_say_why(void **state)
{
    const char *dir = *state;
    write_plugin(dir, "fails", "printf '\\n\\033[31mtoken expired\\033[0m: log in again\\nmore detail\\n' >&2; exit 3");
    expect_failure(dir, "./fails", NULL, 0, "exited with status 3: \\x1b[31mtoken expired\\x1b[0m: log in again");
    write_plugin(dir, "garbage", "echo hello");
    expect_failure(dir, "./garbage", NULL, 0, "its output is not a JSON ExecCredential");
    write_plugin(dir, "hangs", "exec sleep 30");
    expect_failure(dir, "./hangs", NULL, 300, "did not finish within 300 ms (killed)");
    write_plugin(dir, "killed", "kill -9 $$");
    expect_failure(dir, "./killed", NULL, 0, "killed by signal 9");
    expect_failure(dir, "./missing", ", installHint: 'install it with: apt-get install missing'", 0,
                   "executable not found: install it with: apt-get install missing");
    expect_failure(dir, "gqa-no-such-plugin", NULL, 0, "executable not found (on PATH or at that path)");
    write_in(dir, "config", "", 0600);
    char *text = strbuf_format("current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                               "clusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                               "users: [{name: u, user: {exec: {apiVersion: " V1 ", interactiveMode: Always, "
                               "command: ./fails}}}]\n");
    struct kube_config *cfg = load_kc(dir, text);
    free(text);
    struct kube_exec_cred cred;
    char *err = NULL;
    assert_int_equal(kube_exec_current(cfg->exec, 0, &cred, &err), -1);
    assert_non_null(strstr(err, "interactiveMode is Always, but standard input is not a terminal"));
    free(err);
    kube_config_free(cfg);
}

/* ---- with the client ------------------------------------------------------ */

/* Only "tok-2" is let in: the first run's token is refused with 401. */
static int respond_tok2(void *ctx, struct fake_conn *c, const struct fake_request *rq)
{
    (void)ctx;
    if (strcmp(rq->auth, "Bearer tok-2") != 0)
        return fake_reply(c, 401, "Unauthorized", "application/json",
                          "{\"kind\":\"Status\",\"message\":\"Unauthorized\",\"code\":401}");
    return fake_reply(c, 200, "OK", "application/json", "{\"kind\":\"PodList\",\"items\":[]}");
}

static void test_client_runs_again_after_401(void **state)
{
    const char *dir = *state;
    assert_int_equal(fakeapi_start(respond_tok2, NULL), 0);
    write_plugin(dir, "plugin", PRINT_TOKEN("tok-$n", ""));
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", fakeapi_port());
    struct kube_config *cfg = exec_kc(dir, url, "./plugin", NULL);
    char *err = NULL;
    struct kube_client *client = kube_client_new(cfg, &err);
    assert_non_null(client);
    kube_config_free(cfg); /* the client holds its own reference to the plugin */
    struct kube_response r;
    assert_int_equal(kube_request(client, "GET", "/api/v1/pods", NULL, NULL, 0, 10000, &r), 0);
    assert_int_equal(r.status, 200);
    kube_response_free(&r);
    static struct fake_request log[8];
    size_t n = fakeapi_log(log, 8);
    assert_int_equal(n, 2);
    assert_string_equal(log[0].auth, "Bearer tok-1");
    assert_string_equal(log[1].auth, "Bearer tok-2");
    /* The credential is kept: the next request runs nothing. */
    assert_int_equal(kube_request(client, "GET", "/api/v1/pods", NULL, NULL, 0, 10000, &r), 0);
    assert_int_equal(r.status, 200);
    kube_response_free(&r);
    assert_int_equal(runs_of(dir), 2);
    kube_client_free(client);
    fakeapi_stop();
}

static void test_client_reports_a_failing_plugin(void **state)
{
    const char *dir = *state;
    assert_int_equal(fakeapi_start(respond_tok2, NULL), 0);
    write_plugin(dir, "plugin", "echo 'error: no SSO session' >&2; exit 1");
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", fakeapi_port());
    struct kube_config *cfg = exec_kc(dir, url, "./plugin", NULL);
    char *err = NULL;
    struct kube_client *client = kube_client_new(cfg, &err);
    struct kube_response r;
    assert_int_equal(kube_request(client, "GET", "/api/v1/pods", NULL, NULL, 0, 10000, &r), -1);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.error, "GET /api/v1/pods: kubeconfig "));
    assert_non_null(strstr(r.error, "exec plugin ./plugin: exited with status 1: error: no SSO session"));
    static struct fake_request log[4];
    assert_int_equal(fakeapi_log(log, 4), 0); /* nothing was sent without a credential */
    kube_response_free(&r);
    kube_client_free(client);
    kube_config_free(cfg);
    fakeapi_stop();
}

/* ---- one runner, no lock held while it runs ------------------------------ */

struct caller {
    struct kube_exec *e;
    uint64_t have;
    int rc;
    struct kube_exec_cred cred;
    char *err;
    atomic_int done;
};

static void *call_current(void *arg)
{
    struct caller *c = arg;
    c->rc = kube_exec_current(c->e, c->have, &c->cred, &c->err);
    atomic_store(&c->done, 1);
    return NULL;
}

/* Poll (10 ms steps, 30 s at most) until dir/name exists. */
static bool appears(const char *dir, const char *name)
{
    char *p = path_in(dir, name);
    bool seen = false;
    for (int i = 0; i < 3000 && !(seen = access(p, F_OK) == 0); i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    free(p);
    return seen;
}

static void test_slow_run_blocks_no_valid_token(void **state)
{
    const char *dir = *state;
    /* Run 2 and run 3 say they started, then wait until the test lets them
     * finish: "slow" is an order of events here, not a duration. */
    char expiry[64];
    time_t in_an_hour = time(NULL) + 3600;
    strftime(expiry, sizeof(expiry), ",\"expirationTimestamp\":\"%Y-%m-%dT%H:%M:%SZ\"", gmtime(&in_an_hour));
    char *body = strbuf_format("if [ $n -ge 2 ]; then touch '%s/started-'$n; "
                               "while [ ! -e '%s/go-'$n ]; do sleep 0.01; done; fi\n" PRINT_TOKEN("tok-$n", "%s"),
                               dir, dir, expiry);
    write_plugin(dir, "slow", body);
    free(body);
    struct kube_config *cfg = exec_kc(dir, "https://k", "./slow", NULL);
    struct kube_exec *e = cfg->exec;
    struct kube_exec_cred cred;
    char *err = NULL;
    assert_int_equal(kube_exec_current(e, 0, &cred, &err), 1);
    assert_string_equal(cred.token, "tok-1");
    kube_exec_cred_clear(&cred);

    /* The token now expires within the refresh window: caller a replaces it
     * early, and its run does not finish until go-2 exists. */
    kube_exec_set_refresh_ahead(e, 2 * 3600 * 1000L);
    struct caller a = {.e = e, .have = 1};
    pthread_t ta;
    assert_int_equal(pthread_create(&ta, NULL, call_current, &a), 0);
    assert_true(appears(dir, "started-2"));
    /* While a's run is in progress, callers with the valid token get it at once. */
    assert_int_equal(kube_exec_current(e, 1, &cred, &err), 0);
    assert_int_equal(kube_exec_current(e, 0, &cred, &err), 1);
    assert_string_equal(cred.token, "tok-1");
    kube_exec_cred_clear(&cred);
    assert_int_equal(kube_exec_runs(e), 2); /* nor blocked here */
    kube_exec_invalidate(e, 7);             /* nor here */
    assert_int_equal(atomic_load(&a.done), 0);
    write_in(dir, "go-2", "", 0644);
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(a.rc, 1);
    assert_string_equal(a.cred.token, "tok-2");
    assert_true(a.cred.serial == 2);
    kube_exec_cred_clear(&a.cred);

    /* Refused: no valid token now. b runs the command; c waits for b's
     * result and starts no run of its own. */
    kube_exec_invalidate(e, 2);
    struct caller b = {.e = e, .have = 2}, c = {.e = e, .have = 2};
    pthread_t tb, tc;
    assert_int_equal(pthread_create(&tb, NULL, call_current, &b), 0);
    assert_true(appears(dir, "started-3"));
    assert_int_equal(pthread_create(&tc, NULL, call_current, &c), 0);
    write_in(dir, "go-3", "", 0644);
    assert_int_equal(pthread_join(tb, NULL), 0);
    assert_int_equal(pthread_join(tc, NULL), 0);
    assert_int_equal(b.rc, 1);
    assert_int_equal(c.rc, 1);
    assert_string_equal(b.cred.token, "tok-3");
    assert_string_equal(c.cred.token, "tok-3");
    assert_int_equal(runs_of(dir), 3);
    kube_exec_cred_clear(&b.cred);
    kube_exec_cred_clear(&c.cred);
    kube_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test_setup_teardown(test_command_sees_args_env_and_cluster, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_no_cluster_info_by_default, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_name_found_on_path, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_expiry_runs_again, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_failures_say_why, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_client_runs_again_after_401, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_client_reports_a_failing_plugin, temp_dir_setup, temp_dir_teardown),
        cmocka_unit_test_setup_teardown(test_slow_run_blocks_no_valid_token, temp_dir_setup, temp_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
