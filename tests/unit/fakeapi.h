/*
 * fakeapi.h - a scripted HTTP/1.1 server on 127.0.0.1 for the unit tests of
 * code that talks to the API server (kubeclient, recorder).
 *
 * Owns sockets, keep-alive connections (one thread each), reading requests
 * with their headers and body, and the ways to answer: a plain reply, a
 * chunked stream in pieces, or holding the connection open without an
 * answer. What to answer is the test's: a respond function gets each
 * request in order. Every request is also appended to a log the test reads
 * afterwards. Plain HTTP only: TLS is covered by the tests against the API
 * simulator. Not reentrant: one server per test process at a time.
 */
#ifndef GQA_TEST_FAKEAPI_H
#define GQA_TEST_FAKEAPI_H

#include <stddef.h>

#define FAKE_BODY_MAX 16384
#define FAKE_LOG_MAX 64

struct fake_request {
    char method[16], path[1024];
    char auth[512], ctype[256], accept[256], agent[256];
    char body[FAKE_BODY_MAX];
    size_t body_len;
};

struct fake_conn;

/* Answer rq on c: 0 to keep the connection for the next request, -1 to close it. */
typedef int (*fake_respond_fn)(void *ctx, struct fake_conn *c, const struct fake_request *rq);

/* Start listening on an ephemeral port of 127.0.0.1. 0, or -1. */
int fakeapi_start(fake_respond_fn respond, void *ctx);
void fakeapi_stop(void);
int fakeapi_port(void);
/* "http://127.0.0.1:PORT/" (static storage). */
const char *fakeapi_url(void);
/* The last request seen, and every request so far (at most FAKE_LOG_MAX). */
struct fake_request fakeapi_last(void);
size_t fakeapi_log(struct fake_request *out, size_t max);
void fakeapi_clear_log(void);
/* Connections accepted so far. */
int fakeapi_connections(void);

/* Answers. Each returns 0, or -1 when the client went away. */
int fake_reply(struct fake_conn *c, int status, const char *reason, const char *ctype, const char *body);
int fake_start_chunked(struct fake_conn *c);
int fake_chunk(struct fake_conn *c, const char *data, size_t len);
int fake_chunk_str(struct fake_conn *c, const char *s);
int fake_end_chunked(struct fake_conn *c);
/* Keep the connection open, answering nothing, until the client closes it
 * or the server stops (at most 10 s). Always -1. */
int fake_hold(struct fake_conn *c);

/* Milliseconds on the monotonic clock, and a sleep, for timing checks. */
long long fake_mono_ms(void);
void fake_sleep_ms(long ms);

#endif
