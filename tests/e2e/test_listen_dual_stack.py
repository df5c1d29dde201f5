#!/usr/bin/env python3
"""One listener for IPv4 and IPv6 clients: `--listen-http [::]:PORT` (what the
Deployment uses, so that IPv6 single-stack and dual-stack clusters reach the
pods) answers over [::1] and over 127.0.0.1, the IPv4 client arriving as a
v4-mapped address. Skipped, with a message, only when the machine has no IPv6
loopback at all."""

import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_listen_dual_stack")


def ipv6_loopback():
    """None when [::1] works here, else why not."""
    if not socket.has_ipv6:
        return "Python was built without IPv6"
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError as e:
        return "no IPv6 loopback on this machine (%s)" % e
    return None


def answers(s, host, port, label):
    r = g.http_request(host, port, "GET", "/healthz", timeout=10)
    s.check_eq((r.status, r.text), (200, "ok\n"), "/healthz over %s" % label)
    body = json.dumps({"Pod": g.demo_pod("gpu-4"), "NodeNames": ["gpu-v100-0", "cpu-0"]})
    r = g.http_request(host, port, "POST", "/scheduler/filter", body=body, timeout=10)
    s.check_eq(r.status, 200, "filter over %s: 200" % label)
    s.check_eq(r.json().get("NodeNames"), ["gpu-v100-0"], "filter over %s answers" % label, r)


@suite.test
def one_listener_both_families(s):
    why = ipv6_loopback()
    if why:
        print("  skip [one_listener_both_families] %s: nothing to test" % why)
        return
    # The harness probes 127.0.0.1:PORT for readiness: an IPv6-only socket
    # would never become ready, which is exactly the failure to catch.
    with g.Server(s, flags=["--placement", "bind", "--listen-http", "[::]:{port}"]) as srv:
        port = srv.port
        s.check_in("listening on http://[::]:%d" % port, srv.stderr(), "the log names the [::] listener")
        answers(s, "::1", port, "[::1]")
        answers(s, "127.0.0.1", port, "127.0.0.1")
        # Both reach the same process: a keep-alive connection of each family at once.
        a = socket.create_connection(("::1", port), timeout=10)
        b = socket.create_connection(("127.0.0.1", port), timeout=10)
        for sock in (a, b):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for sock, label in ((a, "[::1]"), (b, "127.0.0.1")):
            r = g.read_http_response(sock)
            s.check_eq(r.status, 200, "a connection over %s held open beside the other family" % label)
            sock.close()


@suite.test
def ipv6_loopback_only(s):
    """A specific IPv6 address stays that address: [::1] takes no IPv4 client."""
    why = ipv6_loopback()
    if why:
        print("  skip [ipv6_loopback_only] %s: nothing to test" % why)
        return
    srv = g.Server(s, flags=["--listen-http", "[::1]:{port}"])
    srv.ready_probe = lambda: g.http_request("::1", srv.port, "GET", "/readyz", timeout=2)
    with srv:
        port = srv.port
        answers(s, "::1", port, "[::1]")
        try:
            g.http_request("127.0.0.1", port, "GET", "/healthz", timeout=5)
            s.check(False, "127.0.0.1 does not reach a [::1] listener")
        except OSError:
            s.check(True, "127.0.0.1 does not reach a [::1] listener")


if __name__ == "__main__":
    suite.main()
