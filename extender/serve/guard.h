/*
 * guard.h - what a client may hold: connections, time, memory, paths.
 *
 * Owns the limits the listeners put on clients, kept apart from server.c
 * (which owns sockets, TLS and dispatch) so the two change independently:
 *
 *  - connections: per listener, in all (--max-connections) and per source
 *    address (--max-connections-per-ip), with libmicrohttpd's own options
 *    (guard_daemon_options); the process's open-file limit is raised to fit
 *    them (each connection needs two descriptors, see below). A full
 *    listener still admits new clients: when clients wait in its accept
 *    queue, the reaper shuts down as many of its connections as wait, those
 *    that have waited longest for a request first (never one being
 *    answered, nor one that became ready for its request within the last
 *    second), so slow or idle clients cannot hold every slot;
 *  - time: a connection must deliver each whole request (headers and body)
 *    within --read-timeout of being ready for it (accepted, or its previous
 *    answer sent). libmicrohttpd's own timeout only counts idleness, which a
 *    client that trickles a byte at a time never reaches, so a reaper thread
 *    shuts down the sockets of connections past their deadline;
 *  - memory: request bodies grow by the bytes received (never by the
 *    announced Content-Length) and every byte they hold counts against one
 *    process-wide budget (--body-budget); a body that would pass it is
 *    refused (503), one past --max-body-bytes too (413);
 *  - paths: a request whose path decodes to a NUL or another control
 *    character is marked so the server answers 400 (libmicrohttpd decodes
 *    "%00" and the router would see only the part before it).
 *
 * Threads: the connection callbacks run on libmicrohttpd's threads, the
 * reaper on its own. The registry of connections is guarded by the guard's
 * mutex; deadlines and the budget are atomics. Each connection keeps a dup()
 * of its socket, closed only when libmicrohttpd reports the connection
 * closed, so the reaper never shuts down a descriptor number that was
 * reused by another connection.
 */
#ifndef GQA_GUARD_H
#define GQA_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/strbuf.h"

struct guard_config {
    unsigned max_connections;        /* per listener */
    unsigned max_connections_per_ip; /* per listener; 0: no limit */
    int64_t read_timeout_ns;         /* to receive one whole request */
    int64_t body_budget;             /* bytes all request bodies in flight may hold */
    int64_t max_body;                /* bytes one body may hold (--max-body-bytes) */
    int listeners;                   /* how many daemons use the guard (descriptors) */
};

struct guard;

/* Start the reaper and set the budget. NULL with *err (malloc'd). */
struct guard *guard_start(const struct guard_config *cfg, char **err);
/* Draining: from now on every new connection is closed as soon as it is
 * accepted (the listeners stay open until the daemons stop). */
void guard_refuse_new(struct guard *g);
/* Stop the reaper. Call after the daemons are stopped. NULL is a no-op. */
void guard_stop(struct guard *g);

/* The libmicrohttpd options a daemon needs for the guard, for
 * MHD_OPTION_ARRAY: GUARD_MHD_OPTIONS entries, the last MHD_OPTION_END.
 * slot (0 .. GUARD_MAX_LISTENERS-1) names the listener: each one's
 * connections are counted and made room in apart. */
#define GUARD_MHD_OPTIONS 5
#define GUARD_MAX_LISTENERS 3
void guard_daemon_options(struct guard *g, int slot, struct MHD_OptionItem opts[GUARD_MHD_OPTIONS]);
/* The daemon of slot listens on listen_fd: from now on, when it is full
 * and clients wait in its accept queue, room is made (see above). */
void guard_listener_started(struct guard *g, int slot, int listen_fd);

/* Hooks for the request handler, on the connection's thread. */
/* The path of the request being read decoded to a control character. */
bool guard_path_refused(struct MHD_Connection *conn);
/* The whole request has arrived: its deadline no longer applies. */
void guard_request_received(struct MHD_Connection *conn);
/* The answer is done: the next request on this connection has a new deadline. */
void guard_request_done(struct MHD_Connection *conn);

/* Request bodies. `charged` is the memory this body holds against the
 * budget (its buffer's capacity); announced is the Content-Length, 0 when
 * unknown. */
enum guard_take { GUARD_TAKEN, GUARD_TOO_LARGE, GUARD_OVER_BUDGET, GUARD_NO_MEMORY };
/* Whether a body of `announced` bytes could be held now (an early answer
 * for a client that announces more than the budget has left). */
enum guard_take guard_body_admit(const struct guard *g, uint64_t announced);
enum guard_take guard_body_append(const struct guard *g, struct strbuf *body, int64_t *charged, uint64_t announced,
                                  const char *data, size_t n);
/* Free the body and give its memory back to the budget. */
void guard_body_release(struct strbuf *body, int64_t *charged);

/* A raw request target ("/path?query", still percent-encoded): does its
 * path decode to a NUL or another control character? Exposed for tests. */
bool guard_path_has_control(const char *uri);

/* Gauges and counters for /metrics, appended in the exposition format. */
void guard_render_metrics(struct strbuf *out);

#endif
