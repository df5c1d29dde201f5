#!/usr/bin/env python3
"""TLS like Kubernetes components (issue 10, item 5).

TLS 1.3 is preferred; TLS 1.2 offers only ECDHE key exchange with AEAD
ciphers (no AES-CBC, no static RSA, no DHE); --tls-min-version and
--tls-cipher-suites take kube-apiserver's names; with --tls-client-ca the
client certificate must carry the clientAuth extended key usage (the
serverAuth-only serving certificate, or a certificate without the
extension, is refused with a 403 that says why).

Each refusal is checked against a control server (Python's own TLS server,
set to allow the suite) so that it is the extender that refuses, not this
client. The server certificate is RSA here, so static-RSA and DHE suites
would be possible if they were offered (finite-field DHE is left to the unit
test: this client's control server has no DH parameters). TLS material: the
openssl CLI."""

import os
import socket
import ssl
import sys
import threading
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)
suite = g.Suite("test_tls_policy")
TLS = {}


class Material(g.TLSMaterial):
    """The e2e CA and client certificates, an RSA serving certificate, and
    two certificates that must not pass as clients: one without any
    extended key usage, and the (serverAuth-only) serving certificate."""

    def _generate(self):
        super()._generate()
        p = lambda n: os.path.join(self.dir, n)  # noqa: E731
        self.ec_server_key, self.ec_server_cert = self.server_key, self.server_cert
        self.server_key, self.server_cert = p("rsa-server.key"), p("rsa-server.crt")
        self._ossl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", self.server_key)
        csr, ext = self.server_cert + ".csr", self.server_cert + ".ext"
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
        self._ossl("req", "-new", "-key", self.server_key, "-subj", "/CN=gpu-quota-admission", "-out", csr)
        self._ossl("x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key, "-CAcreateserial",
                   "-days", "2", "-sha256", "-extfile", ext, "-out", self.server_cert)
        self.noeku_key, self.noeku_cert = p("noeku.key"), p("noeku.crt")
        self._leaf(self.noeku_key, self.noeku_cert, "kube-scheduler", self.ca_key, self.ca_cert,
                   ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature"])


def material(s):
    if "m" not in TLS:
        TLS["m"] = Material(s.tempdir("tls"))
    return TLS["m"]


def handshake(port, ctx):
    """(version, cipher name) of a completed handshake, or the error."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as ss:
                return ss.version(), ss.cipher()[0]
    except (OSError, ssl.SSLError) as e:
        return e


def tls12(m, ciphers):
    ctx = m.client_context(min_version=ssl.TLSVersion.TLSv1_2, max_version=ssl.TLSVersion.TLSv1_2)
    ctx.set_ciphers(ciphers + ":@SECLEVEL=0")
    return ctx


def control_accepts(m, ciphers):
    """Does a server that allows `ciphers` complete a TLS 1.2 handshake with
    this client? (Proves the client can offer them.)"""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(m.server_cert, m.server_key)
    sctx.set_ciphers(ciphers + ":@SECLEVEL=0")
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)

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
        return not isinstance(handshake(ls.getsockname()[1], tls12(m, ciphers)), Exception)
    finally:
        t.join(10)
        ls.close()


# OpenSSL names of TLS 1.2 suites that must not be negotiated, and why.
REFUSED = [
    ("ECDHE-RSA-AES128-SHA", "AES-CBC with SHA-1"),
    ("ECDHE-RSA-AES256-SHA384", "AES-CBC with SHA-384"),
    ("AES128-GCM-SHA256", "static RSA key exchange (not forward secret)"),
    ("AES256-SHA", "static RSA with AES-CBC"),
]
ACCEPTED = ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"]


@suite.test
def tls12_offers_only_ecdhe_aead(s):
    m = material(s)
    with g.Server(s, https=True, tls=m) as srv:
        for name in ACCEPTED:
            got = handshake(srv.https_port, tls12(m, name))
            s.check_eq(got, ("TLSv1.2", name), "TLS 1.2 %s is accepted" % name)
        for name, why in REFUSED:
            s.check(control_accepts(m, name), "control: this client can negotiate %s" % name)
            got = handshake(srv.https_port, tls12(m, name))
            s.check(isinstance(got, Exception), "TLS 1.2 %s (%s) is refused" % (name, why), got)
        got = handshake(srv.https_port, m.client_context())
        s.check(not isinstance(got, Exception) and got[0] == "TLSv1.3", "a default client gets TLS 1.3", got)
        both = m.client_context(min_version=ssl.TLSVersion.TLSv1_2)
        both.set_ciphers("ECDHE-RSA-AES128-GCM-SHA256")
        got = handshake(srv.https_port, both)
        s.check(not isinstance(got, Exception) and got[0] == "TLSv1.3", "TLS 1.3 is preferred over 1.2", got)


@suite.test
def min_version_and_suites_flags(s):
    m = material(s)
    with g.Server(s, https=True, tls=m, flags=["--tls-min-version", "VersionTLS13"]) as srv:
        got = handshake(srv.https_port, tls12(m, "ECDHE-RSA-AES128-GCM-SHA256"))
        s.check(isinstance(got, Exception), "--tls-min-version VersionTLS13: TLS 1.2 is refused", got)
        got = handshake(srv.https_port, m.client_context())
        s.check(not isinstance(got, Exception) and got[0] == "TLSv1.3", "--tls-min-version VersionTLS13: 1.3 works")
    flags = ["--tls-min-version", "VersionTLS12", "--tls-cipher-suites",
             "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]
    with g.Server(s, https=True, tls=m, flags=flags) as srv:
        got = handshake(srv.https_port, tls12(m, "ECDHE-RSA-AES256-GCM-SHA384"))
        s.check_eq(got, ("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384"), "a named suite is offered")
        for name in ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305"):
            got = handshake(srv.https_port, tls12(m, name))
            s.check(isinstance(got, Exception), "a suite not named (%s) is not offered" % name, got)
        r = g.http_request("127.0.0.1", srv.https_port, "GET", "/healthz", tls_context=m.client_context())
        s.check_eq(r.status, 200, "requests work with --tls-cipher-suites")


@suite.test
def bad_tls_flag_values(s):
    m = material(s)
    base = ["--state-file", s.demo_state, "--listen-https", "127.0.0.1:%d" % g.free_port(), "--tls-cert",
            m.server_cert, "--tls-key", m.server_key]
    for flag, value, want in (("--tls-min-version", "VersionTLS11", "--tls-min-version"),
                              ("--tls-min-version", "1.2", "--tls-min-version"),
                              ("--tls-cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA", "is not offered"),
                              ("--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "is not offered"),
                              ("--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,NOPE", "\"NOPE\"")):
        r = g.run_binary(s, base + [flag, value], timeout=20)
        s.check_eq(r.code, 2, "%s %s: exit 2" % (flag, value))
        s.check_in(want, r.err, "%s %s: the message says which and why" % (flag, value))
    r = g.run_binary(s, ["--state-file", s.demo_state, "--tls-min-version", "VersionTLS13"], timeout=20)
    s.check_eq(r.code, 2, "--tls-min-version without --listen-https: exit 2")


def mtls(srv, m, cert, key, version):
    ctx = m.client_context(cert=cert, key=key, min_version=version, max_version=version)
    try:
        return g.http_request("127.0.0.1", srv.https_port, "POST", "/scheduler/filter",
                              {"Pod": g.demo_pod("gpu-4"), "NodeNames": ["gpu-v100-0"]}, tls_context=ctx)
    except (OSError, ssl.SSLError, ConnectionError) as e:
        return e


@suite.test
def client_certificates_need_client_auth(s):
    m = material(s)
    with g.Server(s, https=True, tls=m, client_ca=True) as srv:
        for ver in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            r = mtls(srv, m, m.client_cert, m.client_key, ver)
            s.check(isinstance(r, g.Response) and r.status == 200, "%s: clientAuth certificate: 200" % ver.name, r)
            for what, cert, key in (("the serverAuth-only serving certificate", m.server_cert, m.server_key),
                                    ("the other serving certificate", m.ec_server_cert, m.ec_server_key),
                                    ("a certificate without extended key usage", m.noeku_cert, m.noeku_key)):
                r = mtls(srv, m, cert, key, ver)
                ok = isinstance(r, g.Response) and r.status == 403
                s.check(ok, "%s, %s: 403" % (ver.name, what), r)
                if ok:
                    s.check_in("clientAuth", r.json().get("error"), "%s, %s: the 403 says why" % (ver.name, what))
            r = mtls(srv, m, m.rogue_cert, m.rogue_key, ver)
            refused = isinstance(r, Exception) or r.status == 403
            s.check(refused, "%s: a certificate from another CA is refused" % ver.name, r)
        held = [gp for gp in srv.inspect("gpu-v100-0")["gpus"] if "default/gpu-4" in gp["pods"]]
        s.check_eq(len(held), 4, "only the accepted requests decided")


if __name__ == "__main__":
    suite.main()
