#!/usr/bin/env python3
"""Live mode: /readyz names the real reason at once (issue 26 leftovers).

With the ConfigMap namespace forbidden (RBAC missing), the pods informer
waits up to 30 s for the ConfigMap informers; /readyz used to show that
wait ("waiting for informer configmaps/kube-public") and, behind it, a 403
cut to "403 Forbid". It now names the informer that fails and the API
server's answer, while the pods informer is still waiting: whole when it
fits, else cut at a word with "...", control characters made spaces.

Standalone: python3 test_live_readyz.py --binary PATH --source-dir REPO
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-readyz")

SETTLE_S = 20.0
CM_PATH = "^/api/v1/namespaces/kube-public/configmaps"
FORBIDDEN = ('configmaps is forbidden: User "system:serviceaccount:kube-system:gpu-quota-admission" cannot list '
             'resource "configmaps" in API group "" in the namespace "kube-public"')


def reason(srv):
    r = srv.readyz()
    try:
        return r.status, r.json().get("error", "")
    except ValueError:
        return r.status, r.text


def forbidden_reason(srv):
    """The /readyz reason once it names the 403, with the informers seen right after."""
    st, why = reason(srv)
    return (st, why, srv.informers()) if st == 503 and "403 Forbidden" in why else None


@suite.test
def test_forbidden_configmaps_named_at_once(s):
    with g.Cluster(s) as c:
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        c.sim.fail(403, path=CM_PATH, method="GET", message=FORBIDDEN)
        with g.LiveServer(s, c.kubeconfig(), wait_ready=False) as srv:
            got = g.wait_until(lambda: forbidden_reason(srv), SETTLE_S)
            s.require(got, "/readyz names the 403", reason(srv))
            _st, why, inf = got
            s.check_eq(why, "informer configmaps/kube-public: 403 Forbidden: " + FORBIDDEN,
                       "the reason is the informer and the API server's whole answer")
            s.check(inf["pods"]["lastError"].startswith("waiting for informer") and not inf["pods"]["synced"],
                    "at once: the pods informer is still waiting for the ConfigMaps (not after its 30 s)", inf)
            c.sim.clear_faults()
            s.check(g.wait_until(lambda: srv.readyz().status == 200, SETTLE_S),
                    "with the permission back /readyz turns 200", reason(srv))


@suite.test
def test_long_hostile_message_is_cut_at_a_word(s):
    words = " ".join("word%03d" % i for i in range(200))
    message = "denied \x1b[31mred\x1b[0m\r\nby policy: " + words
    with g.Cluster(s) as c:
        c.add_node(g.node("n1", g.vcuda(400, 256)))
        c.sim.fail(403, path=CM_PATH, method="GET", message=message)
        with g.LiveServer(s, c.kubeconfig(), wait_ready=False) as srv:
            got = g.wait_until(lambda: forbidden_reason(srv), SETTLE_S)
            s.require(got, "/readyz names the 403", reason(srv))
            why = got[1]
            s.check(why.startswith("informer configmaps/kube-public: 403 Forbidden: denied  [31mred [0m  by policy: "),
                    "control characters become spaces", why)
            s.check(not any(ord(ch) < 0x20 or ord(ch) == 0x7f for ch in why), "no control character left", why)
            s.check(why.endswith("...") and len(why) < len(message), "a long message is cut, with \"...\"", why)
            last = why[:-3].split()[-1]
            s.check(last in words.split(), "and cut at a word boundary (the last word is whole)", last)


if __name__ == "__main__":
    suite.main()
