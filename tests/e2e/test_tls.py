#!/usr/bin/env python3
"""HTTPS (--listen-https, --tls-cert, --tls-key) and mutual TLS (--tls-client-ca):
requests work over TLS 1.2 and 1.3, TLS 1.1 is refused (checked against a
control server that does speak 1.1, so the refusal is the extender's), a client
certificate from the right CA is let in, none or one from another CA is not.
TLS material is made with the openssl CLI."""

import os
import socket
import ssl
import sys
import threading
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)
suite = g.Suite("test_tls")
TLS = {}


def tls(s):
    if "m" not in TLS:
        TLS["m"] = g.TLSMaterial(s.tempdir("tls"))
    return TLS["m"]


def https(srv, method, path, ctx, body=None):
    return g.http_request("127.0.0.1", srv.https_port, method, path, body, tls_context=ctx)


def handshake(port, ctx):
    """Handshake only; returns the negotiated version or raises."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as ss:
            return ss.version()


def tls11_context(m, **kw):
    ctx = m.client_context(min_version=ssl.TLSVersion.TLSv1_1, max_version=ssl.TLSVersion.TLSv1_1, **kw)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    return ctx


def control_tls11(m):
    """Can this Python/OpenSSL speak TLS 1.1 at all? A local server that allows it answers."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(m.server_cert, m.server_key)
    sctx.minimum_version = ssl.TLSVersion.TLSv1_1
    sctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]

    def serve():
        try:
            c, _ = ls.accept()
            c.settimeout(10)
            with sctx.wrap_socket(c, server_side=True):
                pass
        except (OSError, ssl.SSLError):
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        return handshake(port, tls11_context(m))
    except (OSError, ssl.SSLError):
        return None
    finally:
        t.join(10)
        ls.close()


@suite.test
def https_works(s):
    m = tls(s)
    with g.Server(s, https=True, tls=m) as srv:
        ctx = m.client_context()
        r = https(srv, "GET", "/healthz", ctx)
        s.check_eq((r.status, r.text.strip()), (200, "ok"), "GET /healthz over HTTPS")
        r = https(srv, "GET", "/version", ctx)
        s.check_eq(r.status, 200, "GET /version over HTTPS")
        args = {"Pod": g.demo_pod("gpu-4"), "NodeNames": g.DEMO_ARGS_ORDER}
        r = https(srv, "POST", "/scheduler/filter", ctx, args)
        s.check_eq(r.status, 200, "POST /scheduler/filter over HTTPS")
        s.check_eq(r.json().get("NodeNames"), ["gpu-v100-0"], "the filter answer over HTTPS")
        r2 = srv.post("/scheduler/filter", args)
        s.check_eq(r2.json(), r.json(), "HTTP and HTTPS listeners share one state (re-filter answers the same)")
        r = https(srv, "GET", "/inspect/nodes/nope", ctx)
        s.check_eq(r.status, 404, "404 over HTTPS")
        # A large body over TLS (many records).
        big = {"Pod": g.demo_pod("gpu-4"), "NodeNames": ["gpu-v100-0"] + ["n-%05d" % i for i in range(30000)]}
        r = https(srv, "POST", "/scheduler/prioritize", ctx, big)
        s.check_eq(r.status, 200, "a 0.3 MB prioritize over HTTPS")
        # Relative scores: the unknown nodes score 0, the lowest, and are left out.
        s.check_eq([h.get("Host") for h in r.json()], ["gpu-v100-0"], "the one node above the lowest, over HTTPS")
        # And a large answer over TLS: every unknown node fails by name.
        r = https(srv, "POST", "/scheduler/filter", ctx, big)
        s.check_eq(r.status, 200, "a 0.3 MB filter over HTTPS")
        res = r.json()
        failed = dict(res.get("FailedNodes") or {}, **(res.get("FailedAndUnresolvableNodes") or {}))
        s.check_eq(len(failed), 30000, "every unknown node failed by name over HTTPS")
        # The Nodes form answers with spans of the request body (an iovec
        # response): over TLS too, each kept item comes back byte for byte.
        items = ['{"metadata": {"name": "%s", "labels": {"k": "v%d"}}, "status": {"pad": "%s"}}'
                 % (n, i, "x" * 100000) for i, n in enumerate(g.DEMO_ARGS_ORDER)]
        body = '{"Pod": %s, "Nodes": {"items": [%s]}}' % (g.json.dumps(g.demo_pod("gpu-4")), ", ".join(items))
        r = https(srv, "POST", "/scheduler/filter", ctx, body.encode())
        kept = [it for it in items if '"gpu-v100-0"' in it]
        s.check_eq(r.status, 200, "a Nodes-form filter over HTTPS")
        s.check_in('"items":[%s]}' % ", ".join(kept), r.text, "every kept item over HTTPS is the request's bytes")

        # The server certificate is the one given, valid for 127.0.0.1 (SAN).
        with socket.create_connection(("127.0.0.1", srv.https_port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as ss:
                cert = ss.getpeercert()
        s.check(("IP Address", "127.0.0.1") in cert.get("subjectAltName", ()), "server cert SAN has 127.0.0.1", cert)
        s.check(("DNS", "localhost") in cert.get("subjectAltName", ()), "server cert SAN has localhost", cert)

        for ver in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            c = m.client_context(min_version=ver, max_version=ver)
            try:
                got = handshake(srv.https_port, c)
                r = https(srv, "GET", "/readyz", c)
                ok = r.status == 200
            except (OSError, ssl.SSLError) as e:
                got, ok = repr(e), False
            s.check(ok and got == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[ver],
                    "%s accepted" % ver.name, got)

        spoken = control_tls11(m)
        s.check_eq(spoken, "TLSv1.1", "control: this client can speak TLS 1.1 to a server that allows it")
        for label, ver_min, ver_max in (("TLS 1.1", ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_1),
                                        ("TLS 1.0", ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1)):
            c = m.client_context(min_version=ver_min, max_version=ver_max)
            c.set_ciphers("DEFAULT:@SECLEVEL=0")
            try:
                got = handshake(srv.https_port, c)
            except (OSError, ssl.SSLError) as e:
                got = None
                why = repr(e)
            s.check(got is None, "%s refused by the extender" % label, got or why)

        # Plain HTTP spoken to the HTTPS port gets no HTTP answer.
        try:
            r = g.raw_exchange(srv.https_port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", timeout=5)
            plain_ok = r.status == 200
        except (OSError, IOError, ValueError):
            plain_ok = False
        s.check(not plain_ok, "plain HTTP on the HTTPS port is not served")
        s.check_eq(https(srv, "GET", "/healthz", ctx).status, 200, "HTTPS still healthy afterwards")


@suite.test
def https_only(s):
    m = tls(s)
    with g.Server(s, https=True, tls=m, http=False) as srv:
        r = https(srv, "GET", "/inspect/nodes", m.client_context())
        s.check_eq(r.status, 200, "HTTPS-only server (--listen-http \"\") answers")
        s.check_eq(len(r.json()), 4, "with the demo nodes")


def mtls_request(srv, m, version, which):
    kw = {}
    if which == "right CA":
        kw = dict(with_cert=True)
    elif which == "other CA":
        kw = dict(cert=m.rogue_cert, key=m.rogue_key)
    ctx = m.client_context(min_version=version, max_version=version, **kw)
    try:
        return https(srv, "POST", "/scheduler/filter", ctx, {"Pod": g.demo_pod("gpu-4"), "NodeNames": ["gpu-v100-0"]})
    except (OSError, ssl.SSLError, ConnectionError) as e:
        return e


@suite.test
def mutual_tls(s):
    m = tls(s)
    with g.Server(s, https=True, tls=m, client_ca=True) as srv:
        n403 = 0
        for ver in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            r = mtls_request(srv, m, ver, "right CA")
            s.check(isinstance(r, g.Response) and r.status == 200, "%s, client cert from the CA: 200" % ver.name, r)
            if isinstance(r, g.Response) and r.status == 200:
                s.check_eq(r.json().get("NodeNames"), ["gpu-v100-0"], "%s mTLS filter answer" % ver.name)
            for which in ("no cert", "other CA"):
                r = mtls_request(srv, m, ver, which)
                if isinstance(r, g.Response):
                    ok = r.status == 403
                    n403 += ok
                    if ok:
                        try:
                            ok = isinstance(r.json().get("error"), str)
                        except ValueError:
                            ok = False
                    s.check(ok, "%s, %s: rejected with 403 JSON" % (ver.name, which), r)
                else:
                    s.check(True, "%s, %s: rejected in the handshake (%s)" % (ver.name, which, r.__class__.__name__))
        # Rejections leave the server healthy, and the plain listener is unaffected.
        r = mtls_request(srv, m, ssl.TLSVersion.TLSv1_3, "right CA")
        s.check(isinstance(r, g.Response) and r.status == 200, "mTLS still works after rejections", r)
        s.check_eq(srv.get("/healthz").status, 200, "plain HTTP listener needs no client cert")
        # Rejected requests never reached the filter: nothing was recorded for gpu-4.
        held = [gp for gp in srv.inspect("gpu-v100-0")["gpus"] if "default/gpu-4" in gp["pods"]]
        s.check_eq(len(held), 4, "only the accepted mTLS filters decided (gpu-4 holds 4 GPUs, once)")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        counted = sum(v for (name, lbl), v in samples.items()
                      if name == "gqa_http_requests_total" and dict(lbl).get("code") == "403")
        s.check(counted >= n403, "403 answers are counted in the metrics", (counted, n403))


@suite.test
def bad_tls_setup(s):
    m = tls(s)
    port = g.free_port()
    r = g.run_binary(s, ["--state-file", s.demo_state, "--listen-http", "", "--listen-https", "127.0.0.1:%d" % port,
                         "--tls-cert", os.path.join(m.dir, "missing.crt"), "--tls-key", m.server_key], timeout=30)
    s.check(r.code not in (0, None), "a missing --tls-cert file stops the server", r)
    s.check_in("missing.crt", r.err, "the message names the file")
    r = g.run_binary(s, ["--state-file", s.demo_state, "--listen-http", "", "--listen-https", "127.0.0.1:%d" % port,
                         "--tls-cert", m.server_cert, "--tls-key", m.ca_cert], timeout=30)
    s.check(r.code not in (0, None), "a --tls-key that is not a key stops the server", r)
    r = g.run_binary(s, ["--state-file", s.demo_state, "--listen-http", "127.0.0.1:%d" % port, "--listen-https",
                         "127.0.0.1:%d" % port, "--tls-cert", m.server_cert, "--tls-key", m.server_key], timeout=20)
    s.check(r.code not in (0, None), "HTTP and HTTPS on one port: the second listener fails to start", r)
    s.check_in("with TLS", r.err, "the message names the HTTPS listener")
    r = g.run_binary(s, ["--state-file", s.demo_state, "--listen-https", "127.0.0.1:%d" % port])
    s.check_eq(r.code, 2, "--listen-https without --tls-cert/--tls-key: exit 2")
    s.check_in("--tls-cert", r.err, "the message names --tls-cert")
    r = g.run_binary(s, ["--state-file", s.demo_state, "--tls-client-ca", m.ca_cert])
    s.check_eq(r.code, 2, "--tls-client-ca without --listen-https: exit 2")
    s.check_in("--tls-client-ca", r.err, "the message names --tls-client-ca")


if __name__ == "__main__":
    suite.main()
