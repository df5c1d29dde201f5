#!/usr/bin/env python3
"""apisim: bearer tokens (incl. rotation), HTTPS, client certificates."""
import os
import socket
import ssl
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apisim  # noqa: E402

PKI_DIR = tempfile.mkdtemp(prefix="apisim-auth-")
PKI = apisim.make_pki(PKI_DIR)


def assert_401(r):
    assert r.status == 401, r
    assert r.json == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, r.json
    assert r.headers.get("WWW-Authenticate", "").startswith("Bearer")


def test_tokens_over_http():
    sim = apisim.APISim(tokens=["good", "second"]).start()
    try:
        c = apisim.Client(sim.url)
        assert_401(c.get("/api/v1/nodes"))
        assert_401(c.get("/api/v1/nodes", token="bad"))
        assert_401(c.get("/api/v1/nodes", headers={"Authorization": "Basic Zm9vOmJhcg=="}))
        assert c.get("/api/v1/nodes", token="good").status == 200
        assert c.get("/api/v1/nodes", token="second").status == 200
        assert c.get("/api/v1/nodes", headers={"Authorization": "bearer good"}).status == 200
        # health and version answer without credentials
        assert c.get("/healthz").status == 200 and c.get("/version").status == 200
        # a 401 does not break keep-alive: same connection answers the next request
        conn_before = c.conn
        assert c.get("/api/v1/nodes", token="bad").status == 401
        assert c.get("/api/v1/nodes", token="good").status == 200 and c.conn is conn_before
        # auth is checked before routing (401, not 404)
        assert_401(c.get("/api/v1/nothing-here"))
        users = [r["user"] for r in sim.requests()]
        assert "token:good..." in users and None in users
    finally:
        sim.stop()


def test_token_rotation_at_runtime():
    sim = apisim.APISim(tokens=["old"]).start()
    try:
        c = apisim.Client(sim.url, token="old")
        assert c.get("/api/v1/pods").status == 200
        # expire: 401 from now on, also on an open keep-alive connection
        sim.expire_token("old")
        assert_401(c.get("/api/v1/pods"))
        sim.add_token("new")
        assert c.get("/api/v1/pods", token="new").status == 200
        assert_401(c.get("/api/v1/pods", token="old"))
        # the same through the control endpoint
        ctl = apisim.Client(sim.url)
        r = ctl.post("/_sim/faults", {"op": "rotate_token", "old": "new", "new": "newer"})
        assert r.status == 200 and r.json["ok"], r
        assert_401(c.get("/api/v1/pods", token="new"))
        assert c.get("/api/v1/pods", token="newer").status == 200
        ctl.post("/_sim/faults", [{"op": "expire_token", "token": "newer"}, {"op": "add_token", "token": "t4"}])
        assert_401(c.get("/api/v1/pods", token="newer"))
        assert c.get("/api/v1/pods", token="t4").status == 200
        # expiring every token keeps authentication required
        sim.expire_token("t4")
        assert_401(c.get("/api/v1/pods", token="t4"))
        assert_401(c.get("/api/v1/pods", token=""))
        # an open watch keeps going (auth is per request); its reconnect is refused
        sim.add_token("w")
        w = apisim.Client(sim.url, token="w").watch("/api/v1/pods", resourceVersion="0", timeoutSeconds="5")
        assert w.status == 200
        sim.expire_token("w")
        sim.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, ns="d")
        assert w.next(3)["type"] == "ADDED"
        w.close()
        w2 = apisim.Client(sim.url, token="w").watch("/api/v1/pods", resourceVersion="0")
        assert w2.status == 401
        w2.close()
    finally:
        sim.stop()


def test_https_with_token():
    sim = apisim.APISim(tokens=["tls-token"], tls_cert=PKI["server_cert"], tls_key=PKI["server_key"]).start()
    try:
        assert sim.url.startswith("https://127.0.0.1:")
        c = apisim.Client(sim.url, token="tls-token", ca=PKI["ca"])  # verifies the chain and the 127.0.0.1 SAN
        assert c.get("/api/v1/nodes").status == 200
        assert_401(c.get("/api/v1/nodes", token="nope"))
        w = c.watch("/api/v1/nodes", resourceVersion="0", allowWatchBookmarks="true", timeoutSeconds="5")
        sim.upsert({"kind": "Node", "metadata": {"name": "n"}})
        ev = w.next(3)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "n"
        w.close()
        # a client that trusts another CA refuses the server
        bad = apisim.Client(sim.url, token="tls-token", ca=PKI["rogue_ca"])
        try:
            bad.get("/api/v1/nodes")
        except ssl.SSLError as e:
            assert "CERTIFICATE_VERIFY_FAILED" in str(e)
        else:
            raise AssertionError("server cert should not verify against the rogue CA")
        # plain HTTP to the TLS port gets nowhere
        s = socket.create_connection((sim.host, sim.port))
        s.sendall(b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(3)
        try:
            data = s.recv(100)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(b"HTTP/1.1 200")
        s.close()
    finally:
        sim.stop()


def test_client_certificates():
    sim = apisim.APISim(tokens=["tok"], tls_cert=PKI["server_cert"], tls_key=PKI["server_key"],
                        client_ca=PKI["ca"]).start()
    try:
        c = apisim.Client(sim.url, ca=PKI["ca"], cert=PKI["client_cert"], key=PKI["client_key"])
        r = c.get("/api/v1/nodes")
        assert r.status == 200, r
        assert sim.requests()[-1]["user"] == "cert:gqa-client"
        # no certificate: a token still works, nothing at all is 401
        assert apisim.Client(sim.url, token="tok", ca=PKI["ca"]).get("/api/v1/nodes").status == 200
        assert_401(apisim.Client(sim.url, ca=PKI["ca"]).get("/api/v1/nodes"))
        # a certificate from another CA is rejected in the TLS handshake
        n_err = len(sim.tls_errors)
        rogue = apisim.Client(sim.url, ca=PKI["ca"], cert=PKI["rogue_client_cert"], key=PKI["rogue_client_key"])
        try:
            r = rogue.get("/api/v1/nodes")
        except (ssl.SSLError, ConnectionError, OSError):
            pass
        else:
            raise AssertionError("rogue client cert accepted: %r" % r)
        deadline = time.time() + 10
        while len(sim.tls_errors) == n_err and time.time() < deadline:
            time.sleep(0.02)
        assert len(sim.tls_errors) > n_err and "certificate" in sim.tls_errors[-1].lower(), sim.tls_errors
    finally:
        sim.stop()


def test_client_certificate_required():
    sim = apisim.APISim(tls_cert=PKI["server_cert"], tls_key=PKI["server_key"], client_ca=PKI["ca"],
                        require_client_cert=True).start()
    try:
        assert apisim.Client(sim.url, ca=PKI["ca"], cert=PKI["client_cert"], key=PKI["client_key"]).get(
            "/api/v1/pods").status == 200
        try:
            r = apisim.Client(sim.url, ca=PKI["ca"]).get("/api/v1/pods")
        except (ssl.SSLError, ConnectionError, OSError):
            pass
        else:
            raise AssertionError("request without client cert accepted: %r" % r)
    finally:
        sim.stop()
    # client CA without tokens: only certificates authenticate
    sim = apisim.APISim(tls_cert=PKI["server_cert"], tls_key=PKI["server_key"], client_ca=PKI["ca"]).start()
    try:
        assert_401(apisim.Client(sim.url, ca=PKI["ca"], token="anything").get("/api/v1/pods"))
        assert_401(apisim.Client(sim.url, ca=PKI["ca"]).get("/api/v1/pods"))
    finally:
        sim.stop()


def test_anonymous_when_no_auth_configured():
    sim = apisim.APISim().start()
    try:
        c = apisim.Client(sim.url)
        assert c.get("/api/v1/pods").status == 200
        assert_401(c.get("/api/v1/pods", token="unknown"))  # a bad token is still refused
        sim.add_token("now-required")
        assert_401(c.get("/api/v1/pods"))
        assert c.get("/api/v1/pods", token="now-required").status == 200
    finally:
        sim.stop()


if __name__ == "__main__":
    args = apisim.test_args()
    apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only,
                     cleanup=[PKI_DIR])
