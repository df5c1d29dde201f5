/* test_options.c - unit tests for extender/options.c over lib/flags.c: defaults,
 * both flag forms, the GQA_* environment and its precedence, every value check,
 * the one-line errors, flags limited to `simulate`, and the combinations that
 * are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extender/options.h"

#define MAX_ARGS 24

/* The environment variables any test here sets; cleared before each test so
 * that neither the caller's environment nor an earlier test leaks in. */
static const char *const env_names[] = {"GQA_LISTEN_HTTP",        "GQA_LEADER_ELECT", "GQA_ASSUME_TTL",
                                        "GQA_STATE_FILE",         "GQA_PLACEMENT",    "GQA_HELP",
                                        "KUBERNETES_SERVICE_HOST"};

static int clean_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
        unsetenv(env_names[i]);
    return 0;
}

/* Parse the NULL-terminated flags; *err_line receives what was printed
 * (malloc'd, "" when nothing). Returns options_parse's result. */
static int parse(struct options *o, enum options_command cmd, char **err_line, ...)
{
    char *argv[MAX_ARGS];
    int argc = 0;
    va_list ap;
    va_start(ap, err_line);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && argc < MAX_ARGS;)
        argv[argc++] = (char *)a;
    va_end(ap);
    char *buf = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&buf, &len);
    assert_non_null(err);
    int rc = options_parse(o, cmd, argc, argv, err);
    fclose(err);
    *err_line = buf;
    return rc;
}

/* The flags must be refused with exactly one line equal to want. */
static void expect_refused(enum options_command cmd, const char *want, ...)
{
    char *argv[MAX_ARGS];
    int argc = 0;
    va_list ap;
    va_start(ap, want);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && argc < MAX_ARGS;)
        argv[argc++] = (char *)a;
    va_end(ap);
    char *buf = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&buf, &len);
    assert_non_null(err);
    struct options o;
    int rc = options_parse(&o, cmd, argc, argv, err);
    fclose(err);
    if (rc != -1)
        fail_msg("accepted, expected: %s", want);
    assert_string_equal(buf, want);
    free(buf);
}

static void test_defaults(void **state)
{
    (void)state;
    struct options o;
    char *err;
    assert_int_equal(parse(&o, CMD_SERVE, &err, "--state-file", "s.yaml", NULL), 0);
    assert_string_equal(err, "");
    assert_string_equal(o.listen_http, "127.0.0.1:3456");
    assert_null(o.listen_https);
    assert_string_equal(o.state_file, "s.yaml");
    assert_int_equal(o.placement, PLACEMENT_FILTER);
    assert_int_equal(o.policy.gpu, POLICY_BINPACK);
    assert_int_equal(o.policy.node, POLICY_BINPACK);
    assert_int_equal(o.assume_ttl_ns, OPTIONS_ASSUME_TTL_NS);
    assert_int_equal(o.max_body_bytes, 256LL << 20);
    assert_string_equal(o.crl_namespace, "kube-public");
    assert_string_equal(o.quota_configmap, "kube-system/gpu-quota");
    assert_string_equal(o.lease_namespace, "kube-system");
    assert_string_equal(o.lease_name, "gpu-quota-admission");
    assert_string_equal(o.gpu_model_label, "tkestack.io/gpu-model");
    assert_string_equal(o.gpu_pool_label, "tkestack.io/gpu-pool");
    assert_int_equal(o.leader_elect, 0);
    assert_true(o.threads >= 1);
    options_free(&o);
    free(err);
}

static void test_both_forms_and_values(void **state)
{
    (void)state;
    struct options o;
    char *err;
    assert_int_equal(parse(&o, CMD_SERVE, &err, "--state-file=s.yaml", "--placement", "bind", "--gpu-policy=spread",
                           "--vcuda-shares", "refuse", "--node-policy", "spread", "--assume-ttl", "1500ms",
                           "--max-body-bytes", "64Mi",
                           "--listen-http", "[::1]:0", "--threads=3", "--log-format", "json", NULL),
                     0);
    assert_string_equal(err, "");
    assert_int_equal(o.placement, PLACEMENT_BIND);
    assert_int_equal(o.policy.gpu, POLICY_SPREAD);
    assert_true(o.policy.refuse_vcuda_shares);
    assert_int_equal(o.policy.node, POLICY_SPREAD);
    assert_int_equal(o.assume_ttl_ns, 1500LL * 1000000LL);
    assert_int_equal(o.max_body_bytes, 64LL << 20);
    assert_string_equal(o.listen_http, "[::1]:0");
    assert_int_equal(o.threads, 3);
    assert_int_equal(o.log_format, LOG_FORMAT_JSON);
    options_free(&o);
    free(err);
}

static void test_zero_threads_means_cores(void **state)
{
    (void)state;
    struct options o;
    char *err;
    assert_int_equal(parse(&o, CMD_SERVE, &err, "--state-file=s.yaml", "--threads", "0", "--assume-ttl", "1h30m", NULL),
                     0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(o.threads, cores > 0 ? (cores > 1024 ? 1024 : cores) : 2);
    assert_int_equal(o.assume_ttl_ns, 5400LL * 1000000000LL);
    options_free(&o);
    free(err);
}

static void test_environment_and_precedence(void **state)
{
    (void)state;
    setenv("GQA_STATE_FILE", "env.yaml", 1);
    setenv("GQA_ASSUME_TTL", "2m", 1);
    setenv("GQA_PLACEMENT", "bind", 1);
    struct options o;
    char *err;
    /* The command line wins over the environment. */
    assert_int_equal(parse(&o, CMD_SERVE, &err, "--placement", "filter", NULL), 0);
    assert_string_equal(o.state_file, "env.yaml");
    assert_int_equal(o.assume_ttl_ns, 120LL * 1000000000LL);
    assert_int_equal(o.placement, PLACEMENT_FILTER);
    options_free(&o);
    free(err);
    /* A bad environment value names the variable, not a flag. */
    setenv("GQA_ASSUME_TTL", "soon", 1);
    expect_refused(CMD_SERVE, "gpu-quota-admission: invalid value \"soon\" for GQA_ASSUME_TTL (expected DURATION)\n",
                   NULL);
    /* --help is never read from the environment. */
    setenv("GQA_ASSUME_TTL", "2m", 1);
    setenv("GQA_HELP", "true", 1);
    assert_int_equal(parse(&o, CMD_SERVE, &err, NULL), 0);
    assert_int_equal(o.show_help, 0);
    options_free(&o);
    free(err);
}

static void test_switch_from_environment(void **state)
{
    (void)state;
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    struct options o;
    char *err;
    setenv("GQA_LEADER_ELECT", "true", 1);
    assert_int_equal(parse(&o, CMD_SERVE, &err, NULL), 0);
    assert_int_equal(o.leader_elect, 1);
    options_free(&o);
    free(err);
    setenv("GQA_LEADER_ELECT", "false", 1);
    assert_int_equal(parse(&o, CMD_SERVE, &err, NULL), 0);
    assert_int_equal(o.leader_elect, 0);
    options_free(&o);
    free(err);
    setenv("GQA_LEADER_ELECT", "yes", 1);
    expect_refused(CMD_SERVE,
                   "gpu-quota-admission: invalid value \"yes\" for GQA_LEADER_ELECT (expected true or false)\n", NULL);
}

static void test_value_checks(void **state)
{
    (void)state;

    static const struct {
        const char *flag, *value, *expected;
    } bad[] = {
        {"--placement", "both", "filter|bind"},
        {"--gpu-policy", "Spread", "binpack|spread"},
        {"--assume-ttl", "0s", "DURATION"},
        {"--assume-ttl", "1e9h", "DURATION"},
        {"--threads", "-1", "N"},
        {"--threads", "1025", "N"},
        {"--max-body-bytes", "1000", "BYTES"},
        {"--max-body-bytes", "1.5", "BYTES"},
        {"--listen-http", "127.0.0.1:65536", "ADDR:PORT"},
        {"--listen-http", "::1:80", "ADDR:PORT"},
        {"--listen-http", "localhost", "ADDR:PORT"},
        {"--crl-namespace", "Kube-Public", "NAMESPACE"},
        {"--lease-namespace", "-x", "NAMESPACE"},
        {"--lease-name", "", "NAME"},
        {"--quota-configmap", "gpu-quota", "NAMESPACE/NAME"},
        {"--quota-configmap", "a/b/c", "NAMESPACE/NAME"},
        {"--gpu-model-label", "", "LABEL"},
        {"--log-level", "trace", "debug|info|warn|error"},
        {"--log-format", "yaml", "text|json|klog"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[256];
        snprintf(want, sizeof(want), "gpu-quota-admission: invalid value \"%s\" for %s (expected %s)\n", bad[i].value,
                 bad[i].flag, bad[i].expected);
        expect_refused(CMD_SERVE, want, "--state-file", "s", bad[i].flag, bad[i].value, NULL);
    }
}

static void test_flag_shapes(void **state)
{
    (void)state;
    expect_refused(CMD_SERVE, "gpu-quota-admission: unknown flag --bogus (see --help)\n", "--bogus", NULL);
    expect_refused(CMD_SERVE, "gpu-quota-admission: unknown flag --state (see --help)\n", "--state=s", NULL);
    expect_refused(CMD_SERVE, "gpu-quota-admission: flag --placement needs a value (filter|bind)\n", "--placement",
                   NULL);
    expect_refused(CMD_SERVE, "gpu-quota-admission: flag --leader-elect takes no value\n", "--leader-elect=true", NULL);
    expect_refused(CMD_SERVE, "gpu-quota-admission: unexpected argument \"serve\" (flags start with --; see --help)\n",
                   "serve", NULL);
}

static void test_simulate_scope(void **state)
{
    (void)state;
    struct options o;
    char *err;
    assert_int_equal(parse(&o, CMD_SIMULATE, &err, "--state-file", "s", "--pod", "p.yaml", "--placement", "bind", NULL),
                     0);
    assert_string_equal(o.pod_file, "p.yaml");
    options_free(&o);
    free(err);
    /* Listener and cluster flags mean nothing to simulate. */
    expect_refused(CMD_SIMULATE, "gpu-quota-admission: unknown flag --listen-http (see --help)\n", "--state-file", "s",
                   "--pod", "p", "--listen-http", ":1", NULL);
    expect_refused(CMD_SIMULATE, "gpu-quota-admission: simulate needs --pod FILE\n", "--state-file", "s", NULL);
    expect_refused(CMD_SIMULATE, "gpu-quota-admission: simulate needs --state-file FILE\n", "--pod", "p", NULL);
}

static void test_combinations(void **state)
{
    (void)state;
    expect_refused(CMD_SERVE,
                   "gpu-quota-admission: no cluster: give --kubeconfig, run in a pod (KUBERNETES_SERVICE_HOST), or "
                   "--state-file for offline mode\n",
                   NULL);
    expect_refused(CMD_SERVE,
                   "gpu-quota-admission: --state-file (offline) and --kubeconfig (live) exclude each other\n",
                   "--state-file", "s", "--kubeconfig", "k", NULL);
    expect_refused(CMD_SERVE, "gpu-quota-admission: --leader-elect needs a cluster, not --state-file\n", "--state-file",
                   "s", "--leader-elect", NULL);
    expect_refused(CMD_SERVE, "gpu-quota-admission: --listen-https needs --tls-cert and --tls-key\n", "--state-file",
                   "s", "--listen-https", ":8443", NULL);
    expect_refused(CMD_SERVE, "gpu-quota-admission: --tls-client-ca needs --listen-https\n", "--state-file", "s",
                   "--tls-client-ca", "ca.pem", NULL);
    expect_refused(CMD_SERVE,
                   "gpu-quota-admission: --listen-http is empty and --listen-https is not set: nothing to serve\n",
                   "--state-file", "s", "--listen-http", "", NULL);
    /* Spread with vcuda shares placed: refused at start, naming the fix. */
    static const char spread_vcuda[] =
        "gpu-quota-admission: --gpu-policy spread cannot place tencent.com/vcuda-core shares (GPU-Manager re-checks "
        "them in its binpack order and fails the pod with \"Nvidia node mismatch\"): use --gpu-policy binpack, or add "
        "--vcuda-shares refuse when no pod asks for vcuda shares\n";
    expect_refused(CMD_SERVE, spread_vcuda, "--state-file", "s", "--gpu-policy", "spread", NULL);
    expect_refused(CMD_SIMULATE, spread_vcuda, "--state-file", "s", "--pod", "p", "--gpu-policy", "spread",
                   "--vcuda-shares", "place", NULL);
    /* --help needs nothing else. */
    struct options o;
    char *err;
    assert_int_equal(parse(&o, CMD_SERVE, &err, "--help", NULL), 0);
    assert_int_equal(o.show_help, 1);
    options_free(&o);
    free(err);
}

static void test_help_lists_every_flag(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    options_print_help(out);
    fclose(out);
    static const char *const names[] = {"--listen-http ADDR:PORT", "--kubeconfig FILE",      "--state-file FILE",
                                        "--placement filter|bind", "--assume-ttl DURATION",  "--leader-elect",
                                        "--max-body-bytes BYTES",  "--log-format text|json|klog", "--help"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strstr(buf, names[i]))
            fail_msg("--help does not list %s", names[i]);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, clean_env),
        cmocka_unit_test_setup(test_both_forms_and_values, clean_env),
        cmocka_unit_test_setup(test_zero_threads_means_cores, clean_env),
        cmocka_unit_test_setup(test_environment_and_precedence, clean_env),
        cmocka_unit_test_setup(test_switch_from_environment, clean_env),
        cmocka_unit_test_setup(test_value_checks, clean_env),
        cmocka_unit_test_setup(test_flag_shapes, clean_env),
        cmocka_unit_test_setup(test_simulate_scope, clean_env),
        cmocka_unit_test_setup(test_combinations, clean_env),
        cmocka_unit_test_setup(test_help_lists_every_flag, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
