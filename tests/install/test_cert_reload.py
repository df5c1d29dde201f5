#!/usr/bin/env python3
"""The service picks up a replaced webhook certificate without restarting.

The Secret volume is updated by the kubelet the way it always does it: the
files are symlinks through `..data` to a timestamped directory, and an update
writes a new directory and swaps `..data` atomically. The test mounts
scripts/gen-certs.sh's output that way, starts the real server with
--tls-cert/--tls-key pointing at the symlinks, swaps in a new certificate and
waits (up to RELOAD_WAIT_S) for the server to serve it, same process, and
verifying against the CA for the Service's DNS name. A replacement with a
broken key must not take the listener down (the old certificate stays), and
plain in-place file rewrites are picked up too."""

import os
import socket
import ssl
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import install_common as ic  # noqa: E402

suite = ic.Suite("test_cert_reload")
NAME = "gpu-quota-admission-webhook.kube-system.svc"
RELOAD_WAIT_S = 30


def gen(s, out, *args):
    r = ic.run(["bash", s.path("scripts", "gen-certs.sh"), "--out", out, "--control-plane-cidr", "10.0.0.0/24"] + list(args))
    s.require(r.returncode == 0, "gen-certs.sh --out %s" % os.path.basename(out), r.stderr)


def served(port, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=NAME) as tls:
            return tls.getpeercert(binary_form=True)


def der(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


class KubeletVolume:
    """A directory laid out like a Secret volume: KEY -> ..data/KEY, ..data -> ..<ts>."""

    def __init__(self, root):
        self.root = root
        self.n = 0

    def publish(self, files):
        self.n += 1
        ts = os.path.join(self.root, "..2024_01_01_00_00_%02d.%d" % (self.n, os.getpid()))
        os.makedirs(ts)
        for name, content in files.items():
            with open(os.path.join(ts, name), "wb") as f:
                f.write(content)
        tmp = os.path.join(self.root, "..data_tmp")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.basename(ts), tmp)
        os.rename(tmp, os.path.join(self.root, "..data"))
        for name in files:
            link = os.path.join(self.root, name)
            if not os.path.lexists(link):
                os.symlink(os.path.join("..data", name), link)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def wait_for(port, cafile, want, seconds):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = served(port, cafile)
            if last == want:
                return True
        except (ssl.SSLError, OSError):
            pass
        time.sleep(0.5)
    return False


@suite.test
def symlink_swap_is_picked_up(s):
    a, b = s.tempdir("a"), s.tempdir("b")
    gen(s, a)
    gen(s, b)   # a different CA: the served chain must really change
    vol = KubeletVolume(s.tempdir("volume"))
    vol.publish({"tls.crt": read(os.path.join(a, "tls.crt")), "tls.key": read(os.path.join(a, "tls.key"))})
    with ic.Server(s, https_cert=os.path.join(vol.root, "tls.crt"), https_key=os.path.join(vol.root, "tls.key")) as srv:
        s.require(served(srv.https_port, os.path.join(a, "ca.crt")) == der(os.path.join(a, "tls.crt")),
                  "serves the first certificate")
        pid = srv.proc.pid
        vol.publish({"tls.crt": read(os.path.join(b, "tls.crt")), "tls.key": read(os.path.join(b, "tls.key"))})
        t0 = time.monotonic()
        ok = wait_for(srv.https_port, os.path.join(b, "ca.crt"), der(os.path.join(b, "tls.crt")), RELOAD_WAIT_S)
        s.check(ok, "serves the replaced certificate within %d s, verified against its CA" % RELOAD_WAIT_S)
        if ok:
            print("  reloaded after %.1f s" % (time.monotonic() - t0))
        s.check(srv.proc.poll() is None and srv.proc.pid == pid, "without restarting")
        status, _ = srv.call("GET", "/healthz")
        s.check_eq(status, 200, "the plain listener kept serving")

        # A broken replacement (key of another certificate) keeps the current one.
        vol.publish({"tls.crt": read(os.path.join(a, "tls.crt")), "tls.key": read(os.path.join(b, "tls.key"))})

        def refused():
            """A handshake makes the service look at the files; has it refused the pair?"""
            try:
                served(srv.https_port, os.path.join(b, "ca.crt"))
            except (ssl.SSLError, OSError):
                pass
            return "TLS certificate not reloaded" in srv.stderr()
        s.check(ic.wait_until(refused, RELOAD_WAIT_S, interval=0.2),
                "the broken pair is seen and refused within %d s (logged)" % RELOAD_WAIT_S, srv.stderr()[-2000:])
        try:
            got = served(srv.https_port, os.path.join(b, "ca.crt"))
            s.check_eq(got, der(os.path.join(b, "tls.crt")), "a mismatched key/certificate pair is not loaded")
        except (ssl.SSLError, OSError) as e:
            s.check(False, "the HTTPS listener survives a broken replacement", str(e))
        s.check(srv.proc.poll() is None, "the process survives a broken replacement")


@suite.test
def in_place_rewrite_is_picked_up(s):
    a = s.tempdir("c")
    gen(s, a)
    files = s.tempdir("files")
    for f in ("tls.crt", "tls.key"):
        with open(os.path.join(files, f), "wb") as fh:
            fh.write(read(os.path.join(a, f)))
    with ic.Server(s, https_cert=os.path.join(files, "tls.crt"), https_key=os.path.join(files, "tls.key")) as srv:
        s.require(served(srv.https_port, os.path.join(a, "ca.crt")) == der(os.path.join(a, "tls.crt")), "serves it")
        gen(s, a)   # same CA, new serving certificate
        for f in ("tls.key", "tls.crt"):
            tmp = os.path.join(files, f + ".tmp")
            with open(tmp, "wb") as fh:
                fh.write(read(os.path.join(a, f)))
            os.rename(tmp, os.path.join(files, f))
        ok = wait_for(srv.https_port, os.path.join(a, "ca.crt"), der(os.path.join(a, "tls.crt")), RELOAD_WAIT_S)
        s.check(ok, "serves the rewritten certificate within %d s" % RELOAD_WAIT_S)


if __name__ == "__main__":
    sys.exit(suite.main())
