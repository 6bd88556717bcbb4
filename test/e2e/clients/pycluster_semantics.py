#!/usr/bin/python3
"""Cluster-mode semantics scenarios (ring size, events-store retention, duplicate ids across
nodes, atomic COMMIT) driven through stomp.py, on top of pyclient.py's helpers.

Usage: /usr/bin/python3 pycluster_semantics.py SCENARIO 'JSON-ARGS'

Same contract as pyclient.py: one JSON object on stdout, an "error" field when a wait timed
out; the script observes, the Go test asserts. args["ports"] are the three nodes' STOMP ports.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient import node, run_scenarios  # noqa: E402


def wait_for(cl, body):
    cl.col.wait(lambda col: body in col.bodies_unlocked(), cl.timeout, body)


def sc_ring(args, out):
    """Node 0 sends count messages r0.. to a ring queue, each with a RECEIPT; then a
    consumer on node 1 (auto ack) takes what the queue kept; then node 0 sends a fence.
    Reports the bodies node 1 received."""
    dest, n = args["dest"], args["count"]
    a = node(args, 0)
    for i in range(n):
        a.send(dest, "r%d" % i)
    b = node(args, 1)
    b.subscribe(dest)
    b.col.wait(lambda col: len(col.messages) >= args["ring"], b.timeout, "the ring's messages")
    a.send(dest, "fence")
    wait_for(b, "fence")
    out["received"] = b.bodies()
    out["errors"] = a.col.errors + b.col.errors


def sc_retention(args, out):
    """Node 0 appends count messages e1.. to a log, each with a RECEIPT; node 1 reads it
    from start-position first, then node 2 appends a fence. Reports what node 1 read."""
    dest, n = args["dest"], args["count"]
    a = node(args, 0)
    for i in range(1, n + 1):
        a.send(dest, "e%d" % i)
    b = node(args, 1)
    b.subscribe(dest, headers={"start-position": "first"})
    b.col.wait(lambda col: len(col.messages) >= args["keep"], b.timeout, "the kept messages")
    c = node(args, 2)
    c.send(dest, "fence")
    wait_for(b, "fence")
    out["received"] = b.bodies()
    out["errors"] = a.col.errors + b.col.errors + c.col.errors


def sc_dedup(args, out):
    """The same _AMQ_DUPL_ID sent to dest through node 0, node 1, node 0 again and node 2,
    each SEND waiting for its RECEIPT (a missing RECEIPT is the scenario's error); then a
    fence without an id. A consumer on node 2 reports what it received."""
    dest = args["dest"]
    cons = node(args, 2)
    cons.subscribe(dest)
    a, b, c = node(args, 0), node(args, 1), node(args, 2)
    receipts = 0
    for cl, body in ((a, "first"), (b, "second"), (a, "third"), (c, "fourth")):
        cl.send(dest, body, headers={"_AMQ_DUPL_ID": args["id"]})
        receipts += 1
    a.send(dest, "fence")
    wait_for(cons, "fence")
    out["receipts"] = receipts
    out["received"] = cons.bodies()
    out["errors"] = a.col.errors + b.col.errors + c.col.errors + cons.col.errors


def sc_commit(args, out):
    """Transactions on node 0 to two queues of one group, consumers on nodes 1 and 2:
    tx-ok sends a1..a<n> and b1, b2 and commits with a RECEIPT; tx-abort sends x1..x3 and
    aborts; tx-big (its own connection) sends big+1 messages and commits with a RECEIPT,
    which the broker must refuse whole. Then fences on both queues. Reports what each
    consumer received, the COMMIT receipts and tx-big's ERROR."""
    qa, qb, n, big = args["queue_a"], args["queue_b"], args["count"], args["big"]
    ca, cb = node(args, 1), node(args, 2)
    ca.subscribe(qa)
    cb.subscribe(qb)
    p = node(args, 0)
    p.conn.begin(transaction="tx-ok")
    for i in range(1, n + 1):
        p.conn.send(qa, "a%d" % i, headers={"transaction": "tx-ok"})
        if i == 2:
            p.conn.send(qb, "b1", headers={"transaction": "tx-ok"})
    p.conn.send(qb, "b2", headers={"transaction": "tx-ok"})
    p.conn.commit(transaction="tx-ok", headers={"receipt": "commit-ok"})
    p.col.wait_receipt("commit-ok", p.timeout)
    out["commit_receipt"] = True

    p.conn.begin(transaction="tx-abort")
    for i in range(1, 4):
        p.conn.send(qa, "x%d" % i, headers={"transaction": "tx-abort"})
    p.conn.abort(transaction="tx-abort")

    q = node(args, 0)
    q.conn.begin(transaction="tx-big")
    for i in range(big + 1):
        q.conn.send(qa, "big%d" % i, headers={"transaction": "tx-big"})
    q.conn.commit(transaction="tx-big", headers={"receipt": "commit-big"})
    q.col.wait(lambda col: col.errors or "commit-big" in col.receipts, q.timeout, "the big COMMIT's answer")
    with q.col.cond:
        out["big_error"] = q.col.errors[0]["headers"].get("message") if q.col.errors else None
        out["big_receipt"] = "commit-big" in q.col.receipts

    f = node(args, 0)
    f.send(qa, "fence")
    f.send(qb, "fence")
    wait_for(ca, "fence")
    wait_for(cb, "fence")
    out["received_a"] = ca.bodies()
    out["received_b"] = cb.bodies()
    out["errors"] = p.col.errors + ca.col.errors + cb.col.errors + f.col.errors


SCENARIOS = {name[3:]: fn for name, fn in globals().items() if name.startswith("sc_")}


def main():
    return run_scenarios(SCENARIOS, "pycluster_semantics.py")

if __name__ == "__main__":
    sys.exit(main())
