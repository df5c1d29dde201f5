#!/usr/bin/env python3
"""The HTTPS listener picks up a replaced certificate without a restart: a new
connection after the files change is served the new certificate; a key that
does not belong to the certificate keeps the previous one in service; the
process never restarts (same PID, requests keep working)."""

import os
import shutil
import socket
import ssl
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_tls_reload")


def served_certificate(port, ctx):
    """DER bytes of the certificate the server presents on a new connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as ss:
            return ss.getpeercert(binary_form=True)


def der_of(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def replace(src, dst):
    """Write dst as a new file (as cert-manager and kubelet do: write, then rename).

    The service tells a changed file by (device, inode, size, mtime). The new
    file is written while dst still exists, so its inode differs; its mtime is
    also set one second past dst's, so the change is seen without waiting for
    the clock (no sleep)."""
    tmp = dst + ".tmp"
    shutil.copyfile(src, tmp)
    if os.path.exists(dst):
        old = os.stat(dst).st_mtime_ns
        os.utime(tmp, ns=(old + 1_000_000_000, old + 1_000_000_000))
    os.replace(tmp, dst)


@suite.test
def replaced_certificate_is_served(s):
    m = g.TLSMaterial(s.tempdir("tls"))
    second = g.TLSMaterial(s.tempdir("tls2"))   # another CA and server pair
    live = s.tempdir("live")
    cert, key = os.path.join(live, "tls.crt"), os.path.join(live, "tls.key")
    replace(m.server_cert, cert)
    replace(m.server_key, key)
    ctx_first = m.client_context()
    ctx_second = second.client_context()
    tls = type("T", (), {"server_cert": cert, "server_key": key, "ca_cert": m.ca_cert})
    with g.Server(s, https=True, tls=tls) as srv:
        pid = srv.proc.pid
        s.check_eq(served_certificate(srv.https_port, ctx_first), der_of(m.server_cert),
                   "the first certificate is served")
        replace(second.server_cert, cert)
        replace(second.server_key, key)
        s.check_eq(served_certificate(srv.https_port, ctx_second), der_of(second.server_cert),
                   "after the files change, a new connection gets the new certificate")
        r = g.http_request("127.0.0.1", srv.https_port, "GET", "/healthz", tls_context=ctx_second)
        s.check_eq(r.status, 200, "requests work with the new certificate")
        # A half-written rotation: the old key with the new certificate.
        replace(m.server_key, key)
        s.check_eq(served_certificate(srv.https_port, ctx_second), der_of(second.server_cert),
                   "a key that does not match keeps the previous pair in service")
        s.check_in("TLS certificate not reloaded", srv.stderr(), "the mismatch is logged")
        replace(second.server_key, key)
        s.check_eq(served_certificate(srv.https_port, ctx_second), der_of(second.server_cert),
                   "the matching pair is served again")
        s.check_eq(srv.proc.pid, pid, "no restart: same process")
        s.check(srv.proc.poll() is None, "the server is still running")


if __name__ == "__main__":
    suite.main()
