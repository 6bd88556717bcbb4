#!/usr/bin/python3
"""Migration scenarios (issue 26) driven through stomp.py with RabbitMQ's STOMP headers, on
top of pyclient.py's helpers.

Usage: /usr/bin/python3 pymigrate.py SCENARIO 'JSON-ARGS'

Same contract as pyclient.py: one JSON object on stdout, an "error" field when a wait timed
out; the script observes, the Go test asserts.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyclient import Client, run_scenarios, text  # noqa: E402

DURABLE = {"durable": "true", "auto-delete": "false"}


def durable_sub(c, dest, sid, ack="client-individual", extra=None):
    """SUBSCRIBE with RabbitMQ's durable headers and the id that names the subscription;
    waits for its RECEIPT."""
    rid = c.rid("sub")
    hdrs = dict(DURABLE)
    hdrs.update(extra or {})
    hdrs["receipt"] = rid
    c.conn.subscribe(dest, sid, ack=ack, headers=hdrs)
    c.col.wait_receipt(rid, c.timeout)


def unsubscribe(c, sid, headers=None):
    rid = c.rid("unsub")
    hdrs = dict(headers or {})
    hdrs["receipt"] = rid
    c.conn.unsubscribe(sid, headers=hdrs)
    c.col.wait_receipt(rid, c.timeout)


def ack_all(c, upto):
    """Waits for upto messages and ACKs each (client-individual); returns their bodies."""
    c.col.wait(lambda col: len(col.messages) >= upto, c.timeout, "%d messages" % upto)
    with c.col.cond:
        msgs = list(c.col.messages[:upto])
    for h, _ in msgs:
        c.ack(h)
    return [text(b) for _, b in msgs], [h.get("destination") for h, _ in msgs]


def sc_rabbit_durable(args, out):
    """RabbitMQ's durable subscription: subscribe (durable:true, auto-delete:false, id),
    detach (DISCONNECT), publish args["count"] messages with receipts while away, reattach
    with the same id and take them all. Reports the bodies and destinations received."""
    dest, sid, n = args["dest"], args["id"], args["count"]
    c = Client(args)
    durable_sub(c, dest, sid)
    c.disconnect()
    p = Client(args)
    for i in range(n):
        p.send(dest, "m%d" % i)
    p.disconnect()
    c = Client(args)
    durable_sub(c, dest, sid)
    out["bodies"], dests = ack_all(c, n)
    out["destinations"] = sorted(set(dests))
    c.disconnect()  # barrier: nothing more was queued for it
    out["total"] = len(c.col.messages)


def on_node(args, i):
    """args addressed to cluster node i when they list the cluster's "ports" (runClusterWith),
    else as they are."""
    if "ports" in args:
        return dict(args, port=args["ports"][i])
    return args


def sc_rabbit_shared(args, out):
    """Two connections subscribe with the same durable id: args["count"] messages are split
    between them, each to one. Reports the bodies each received. On a cluster the two
    subscribers are on nodes 2 and 3 and the producer on node 1."""
    dest, sid, n = args["dest"], args["id"], args["count"]
    a, b = Client(on_node(args, 1)), Client(on_node(args, 2))
    durable_sub(a, dest, sid, ack="auto")
    durable_sub(b, dest, sid, ack="auto")
    p = Client(on_node(args, 0))
    for i in range(n):
        p.send(dest, "s%d" % i)
    p.disconnect()
    a.col.wait(lambda _: len(a.col.messages) + len(b.col.messages) >= n, a.timeout, "%d messages in all" % n)
    a.disconnect()
    b.disconnect()
    out["a"] = a.bodies()
    out["b"] = b.bodies()


def sc_rabbit_delete(args, out):
    """UNSUBSCRIBE with durable:true deletes the subscription: messages published after it
    are not kept for the id, and a new durable SUBSCRIBE with that id starts empty. Reports
    what the new subscription received (only "after" is expected, published after it)."""
    dest, sid = args["dest"], args["id"]
    c = Client(args)
    durable_sub(c, dest, sid)
    unsubscribe(c, sid, {"durable": "true"})
    p = Client(args)
    for i in range(5):
        p.send(dest, "gone%d" % i)
    durable_sub(c, dest, sid, ack="auto")
    p.send(dest, "after")
    c.col.wait(lambda col: len(col.messages) >= 1, c.timeout, "the message sent after resubscribing")
    c.disconnect()
    out["bodies"] = c.bodies()
    p.disconnect()


def sc_rabbit_topics(args, out):
    """One connection subscribes to each of args["bindings"] (binding keys as a RabbitMQ
    application spells them, wildcards included); another sends one message to each of
    args["keys"] (routing keys, as destinations), its body the key. Reports, per binding,
    the bodies received, in order (the subscriber's DISCONNECT receipt is the barrier)."""
    c = Client(args)
    sids = [c.subscribe(b) for b in args["bindings"]]
    p = Client(args)
    for k in args["keys"]:
        p.send(k, k.rsplit("/", 1)[-1])
    p.disconnect()
    c.disconnect()
    got = {sid: [] for sid in sids}
    with c.col.cond:
        for h, b in c.col.messages:
            got[h["subscription"]].append(text(b))
    out["received"] = [got[sid] for sid in sids]


def sc_rabbit_rpc(args, out):
    """RabbitMQ-style RPC over a queue: the requester subscribes to its /temp-queue/<name>
    and SENDs to args["dest"] with reply-to:/temp-queue/<name>; a responder on another
    connection answers to the reply-to it received. Reports the reply-to the responder saw
    and the reply's destination and body as the requester got it."""
    req, resp = Client(args), Client(args)
    resp.subscribe(args["dest"])
    req.subscribe("/temp-queue/" + args["name"])
    req.send(args["dest"], "ping", headers={"reply-to": "/temp-queue/" + args["name"]})
    resp.col.wait(lambda col: len(col.messages) >= 1, resp.timeout, "the request")
    with resp.col.cond:
        h, b = resp.col.messages[0]
    out["seen_reply_to"] = h.get("reply-to")
    resp.send(h["reply-to"], "re:" + text(b))
    req.col.wait(lambda col: len(col.messages) >= 1, req.timeout, "the reply")
    with req.col.cond:
        h, b = req.col.messages[0]
    out["reply_destination"] = h.get("destination")
    out["reply_body"] = text(b)
    req.disconnect()
    resp.disconnect()


def sc_rabbit_rpc_auto(args, out):
    """RabbitMQ-style RPC as a RabbitMQ application writes it: the requester never SUBSCRIBEs
    and relies on the broker's automatic subscription to its /temp-queue/<name>. Request 1 is
    answered on that subscription; then the requester SUBSCRIBEs explicitly (id "mine"),
    request 2 is answered, and a last marker sent to the same reply-to arrives. Reports every
    message the requester received (body, destination, subscription) once the marker is in."""
    req, resp = Client(args), Client(args)
    resp.subscribe(args["dest"])
    reply_to = "/temp-queue/" + args["name"]

    def rpc(i):
        req.send(args["dest"], "ping%d" % i, headers={"reply-to": reply_to})
        resp.col.wait(lambda col: len(col.messages) >= i, resp.timeout, "request %d" % i)
        with resp.col.cond:
            h, b = resp.col.messages[i - 1]
        out.setdefault("seen_reply_to", []).append(h.get("reply-to"))
        resp.send(h["reply-to"], "re:" + text(b))
        req.col.wait(lambda col: len(col.messages) >= i, req.timeout, "reply %d" % i)
        return h["reply-to"]

    qualified = rpc(1)
    rid = req.rid("sub")
    req.conn.subscribe(reply_to, "mine", ack="auto", headers={"receipt": rid})
    req.col.wait_receipt(rid, req.timeout)
    rpc(2)
    resp.send(qualified, "marker")
    req.col.wait(lambda col: any(text(b) == "marker" for _, b in col.messages), req.timeout, "the marker")
    req.disconnect()  # barrier: everything queued for the requester was written before
    with req.col.cond:
        out["received"] = [{"body": text(b), "destination": h.get("destination"), "subscription": h.get("subscription")}
                           for h, b in req.col.messages]
    resp.disconnect()


def sc_refused(args, out):
    """Each of args["cases"] ({command, dest, headers}) on a fresh connection: reports the
    ERROR's message header (or "RECEIPT" when it was accepted)."""
    out["answers"] = []
    for case in args["cases"]:
        c = Client(args)
        rid = c.rid("r")
        hdrs = dict(case["headers"])
        hdrs["receipt"] = rid
        if case["command"] == "SUBSCRIBE":
            c.conn.subscribe(case["dest"], "1", headers=hdrs)
        else:
            c.conn.send(case["dest"], "x", headers=hdrs)
        c.col.wait(lambda col: col.errors or rid in col.receipts, c.timeout, "ERROR or RECEIPT")
        with c.col.cond:
            out["answers"].append(c.col.errors[0]["headers"].get("message") if c.col.errors else "RECEIPT")
        try:
            c.conn.disconnect()
        except Exception:  # noqa: BLE001 - the broker closed it after the ERROR
            pass


if __name__ == "__main__":
    sys.exit(run_scenarios({name[3:]: fn for name, fn in globals().items() if name.startswith("sc_")}, "pymigrate.py"))
