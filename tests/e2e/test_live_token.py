#!/usr/bin/env python3
"""Live mode: a rotated bearer token is picked up (test 5 of the issue).

The kubeconfig names a tokenFile (as for a projected service-account
token); the simulator rotates the token and the file is replaced. The
service must go on working with the new token: pods created after the
rotation show up, decisions are patched, and every request that starts
after the rotation carries the new token (the simulator's request log
records the first characters of the token as the user).

Standalone: python3 test_live_token.py --binary PATH --source-dir REPO
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-token")

SETTLE_S = 15.0
# The request log shows "token:" + the first 4 characters: make them differ.
T1, T2, T3 = "aaaa-first-token", "bbbb-second-token", "cccc-third-token"


def write_token(path, token):
    """Replace the file atomically, as the kubelet does for projected tokens."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)


def users_after(c, t, since=0):
    """(user, status, method, path) of the requests that started after time t."""
    return [(r["user"], r["status"], r["method"], r["path"]) for r in c.sim.requests(since) if r["time"] > t]


def placed(srv, name):
    return any("default/" + name in gp for gpus in srv.pods_on().values() for gp in gpus)


@suite.test
def test_token_rotation(s):
    with g.Cluster(s, tokens=(T1,)) as c:
        token_file = os.path.join(c.dir, "token")
        write_token(token_file, T1)
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        ann = {"tencent.com/predicate-gpu-idx-0": "0", "tencent.com/gpu-assigned": "true"}
        c.create_pod(g.pod("before", g.vcuda(10, 4), annotations=ann), node="n1", phase="Running")
        with g.LiveServer(s, c.kubeconfig(token_file=token_file)) as srv:
            s.check(g.wait_until(lambda: placed(srv, "before"), SETTLE_S), "the service follows the cluster")
            first = [u for u, _st, _m, _p in users_after(c, 0)]
            s.check(first and all(u == "token:aaaa..." for u in first), "it starts with the file's token",
                    sorted(set(map(str, first))))

            # Rotation with overlap: the new token is valid, the file is
            # replaced, then the old token expires.
            c.sim.add_token(T2)
            write_token(token_file, T2)
            # The overlap a kubelet gives: T1 expires only once nothing the
            # service sends uses it. Its watches were authenticated with T1
            # when they started: cut them, and wait (polled, not slept) until
            # all four informers watch again with the new token.
            mark = c.last_seq()
            c.sim.drop_watches()

            def watching_with_t2():
                paths = {r["path"] for r in c.sim.requests(mark) if r["watch"] and r["user"] == "token:bbbb..."}
                return len(paths) >= 4 and c.sim.watch_count() >= 4
            s.require(g.wait_until(watching_with_t2, SETTLE_S), "the informers watch again with the new token",
                      users_after(c, 0, mark))
            c.sim.expire_token(T1)
            t_rot = time.time()
            # And once more after the expiry: they reconnect with the new token.
            c.sim.drop_watches()
            ann = {"tencent.com/predicate-gpu-idx-0": "1", "tencent.com/gpu-assigned": "true"}
            c.create_pod(g.pod("after", g.vcuda(20, 4), annotations=ann), node="n1", phase="Running")
            s.check(g.wait_until(lambda: placed(srv, "after"), SETTLE_S),
                    "a pod created after the rotation shows up in occupancy", srv.pods_on())
            res = srv.filter(c.create_pod(g.pod("pending", g.vcuda(30, 8))), ["n1"])
            s.check_eq(res.get("NodeNames"), ["n1"], "a filter decides after the rotation", res)
            s.check_eq(c.annotations("pending").get("tencent.com/predicate-node"), "n1",
                       "and its patch went through")
            s.check(g.wait_until(lambda: c.sim.watch_count() >= 4, SETTLE_S), "all four watches are back",
                    c.sim.watch_count())
            after = users_after(c, t_rot)
            s.check(after and all(u == "token:bbbb..." for u, _st, _m, _p in after),
                    "every request after the rotation uses the new token", after)
            s.check(not [a for a in after if a[1] == 401], "no request after the rotation got 401", after)
            s.check(any(m == "PATCH" and u == "token:bbbb..." for u, _st, m, _p in after),
                    "the decision patch used the new token", after)

            # The old token expires before the file is replaced (a late
            # kubelet): requests fail with 401 until the file changes, then
            # the service recovers on its own.
            c.sim.add_token(T3)
            c.sim.expire_token(T2)
            c.sim.drop_watches()
            inf = g.wait_until(lambda: "401" in srv.informers()["pods"]["lastError"] and srv.informers(), 8)
            s.check(inf, "an expired token shows as 401 in lastError", srv.informers().get("pods"))
            s.check_eq(srv.readyz().status, 200, "/readyz stays 200 during a short auth outage")
            ann = {"tencent.com/predicate-gpu-idx-0": "2", "tencent.com/gpu-assigned": "true"}
            c.create_pod(g.pod("late", g.vcuda(30, 4), annotations=ann), node="n1", phase="Running")
            write_token(token_file, T3)
            t_fix = time.time()
            s.check(g.wait_until(lambda: placed(srv, "late"), SETTLE_S),
                    "once the file holds the valid token, the informers recover", srv.informers())
            want = [10, 20, 30, 0]
            want[int(c.annotations("pending")["tencent.com/predicate-gpu-idx-0"])] += 30
            s.check(g.wait_until(lambda: srv.cores()["n1"] == want, 5),
                    "occupancy: before, after, late and pending", (srv.cores()["n1"], want))

            def third_token_only():
                after = users_after(c, t_fix + 0.05)
                return after and all(u == "token:cccc..." for u, _st, _m, _p in after)
            s.check(g.wait_until(third_token_only, SETTLE_S),
                    "requests after the file was replaced use the third token", users_after(c, t_fix + 0.05))


if __name__ == "__main__":
    suite.main()
