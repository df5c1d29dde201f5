/*
 * server.h - the HTTP and HTTPS listeners.
 *
 * Owns sockets, TLS and request bodies, on libmicrohttpd with a worker thread
 * pool: plain HTTP (the API server's service proxy dials the pod that way)
 * and HTTPS with the TLS policy of tlspolicy.h (TLS 1.3 preferred, TLS 1.2
 * ECDHE+AEAD) and, with a client CA, mutual TLS.
 * Bodies are collected up to a cap (413 beyond it) and within a process-wide
 * budget (503 beyond it), connections are limited in number and must send
 * each request within a deadline (guard.h), idle ones time out, and a drain
 * closes new connections as they arrive, lets in-flight requests finish,
 * then closes everything. Every request is answered by router_dispatch and
 * counted in the metrics. Requests that may wait on the API server
 * (router_may_block) are answered on the decision workers (workers.h) with
 * their connection suspended, so listener threads never block on it.
 * A third, optional listener (--listen-probes) serves only the health
 * endpoints and /metrics, on a thread and connection pool of its own, so
 * clients that fill the extender listeners never fail the kubelet's probes
 * (as kube components and controller-runtime keep probes on their own port).
 */
#ifndef GQA_SERVER_H
#define GQA_SERVER_H

#include <stdint.h>

#include "extender/app.h"

#define SERVER_IDLE_TIMEOUT_S 30
/* libmicrohttpd's memory per connection (headers and read buffer): small,
 * because every open connection may fill it (guard.h). */
#define SERVER_CONNECTION_MEMORY (64 * 1024)

/* A decision that waited this long for a worker is answered at once with
 * an Error instead of being taken: kube-scheduler's extender httpTimeout
 * (3 s in scheduler-config/, 5 s by default) is about to end the call, and
 * a bind taken after kube-scheduler gave up would bind a pod it has
 * already put back in its queue. */
#define SERVER_DECISION_MAX_WAIT_NS (2000LL * 1000 * 1000)

/* The decision queue holds at least every connection the listeners admit
 * (max_connections each): kube-scheduler binds each pod in a goroutine of
 * its own, so its binds wait in the queue (backpressure) rather than being
 * refused for a full queue. */
int server_decision_queue_size(int decision_queue, unsigned max_connections, int listeners);

struct server_config {
    const char *listen_http;   /* NULL or "" = off */
    const char *listen_https;  /* NULL or "" = off */
    const char *listen_probes; /* NULL or "" = off: /livez, /readyz, /healthz, /metrics only */
    const char *tls_cert_file, *tls_key_file, *tls_client_ca_file;
    const char *tls_min_version;   /* "VersionTLS12" (NULL) or "VersionTLS13" (tlspolicy.h) */
    const char *tls_cipher_suites; /* Go suite names, comma-separated; NULL or "": the defaults */
    int threads;
    int64_t max_body_bytes;
    int decision_workers; /* threads for requests that may wait on the API server; 0: inline */
    int decision_queue;   /* requests that may wait for one of them (at least the connection limit, see above) */
    /* Client limits (guard.h). */
    unsigned max_connections, max_connections_per_ip;
    int64_t read_timeout_ns;
    int64_t body_budget;
};

struct server;

/* Start the listeners. NULL with *err (malloc'd) when a listener cannot start. */
struct server *server_start(const struct server_config *cfg, struct app *app, char **err);
/* Close new connections from now on, wait up to timeout_ms for in-flight
 * requests, then stop and free. */
void server_drain_and_stop(struct server *s, int timeout_ms);

#endif
