#!/usr/bin/env python3
"""apisim: the service proxy (/api/v1/namespaces/NS/services/NAME[:PORT]/proxy/...)."""
import json
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

PROXY = "/api/v1/namespaces/kube-system/services/%s/proxy"


class Echo(BaseHTTPRequestHandler):
    """A backend that answers what it was asked, and 418 on /teapot."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        if self.path.startswith("/teapot"):
            data, code, ctype = b"short and stout", 418, "text/plain"
        else:
            data = json.dumps({"method": self.command, "path": self.path, "body": body,
                               "contentType": self.headers.get("Content-Type"),
                               "authorization": self.headers.get("Authorization")}).encode()
            code, ctype = 200, "application/json"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET


def backend():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_forwards_path_query_body_and_answer():
    be = backend()
    sim = apisim.APISim(tokens=["t"]).start()
    try:
        sim.add_service_proxy("kube-system", "gqa", "http://127.0.0.1:%d" % be.server_address[1])
        c = apisim.Client(sim.url, token="t")
        r = c.get(PROXY % "gqa" + "/inspect/nodes?labelSelector=a%3Db&topology=false")
        assert r.status == 200, r
        assert r.json["path"] == "/inspect/nodes?labelSelector=a%3Db&topology=false", r.json
        assert r.json["authorization"] is None, "the user's credentials must not reach the service"
        r = c.post(PROXY % "gqa" + "/inspect/explain", {"kind": "Pod"})
        assert r.status == 200 and r.json["method"] == "POST" and json.loads(r.json["body"]) == {"kind": "Pod"}, r
        assert r.json["contentType"] == "application/json", r.json
        # the backend's own status and type come back unchanged
        r = c.get(PROXY % "gqa" + "/teapot")
        assert r.status == 418 and r.body == b"short and stout" and r.headers["Content-Type"] == "text/plain", r
        # the port (name or number) and the scheme form select the same Service
        assert c.get(PROXY % "gqa:" + "/x").status == 200
        assert c.get(PROXY % "http:gqa:" + "/x").json["path"] == "/x"
        # nothing after /proxy: the root
        assert c.get(PROXY % "gqa").json["path"] == "/"
        # the request is logged like any other
        assert any(q["path"].endswith("/proxy/inspect/explain") and q["method"] == "POST" for q in sim.requests())
    finally:
        sim.stop()
        be.shutdown()


def test_errors_are_the_api_servers():
    sim = apisim.APISim(tokens=["t"]).start()
    try:
        c = apisim.Client(sim.url, token="t")
        r = c.get(PROXY % "missing" + "/x")
        assert r.status == 404 and r.json["message"] == 'services "missing" not found', r
        assert r.json["details"] == {"name": "missing", "kind": "services"}, r.json
        sim.add_service_proxy("kube-system", "idle", None)
        r = c.get(PROXY % "idle" + "/x")
        assert r.status == 503 and r.json["reason"] == "ServiceUnavailable", r
        assert r.json["message"] == 'no endpoints available for service "idle"', r.json
        port = closed_port()
        sim.add_service_proxy("kube-system", "down", "http://127.0.0.1:%d" % port)
        r = c.get(PROXY % "down" + "/x")
        assert r.status == 503 and r.json["reason"] == "ServiceUnavailable", r
        assert r.json["message"] == "error trying to reach service: dial tcp 127.0.0.1:%d: connect: connection refused" \
            % port, r.json
        # authentication first, as everywhere
        assert apisim.Client(sim.url).get(PROXY % "down" + "/x").status == 401
        sim.remove_service_proxy("kube-system", "down")
        assert c.get(PROXY % "down" + "/x").status == 404
    finally:
        sim.stop()


def test_control_endpoint_registers_and_reset_forgets():
    be = backend()
    sim = apisim.APISim(tokens=["t"]).start()
    try:
        c = apisim.Client(sim.url, token="t")
        target = "http://127.0.0.1:%d" % be.server_address[1]
        r = c.post("/_sim/faults", {"op": "service_proxy", "namespace": "kube-system", "name": "gqa",
                                    "target": target})
        assert r.status == 200, r
        assert c.get(PROXY % "gqa" + "/y").json["path"] == "/y"
        r = c.post("/_sim/faults", {"op": "service_proxy", "namespace": "kube-system", "name": "bad",
                                    "target": "not a url"})
        assert r.status == 400, r
        sim.reset()
        assert c.get(PROXY % "gqa" + "/y").status == 404
    finally:
        sim.stop()
        be.shutdown()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only)
