/*
 * main.c - gpu-quota-admission entry point.
 *
 * Dispatches the subcommands (serve by default, `simulate`), loads the
 * cluster state, starts the listeners and waits for SIGTERM/SIGINT, then
 * drains in-flight requests and exits 0.
 */
#include "cluster/statefile.h"
#include "extender/live/live.h"
#include "extender/options.h"
#include "extender/serve/handlers.h"
#include "extender/serve/server.h"
#include "extender/serve/simulate.h"
#include "extender/serve/webhooks.h"
#include "lib/log.h"
#include "lib/version.h"

#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRAIN_TIMEOUT_MS 25000

static int load_state(struct app *app, const char *path)
{
    struct state_counts counts;
    char *err = NULL;
    if (statefile_load(&app->cache, path, &counts, &err) != 0) {
        log_error("cannot load state: %s", err ? err : "out of memory");
        free(err);
        return -1;
    }
    /* Loading parses large texts; give the transient memory back. */
    malloc_trim(0);
    log_info("loaded %s: %zu nodes, %zu pods, %zu configmaps (%zu other objects skipped)", path, counts.nodes,
             counts.pods, counts.configmaps, counts.skipped);
    return 0;
}

/* Signals are blocked in every thread (the server's threads inherit the
 * mask) and taken synchronously here, so shutdown runs in plain code. */
static int wait_for_signal(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sig = 0;
    sigwait(&set, &sig);
    return sig;
}

static void block_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Offline: the state file, once. Live: informers, recorder, leader election. */
static int load_cluster(struct app *app, const struct options *opts)
{
    if (opts->state_file)
        return load_state(app, opts->state_file);
    char *err = NULL;
    app->live = live_start(app, opts, &err);
    if (!app->live) {
        log_error("cannot follow the cluster: %s", err ? err : "out of memory");
        free(err);
        return -1;
    }
    return 0;
}

static int run_server(struct app *app, const struct options *opts)
{
    struct server_config sc = {.listen_http = opts->listen_http,
                               .listen_https = opts->listen_https,
                               .listen_probes = opts->listen_probes,
                               .tls_cert_file = opts->tls_cert,
                               .tls_key_file = opts->tls_key,
                               .tls_client_ca_file = opts->tls_client_ca,
                               .tls_min_version = opts->tls_min_version,
                               .tls_cipher_suites = opts->tls_cipher_suites,
                               .threads = opts->threads,
                               .max_body_bytes = opts->max_body_bytes,
                               .max_connections = opts->max_connections,
                               .max_connections_per_ip = opts->max_connections_per_ip,
                               .read_timeout_ns = opts->read_timeout_ns,
                               .body_budget = opts->body_budget,
                               .decision_workers = opts->decision_workers,
                               .decision_queue = opts->decision_queue};
    char *err = NULL;
    struct server *srv = server_start(&sc, app, &err);
    if (!srv) {
        log_error("%s", err ? err : "cannot start the server");
        free(err);
        return 1;
    }
    /* Ready only now: every listener (HTTPS included) accepts connections. */
    atomic_store(&app->ready, 1);
    log_info("gpu-quota-admission %s serving (placement %s, gpu-policy %s, node-policy %s, %s)", GQA_VERSION,
             opts->placement == PLACEMENT_BIND ? "bind" : "filter", pack_policy_name(opts->policy.gpu),
             pack_policy_name(opts->policy.node), opts->state_file ? "offline" : "live");
    int sig = wait_for_signal();
    log_info("received %s: finishing in-flight requests", strsignal(sig));
    atomic_store(&app->ready, 0);
    server_drain_and_stop(srv, DRAIN_TIMEOUT_MS);
    return 0;
}

static int serve(const struct options *opts)
{
    struct app app;
    if (app_init(&app, opts) != 0) {
        log_error("out of memory");
        return 1;
    }
    int rc = 1;
    if (load_cluster(&app, opts) == 0)
        rc = run_server(&app, opts);
    /* After the listeners: a leader gives its Lease back on the way out. */
    live_stop(app.live);
    app.live = NULL;
    log_info("stopped");
    app_destroy(&app);
    return rc;
}

int main(int argc, char **argv)
{
    block_signals();
    if (argc > 1 && strcmp(argv[1], "simulate") == 0)
        return simulate_main(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "validate-crl") == 0)
        return validate_crl_main(argc - 2, argv + 2);
    struct options opts;
    if (options_parse(&opts, CMD_SERVE, argc - 1, argv + 1, stderr) != 0)
        return 2;
    int rc = 0;
    if (opts.show_help) {
        options_print_help(stdout);
    } else if (opts.show_version) {
        printf("gpu-quota-admission %s (commit %s, built %s)\n", GQA_VERSION, GQA_GIT_COMMIT, GQA_BUILD_DATE);
    } else {
        log_configure(opts.log_level, opts.log_format);
        rc = serve(&opts);
    }
    options_free(&opts);
    return rc;
}
