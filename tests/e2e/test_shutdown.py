#!/usr/bin/env python3
"""Graceful shutdown: SIGTERM (and SIGINT) while a slow or a large request is
in flight lets that request complete with 200, new connections are refused
meanwhile, and the process exits 0; an idle keep-alive connection does not
hold the exit up; readiness drops during the drain."""

import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_shutdown")


def head(port, path, length):
    return ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (path, port, length)).encode()


def body_in_flight(srv):
    """True once the server holds part of a request body."""
    samples, _, _ = g.parse_metrics(srv.metrics().text)
    return (g.metric(samples, "gqa_request_body_bytes") or 0) > 0


def draining(srv):
    """True once the server has logged that it is finishing in-flight requests."""
    return "finishing in-flight requests" in srv.stderr()


def connect_refused(port):
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError:
        return True
    # Accepted by the kernel backlog is not the same as served: ask.
    try:
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        c.settimeout(2)
        return c.recv(100) == b""
    except OSError:
        return True
    finally:
        c.close()


@suite.test
def sigterm_during_slow_request(s):
    for sig in (signal.SIGTERM, signal.SIGINT):
        srv = g.Server(s, name="server-%s" % sig.name).start()
        try:
            body = json.dumps({"Pod": g.demo_pod("vcuda-share"), "NodeNames": g.DEMO_ARGS_ORDER}).encode()
            sock = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            sock.sendall(head(srv.port, "/scheduler/filter", len(body)) + body[:50])
            s.require(g.wait_until(lambda: body_in_flight(srv)), "%s: the request is in flight" % sig.name)
            srv.signal(sig)
            s.check(g.wait_until(lambda: draining(srv)), "%s: the drain starts (logged)" % sig.name, srv.stderr())
            s.check(g.wait_until(lambda: connect_refused(srv.port)),
                    "%s: new connections are not served while draining" % sig.name)
            s.check(srv.proc.poll() is None, "%s: the process waits for the in-flight request" % sig.name)
            # The request has been slow on purpose: its body stalled from the
            # signal until the drain was logged and new connections refused.
            sock.sendall(body[50:])
            r = g.read_http_response(sock)
            sock.close()
            s.check_eq(r.status, 200, "%s: the in-flight request completes with 200" % sig.name)
            try:
                res = r.json()
            except ValueError:
                res = {}
            s.check_eq(res.get("NodeNames"), ["gpu-a100-0"], "%s: with its real answer" % sig.name)
            code = srv.wait_exit(30)
            s.check_eq(code, 0, "%s: exit code 0 after the drain" % sig.name)
        finally:
            srv.stop()


@suite.test
def sigterm_during_large_request(s):
    with g.Server(s) as srv:
        objs = g.full_node_objects(srv.inspect())
        # ~20 MB NodeList: many copies of the demo nodes under fresh names.
        items = []
        for k in range(900):
            for o in objs:
                c = json.loads(json.dumps(o))
                c["metadata"]["name"] = "%s-copy-%04d" % (o["metadata"]["name"], k)
                items.append(c)
        items.extend(objs)
        body = json.dumps({"Pod": g.demo_pod("gpu-4"), "Nodes": {"kind": "NodeList", "items": items}}).encode()
        result = {}
        mid_body = threading.Event()      # the sender has sent part of the body
        signalled = threading.Event()     # SIGTERM sent and the drain logged

        def send():
            try:
                sock = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
                sock.sendall(head(srv.port, "/scheduler/filter", len(body)))
                result["sent_head"] = time.monotonic()
                step = 256 * 1024
                for i in range(0, len(body), step):
                    sock.sendall(body[i:i + step])
                    if i == 4 * step:
                        # Hold the rest of the body until the drain has started.
                        mid_body.set()
                        signalled.wait(60)
                r = g.read_http_response(sock)
                sock.close()
                result["response"] = r
            except Exception as e:  # noqa: BLE001
                result["error"] = repr(e)
            finally:
                mid_body.set()

        t = threading.Thread(target=send)
        t.start()
        s.require(mid_body.wait(60) and "error" not in result, "part of the large body is sent",
                  result.get("error"))
        srv.signal(signal.SIGTERM)
        s.check(g.wait_until(lambda: draining(srv), 30), "the drain starts while the body is in flight",
                srv.stderr())
        signalled.set()
        t.join(120)
        s.check("error" not in result, "large request sent without error", result.get("error"))
        r = result.get("response")
        s.check(r is not None and r.status == 200, "the %.0f MB request in flight at SIGTERM completes with 200"
                % (len(body) / 1e6), r)
        if r is not None and r.status == 200:
            res = r.json()
            kept = [it["metadata"]["name"] for it in res["Nodes"]["items"]]
            s.check_eq(len(kept), 1, "filter mode answers one node of %d" % len(items))
            s.check(kept and kept[0].startswith("gpu-v100-0"), "and it is a V100 node", kept)
            s.check(res.get("NodeNames") is None, "Nodes form answer")
        code = srv.wait_exit(60)
        s.check_eq(code, 0, "exit 0 after the large request")


@suite.test
def idle_keepalive_does_not_block_exit(s):
    import http.client
    with g.Server(s) as srv:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        s.check_eq(r.status, 200, "keep-alive request answered")
        t0 = time.monotonic()
        srv.signal(signal.SIGTERM)
        code = srv.wait_exit(30)
        s.check_eq(code, 0, "exit 0 with an idle keep-alive connection open")
        s.check(time.monotonic() - t0 < 10, "and promptly (%.1fs)" % (time.monotonic() - t0))
        c.close()


@suite.test
def readiness_drops_while_draining(s):
    with g.Server(s) as srv:
        body = json.dumps({"Pod": g.demo_pod("gpu-4"), "NodeNames": ["gpu-v100-0"]}).encode()
        hold = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        hold.sendall(head(srv.port, "/scheduler/filter", len(body)) + body[:10])
        # A second, idle-but-open connection that asks /readyz during the drain.
        probe = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.require(g.wait_until(lambda: body_in_flight(srv)), "the held request is in flight")
        srv.signal(signal.SIGTERM)
        s.check(g.wait_until(lambda: draining(srv)), "the drain starts (logged)", srv.stderr())
        probe.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        try:
            r = g.read_http_response(probe)
            s.check(r.status == 503, "/readyz on an open connection during the drain answers 503", r)
        except (OSError, IOError) as e:
            s.check(True, "/readyz during the drain: connection closed (%r)" % e)
        probe.close()
        hold.sendall(body[10:])
        r = g.read_http_response(hold)
        hold.close()
        s.check_eq(r.status, 200, "the held request completes")
        s.check_eq(srv.wait_exit(30), 0, "exit 0")


if __name__ == "__main__":
    suite.main()
