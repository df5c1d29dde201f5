#!/usr/bin/env python3
"""apisim as a subprocess: command line, HTTPS, state file, kubeconfig, control port, down at start, SIGTERM."""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, HERE)
import apisim  # noqa: E402

SCRIPT = os.path.join(HERE, "apisim.py")
TMP = tempfile.mkdtemp(prefix="apisim-cli-")


def spawn(*args):
    p = subprocess.Popen([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    lines = {}
    deadline = time.time() + 10
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            raise AssertionError("apisim exited: %s" % p.stderr.read())
        if line.startswith("apisim: listening on "):
            lines["url"] = line.split()[3]
        if line.startswith("apisim: control on "):
            lines["control"] = line.split()[3]
        if "url" in lines and ("--control-port" not in args or "control" in lines):
            return p, lines
    raise AssertionError("apisim did not start")


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(5)
    finally:
        if p.poll() is None:
            p.kill()
        p.stdout.close()
        p.stderr.close()


def test_gen_pki_and_https_subprocess():
    out = subprocess.run([sys.executable, SCRIPT, "--gen-pki", os.path.join(TMP, "pki")], check=True,
                         capture_output=True, text=True).stdout
    pki = json.loads(out)
    for k in ("ca", "server_cert", "server_key", "client_cert", "client_key"):
        assert os.path.exists(pki[k]), k
    state = os.path.join(TMP, "state.json")
    with open(state, "w") as f:
        json.dump({"kind": "List", "items": [{"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n0"}}]}, f)
    kc = os.path.join(TMP, "kubeconfig")
    portfile = os.path.join(TMP, "port")
    p, info = spawn("--port", "0", "--tls-cert", pki["server_cert"], "--tls-key", pki["server_key"],
                    "--client-ca", pki["ca"], "--token", "tok1", "--token", "tok2", "--state", state,
                    "--port-file", portfile, "--kubeconfig-out", kc, "--kubeconfig-ca", pki["ca"],
                    "--bookmark-interval", "0.2")
    try:
        url = info["url"]
        assert url.startswith("https://127.0.0.1:")
        assert int(open(portfile).read()) == int(url.rsplit(":", 1)[1])
        cfg = json.load(open(kc))
        assert cfg["clusters"][0]["cluster"]["server"] == url
        assert cfg["clusters"][0]["cluster"]["certificate-authority"] == pki["ca"]
        assert cfg["users"][0]["user"]["token"] == "tok1" and cfg["current-context"] == "apisim"
        c = apisim.Client(url, token="tok2", ca=pki["ca"])
        assert [n["metadata"]["name"] for n in c.get("/api/v1/nodes").json["items"]] == ["n0"]
        assert apisim.Client(url, ca=pki["ca"], cert=pki["client_cert"], key=pki["client_key"]).get(
            "/api/v1/nodes").status == 200
        assert apisim.Client(url, token="nope", ca=pki["ca"]).get("/api/v1/nodes").status == 401
        w = c.watch("/api/v1/nodes", resourceVersion="0", allowWatchBookmarks="true", timeoutSeconds="5")
        assert [e["type"] for e in w.events(2, 3)] == ["ADDED", "BOOKMARK"]
        # faults over the control endpoint of the main port
        ctl = apisim.Client(url, ca=pki["ca"])
        assert ctl.post("/_sim/faults", {"op": "fail", "status": 500, "count": 1}).status == 200
        assert c.get("/api/v1/pods").status == 500 and c.get("/api/v1/pods").status == 200
        assert ctl.post("/_sim/faults", {"op": "drop_watches"}).status == 200
        # The watch ends with an error; a periodic BOOKMARK may still come first.
        ev = w.next(3)
        while ev is not None:
            assert ev["type"] == "BOOKMARK", ev
            ev = w.next(3)
        assert w.ended == "error", w.ended
        log = ctl.get("/_sim/requests").json["items"]
        assert [x["status"] for x in log if x["path"] == "/api/v1/pods"] == [500, 200]
    finally:
        t0 = time.time()
        rc = stop(p)
    assert rc == 0 and time.time() - t0 < 3, rc


def test_down_at_start_with_control_port():
    p, info = spawn("--port", "0", "--token", "t", "--control-port", "0", "--down-at-start", "-1")
    try:
        url, ctl_url = info["url"], info["control"]
        assert url != ctl_url
        try:
            apisim.Client(url, token="t").get("/healthz")
        except ConnectionRefusedError:
            pass
        else:
            raise AssertionError("API should be down at start")
        ctl = apisim.Client(ctl_url)
        assert ctl.get("/_sim/state").json["up"] is False
        assert ctl.get("/api/v1/nodes").status == 404  # the control port serves /_sim/ only
        assert ctl.post("/_sim/faults", {"op": "up"}).status == 200
        c = apisim.Client(url, token="t")
        assert c.get("/api/v1/nodes").status == 200
        # indefinite down and back through the control port
        assert ctl.post("/_sim/faults", {"op": "down"}).status == 200
        def refused():
            try:
                apisim.Client(url, token="t").get("/healthz")
            except ConnectionRefusedError:
                return True
            except (OSError, http.client.HTTPException):
                pass  # a connection the listener accepted while it was closing
            return False
        deadline = time.monotonic() + 5
        while not refused():
            assert time.monotonic() < deadline, "API should be down"
            time.sleep(0.05)
        ctl.post("/_sim/faults", {"op": "up"})
        assert apisim.Client(url, token="t").get("/healthz").status == 200
    finally:
        assert stop(p) == 0


def test_bad_command_lines():
    r = subprocess.run([sys.executable, SCRIPT, "--client-ca", "/nonexistent"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode != 0
    r = subprocess.run([sys.executable, SCRIPT, "--state", "/nonexistent.json"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode != 0


if __name__ == "__main__":
    args = apisim.test_args()
    try:
        apisim.run_tests([v for k, v in list(globals().items()) if k.startswith("test_") and callable(v)], args.only,
                         cleanup=[TMP])
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
