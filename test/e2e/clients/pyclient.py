#!/usr/bin/python3
"""Scenarios driven through stomp.py (Debian's python3-stomp) for Titan's end-to-end tests.

Usage: /usr/bin/python3 pyclient.py SCENARIO 'JSON-ARGS'

Every scenario prints what it observed as one JSON object on stdout (the Go test asserts on
it) and exits 0; a scenario that could not run to the end (a wait timed out, a connection
failed) still prints what it saw, with an "error" field. The "pinger" scenario instead prints
one JSON line per round trip and a final summary line when its stdin closes.

Scripts never assert: they observe. Waits are bounded by the "timeout" argument (seconds).
"""

import json
import os
import socket
import struct
import sys
import threading
import time

import stomp


class Timeout(Exception):
    pass


class Collector(stomp.ConnectionListener):
    """Records every frame a connection receives; waits on conditions with a bound."""

    def __init__(self):
        self.cond = threading.Condition()
        self.connected = None
        self.messages = []
        self.receipts = []
        self.errors = []
        self.heartbeats = 0
        self.disconnected = False
        self.heartbeat_timeouts = 0

    def on_connected(self, frame):
        with self.cond:
            self.connected = dict(frame.headers)
            self.cond.notify_all()

    def on_message(self, frame):
        with self.cond:
            self.messages.append((dict(frame.headers), frame.body))
            self.cond.notify_all()

    def on_receipt(self, frame):
        with self.cond:
            self.receipts.append(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def on_error(self, frame):
        with self.cond:
            self.errors.append({"headers": dict(frame.headers), "body": text(frame.body)})
            self.cond.notify_all()

    def on_heartbeat(self):
        with self.cond:
            self.heartbeats += 1
            self.cond.notify_all()

    def on_heartbeat_timeout(self):
        with self.cond:
            self.heartbeat_timeouts += 1
            self.cond.notify_all()

    def on_disconnected(self):
        with self.cond:
            self.disconnected = True
            self.cond.notify_all()

    def wait(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout("timed out after %.1fs waiting for %s" % (timeout, what))
                self.cond.wait(left)

    def wait_receipt(self, rid, timeout):
        self.wait(lambda c: rid in c.receipts, timeout, "RECEIPT " + rid)

    def bodies_unlocked(self):
        """Bodies received so far; call with self.cond held (inside a wait predicate)."""
        return [text(b) for _, b in self.messages]

    def bodies(self):
        with self.cond:
            return self.bodies_unlocked()


def text(b):
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    return b


CONNECTIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


class Client:
    """One STOMP connection: a stomp.py Connection plus its Collector."""

    counter = 0

    def __init__(self, args, version=None, heartbeats=(0, 0), auto_decode=True):
        self.version = version or args.get("version", "1.2")
        self.timeout = args.get("timeout", 10)
        cls = CONNECTIONS[self.version]
        kw = dict(reconnect_attempts_max=1, auto_decode=auto_decode)
        if self.version != "1.0":
            kw["heartbeats"] = heartbeats
            # How late the broker's heart-beats may be before stomp.py drops the connection,
            # as a multiple of the interval (stomp.py's default is 1.5).
            kw["heart_beat_receive_scale"] = args.get("receive_scale", 1.5)
        self.conn = cls([(args["host"], args["port"])], **kw)
        self.col = Collector()
        self.conn.set_listener("collector", self.col)
        chdrs = {"client-id": args["client_id"]} if args.get("client_id") else None
        self.conn.connect(args.get("login"), args.get("passcode"), wait=True, headers=chdrs)
        self.col.wait(lambda c: c.connected is not None, self.timeout, "CONNECTED")
        self.subs = {}

    def rid(self, prefix):
        Client.counter += 1
        return "%s-%d" % (prefix, Client.counter)

    def subscribe(self, dest, ack="auto", headers=None):
        sid = str(len(self.subs) + 1)
        rid = self.rid("sub")
        hdrs = dict(headers or {})
        hdrs["receipt"] = rid
        if self.version == "1.0":
            self.conn.subscribe(dest, id=sid, ack=ack, headers=hdrs)
        else:
            self.conn.subscribe(dest, sid, ack=ack, headers=hdrs)
        self.subs[sid] = dest
        self.col.wait_receipt(rid, self.timeout)
        return sid

    def send(self, dest, body, headers=None, receipt=True):
        hdrs = dict(headers or {})
        rid = None
        if receipt:
            rid = self.rid("send")
            hdrs["receipt"] = rid
        self.conn.send(dest, body, headers=hdrs)
        if rid:
            self.col.wait_receipt(rid, self.timeout)

    def bodies(self):
        return self.col.bodies()

    def ack_args(self, headers):
        if self.version == "1.2":
            return (headers["ack"],)
        if self.version == "1.1":
            return (headers["message-id"], headers["subscription"])
        return (headers["message-id"],)

    def ack(self, headers):
        self.conn.ack(*self.ack_args(headers))

    def nack(self, headers):
        self.conn.nack(*self.ack_args(headers))

    def disconnect(self):
        """DISCONNECT with a receipt and wait for it. The broker writes the RECEIPT after
        every frame queued to this connection before it, so this is a delivery barrier."""
        rid = self.rid("disc")
        self.conn.disconnect(receipt=rid)
        self.col.wait_receipt(rid, self.timeout)
        return rid

    def kill(self):
        """Drop the TCP connection without DISCONNECT, as a crashed client would.

        SO_LINGER 0 makes the close send RST. shutdown(SHUT_RD) first wakes stomp.py's receiver
        thread, which is blocked in recv on this socket: on Linux a close() alone would not
        release the connection while another thread is still inside recv on it."""
        sock = self.conn.transport.socket
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.conn.transport.running = False
        try:
            sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass
        sock.close()


def msg_record(headers, body):
    return {
        "body": text(body),
        "message_id": headers.get("message-id"),
        "ack": headers.get("ack"),
        "subscription": headers.get("subscription"),
        "destination": headers.get("destination"),
        "redelivered": headers.get("redelivered"),
        "group": headers.get("group"),
        "content_length": headers.get("content-length"),
    }


# ---------------------------------------------------------------- scenarios


def sc_connect(args, out):
    c = Client(args)
    out["version"] = c.col.connected.get("version")
    out["server"] = c.col.connected.get("server")
    out["session"] = c.col.connected.get("session")
    c.disconnect()


def sc_binary(args, out):
    c = Client(args, auto_decode=False)
    dest = args["dest"]
    c.subscribe(dest)
    body = bytes(range(256))
    out["sent_hex"] = body.hex()
    c.send(dest, body)
    c.col.wait(lambda col: len(col.messages) >= 1, c.timeout, "the MESSAGE")
    headers, got = c.col.messages[0]
    out["received_hex"] = bytes(got).hex()
    out["content_length"] = headers.get("content-length")
    c.disconnect()


def sc_receipts(args, out):
    c = Client(args)
    out["receipts"] = c.col.receipts  # same list object: filled in as receipts arrive
    dest = args["dest"]
    c.conn.send(dest, "receipted", headers={"receipt": "r-send"})
    c.col.wait_receipt("r-send", c.timeout)
    if c.version == "1.0":
        c.conn.subscribe(dest, id="1", headers={"receipt": "r-sub"})
    else:
        c.conn.subscribe(dest, "1", headers={"receipt": "r-sub"})
    c.col.wait_receipt("r-sub", c.timeout)
    c.conn.disconnect(receipt="r-disc")
    c.col.wait_receipt("r-disc", c.timeout)


def sc_fanout(args, out):
    dest, n, count = args["dest"], args["subscribers"], args["count"]
    subs = [Client(args) for _ in range(n)]
    for s in subs:
        s.subscribe(dest)
    p = Client(args)
    for i in range(count):
        p.send(dest, "fan-%d" % i)
    p.disconnect()
    try:
        for s in subs:
            s.col.wait(lambda col: len(col.messages) >= count, s.timeout, "%d messages" % count)
        for s in subs:
            s.disconnect()
    finally:
        out["received"] = [s.bodies() for s in subs]


def sc_queue(args, out):
    dest, n, count = args["dest"], args["subscribers"], args["count"]
    subs = [Client(args) for _ in range(n)]
    for s in subs:
        s.subscribe(dest)
    p = Client(args)
    try:
        for i in range(count):
            p.send(dest, "q-%d" % i)
        p.disconnect()
        subs[0].col.wait(
            lambda _: sum(len(s.col.messages) for s in subs) >= count, subs[0].timeout,
            "%d messages over all subscribers" % count)
        for s in subs:
            s.disconnect()
    finally:
        out["received"] = [s.bodies() for s in subs]


def sc_nack(args, out):
    c = Client(args)
    dest = args["dest"]
    c.subscribe(dest, ack="client-individual")
    out["deliveries"] = []
    try:
        c.send(dest, "nack-me")
        c.col.wait(lambda col: len(col.messages) >= 1, c.timeout, "the first delivery")
        c.nack(c.col.messages[0][0])
        c.col.wait(lambda col: len(col.messages) >= 2, c.timeout, "the redelivery after NACK")
        c.ack(c.col.messages[1][0])
        c.disconnect()
    finally:
        out["deliveries"] = [msg_record(h, b) for h, b in c.col.messages]


def sc_abrupt(args, out):
    dest, count = args["dest"], args["count"]
    a = Client(args)
    a.subscribe(dest, ack="client")
    p = Client(args)
    for i in range(count):
        p.send(dest, "abrupt-%d" % i)
    p.disconnect()
    b = None
    try:
        a.col.wait(lambda col: len(col.messages) >= count, a.timeout, "A to receive %d" % count)
        b = Client(args)
        b.subscribe(dest, ack="client")
        out["b_before_kill"] = len(b.col.messages)
        a.kill()
        b.col.wait(lambda col: len(col.messages) >= count, b.timeout,
                   "B to receive the %d redeliveries" % count)
        for h, _ in b.col.messages:
            b.ack(h)
        b.disconnect()
    finally:
        out["a"] = a.bodies()
        out["b"] = [msg_record(h, body) for h, body in (b.col.messages if b else [])]


def sc_groups(args, out):
    dest, count = args["dest"], args["count"]
    market = Client(args)
    market.subscribe(dest, headers={"group": "market"})
    default = Client(args)
    default.subscribe(dest)
    p = Client(args)
    try:
        for i in range(count):
            p.send(dest, "market-%d" % i, headers={"group": "market"})
            p.send(dest, "default-%d" % i)
        p.disconnect()
        market.col.wait(lambda col: len(col.messages) >= count, market.timeout, "market messages")
        default.col.wait(lambda col: len(col.messages) >= count, default.timeout, "default messages")
        market.disconnect()
        default.disconnect()
    finally:
        out["market"] = [msg_record(h, b) for h, b in market.col.messages]
        out["default"] = [msg_record(h, b) for h, b in default.col.messages]


def sc_transaction(args, out):
    dest = args["dest"]
    s = Client(args)
    s.subscribe(dest)
    p = Client(args)
    try:
        p.conn.begin(transaction="tx-commit")
        p.conn.send(dest, "tx-a1", headers={"transaction": "tx-commit"})
        p.conn.send(dest, "tx-a2", headers={"transaction": "tx-commit"})
        # A fence sent outside the transaction: once it has arrived, anything the broker had
        # delivered at SEND time would have arrived before it.
        p.send(dest, "fence-1")
        s.col.wait(lambda col: "fence-1" in col.bodies_unlocked(), s.timeout, "fence-1")
        out["before_commit"] = s.bodies()
        p.conn.commit(transaction="tx-commit")
        s.col.wait(lambda col: {"tx-a1", "tx-a2"} <= set(col.bodies_unlocked()), s.timeout,
                   "the committed messages")
        p.conn.begin(transaction="tx-abort")
        p.conn.send(dest, "tx-b1", headers={"transaction": "tx-abort"})
        p.conn.abort(transaction="tx-abort")
        p.send(dest, "fence-2")
        s.col.wait(lambda col: "fence-2" in col.bodies_unlocked(), s.timeout, "fence-2")
        p.disconnect()
        s.disconnect()
    finally:
        out["received"] = s.bodies()
        out["producer_errors"] = p.col.errors


def sc_heartbeat(args, out):
    hb = args["heartbeat_ms"]
    c = Client(args, heartbeats=(hb, hb))
    dest = args["dest"]
    out["heart_beat"] = c.col.connected.get("heart-beat")
    c.subscribe(dest)
    with c.col.cond:
        start_hb = c.col.heartbeats
    # The scenario itself: stay idle (no frames from us; stomp.py's own heart-beat thread
    # keeps beating) for idle_ms.
    time.sleep(args["idle_ms"] / 1000.0)
    with c.col.cond:
        out["server_heartbeats_while_idle"] = c.col.heartbeats - start_hb
        out["disconnected_while_idle"] = c.col.disconnected
        out["heartbeat_timeouts"] = c.col.heartbeat_timeouts
    try:
        c.send(dest, "after-idle")
        c.col.wait(lambda col: len(col.messages) >= 1, c.timeout, "the MESSAGE after idling")
        out["received"] = c.bodies()
        c.disconnect()
    finally:
        out["errors"] = c.col.errors


def sc_idle_subscriber(args, out):
    """A subscriber with stomp.py's default heart-beats (0,0) idles for idle_ms, subscribed
    before the idle (subscribe_first) or after it, then a second connection sends one
    message: the subscriber must still be connected and receive it (issue 30)."""
    c = Client(args)
    dest = args["dest"]
    out["heart_beat"] = c.col.connected.get("heart-beat")
    if args.get("subscribe_first"):
        c.subscribe(dest)
    time.sleep(args["idle_ms"] / 1000.0)
    with c.col.cond:
        out["disconnected_while_idle"] = c.col.disconnected
    try:
        if not args.get("subscribe_first"):
            c.subscribe(dest)
        p = Client(args)
        p.send(dest, "after-idle")
        p.disconnect()
        c.col.wait(lambda col: len(col.messages) >= 1, c.timeout, "the MESSAGE after idling")
        out["received"] = c.bodies()
        c.disconnect()
    finally:
        out["errors"] = c.col.errors


def sc_pinger(args, out):
    """Round-trips messages until stdin closes, printing {"rt": n} after each one."""
    dest = args["dest"]
    c = Client(args)
    c.subscribe(dest)
    stop = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    n = 0
    errors = []
    while not stop.is_set():
        body = "ping-%d" % n
        try:
            c.send(dest, body)
            c.col.wait(lambda col: body in col.bodies_unlocked(), c.timeout, body)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            errors.append("%s: %s" % (type(e).__name__, e))
            print(json.dumps({"error": errors[-1]}), flush=True)
            break
        n += 1
        print(json.dumps({"rt": n}), flush=True)
        stop.wait(0.02)  # pacing, so the pinger does not hog a core
    out["round_trips"] = n
    out["errors"] = errors + [e["headers"].get("message", "") for e in c.col.errors]
    out["disconnected"] = c.col.disconnected
    if not errors:
        c.disconnect()
    out["done"] = True


# ---------------------------------------------------------------- security scenarios


def sc_auth_connect(args, out):
    """CONNECT with the login and passcode given (none when absent) and report whether it
    was CONNECTED, or the ERROR frames and the close that followed."""
    timeout = args.get("timeout", 10)
    conn = stomp.Connection12([(args["host"], args["port"])], reconnect_attempts_max=1, heartbeats=(0, 0))
    col = Collector()
    conn.set_listener("collector", col)
    start = time.monotonic()
    try:
        conn.connect(args.get("login"), args.get("passcode"), wait=False)
        col.wait(lambda c: c.connected is not None or c.errors or c.disconnected, timeout, "CONNECTED or ERROR")
        if col.connected is None:
            col.wait(lambda c: c.disconnected, timeout, "the close after ERROR")
    finally:
        out["elapsed_ms"] = int((time.monotonic() - start) * 1000)
        out["connected"] = col.connected is not None
        out["errors"] = [e["headers"].get("message") for e in col.errors]
        out["error_bodies"] = [e["body"] for e in col.errors]
        out["disconnected"] = col.disconnected
    if col.connected is not None:
        Client.counter += 1
        rid = "disc-%d" % Client.counter
        conn.disconnect(receipt=rid)
        col.wait_receipt(rid, timeout)


def sc_auth_ops(args, out):
    """Each op in args["ops"] ({"op": "send"|"subscribe"|"unsubscribe", "dest": ..., "headers": {...},
    "id": subscription id}) on a new connection logged in as args["login"] (with CONNECT
    client-id args["client_id"] when given): "ok" when its RECEIPT came, else the ERROR's
    message; "bodies" has each ERROR's body ("" for ok)."""
    results = []
    bodies = []
    out["bodies"] = bodies
    for op in args["ops"]:
        c = Client(args)
        rid = c.rid(op["op"])
        hdrs = dict(op.get("headers") or {})
        hdrs["receipt"] = rid
        if op["op"] == "send":
            c.conn.send(op["dest"], op.get("body", "x"), headers=hdrs)
        elif op["op"] == "unsubscribe":
            c.conn.unsubscribe(op.get("id", "1"), headers=hdrs)
        else:
            c.conn.subscribe(op["dest"], op.get("id", "1"), ack="auto", headers=hdrs)
        c.col.wait(lambda col: rid in col.receipts or col.errors, c.timeout, "RECEIPT or ERROR for " + rid)
        bodies.append(c.col.errors[0]["body"] if c.col.errors else "")
        if c.col.errors:
            e = c.col.errors[0]
            results.append(e["headers"].get("message") + (" receipt-id=" + e["headers"].get("receipt-id", "")))
            c.col.wait(lambda col: col.disconnected, c.timeout, "the close after ERROR")
        else:
            results.append("ok")
            c.disconnect()
    out["results"] = results


def sc_auth_tls(args, out):
    """CONNECT over TLS presenting the client certificate args["cert"]/args["key"] (trusting
    args["ca"]), with no login header, then SEND to args["dest"] with a receipt: report
    CONNECTED and "ok" or the ERROR messages."""
    timeout = args.get("timeout", 10)
    conn = stomp.Connection12([(args["host"], args["port"])], reconnect_attempts_max=1, heartbeats=(0, 0))
    conn.set_ssl(for_hosts=[(args["host"], args["port"])], key_file=args["key"], cert_file=args["cert"], ca_certs=args["ca"])
    col = Collector()
    conn.set_listener("collector", col)
    try:
        conn.connect(wait=False)
        col.wait(lambda c: c.connected is not None or c.errors or c.disconnected, timeout, "CONNECTED or ERROR")
        if col.connected is not None:
            conn.send(args["dest"], "over tls", headers={"receipt": "tls-1"})
            col.wait(lambda c: "tls-1" in c.receipts or c.errors, timeout, "RECEIPT or ERROR")
            out["send"] = "ok" if "tls-1" in col.receipts else col.errors[0]["headers"].get("message")
    finally:
        out["connected"] = col.connected is not None
        out["errors"] = [e["headers"].get("message") for e in col.errors]
    if col.connected is not None and not col.errors:
        conn.disconnect(receipt="tls-disc")
        col.wait_receipt("tls-disc", timeout)


def sc_auth_wildcard(args, out):
    """A subscriber (args["sub"] credentials) subscribes to args["filter"]; a producer
    (args["pub"]) sends args["sends"] ([dest, body] pairs, with receipts) and then
    args["marker"]; the subscriber's bodies are reported once the marker arrived."""
    sub = Client(dict(args, **args["sub"]))
    sub.subscribe(args["filter"])
    pub = Client(dict(args, **args["pub"]))
    for dest, body in args["sends"]:
        pub.send(dest, body)
    mdest, mbody = args["marker"]
    pub.send(mdest, mbody)
    try:
        sub.col.wait(lambda c: mbody in c.bodies_unlocked(), sub.timeout, "the marker")
    finally:
        out["bodies"] = sub.bodies()
    pub.disconnect()
    sub.disconnect()


# ---------------------------------------------------------------- durability scenarios
# (crash, restart and WebSocket tests: crash_test.go, restart_test.go, websocket_test.go)


def emit(obj, lock=None):
    """Prints one JSON line and flushes it at once, so a line the Go test reads is never
    lost when the broker (and with it this client) dies right after."""
    line = json.dumps(obj) + "\n"
    if lock is None:
        sys.stdout.write(line)
        sys.stdout.flush()
        return
    with lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def sc_crash_produce(args, out):
    """Sends persistent messages with receipts to dest, at most `window` unanswered at a time,
    until the connection drops (the broker is killed) or `max` were sent. Prints
    {"acked": body} the moment a SEND's RECEIPT arrives, before anything else happens.
    Bodies are "<prefix>-<n>"."""
    dest, prefix = args["dest"], args["prefix"]
    window, limit = args.get("window", 16), args.get("max", 1000000)
    lock = threading.Lock()
    slots = threading.Semaphore(window)
    stop = threading.Event()
    pending = {}
    state = {"acked": 0, "closed": False, "errors": []}

    class Listener(stomp.ConnectionListener):
        def on_receipt(self, frame):
            with lock:
                body = pending.pop(frame.headers.get("receipt-id"), None)
                if body is None or state["closed"]:
                    return
                state["acked"] += 1
                sys.stdout.write(json.dumps({"acked": body}) + "\n")
                sys.stdout.flush()
            slots.release()

        def on_error(self, frame):
            with lock:
                state["errors"].append(frame.headers.get("message", ""))
            stop.set()
            for _ in range(window):
                slots.release()

        def on_disconnected(self):
            stop.set()
            for _ in range(window):
                slots.release()

    conn = stomp.Connection12([(args["host"], args["port"])], reconnect_attempts_max=1,
                              heartbeats=(0, 0))
    conn.set_listener("crash", Listener())
    conn.connect(wait=True)
    emit({"ready": True}, lock)
    sent = 0
    try:
        while not stop.is_set() and sent < limit:
            if not slots.acquire(timeout=args.get("timeout", 10)):
                raise Timeout("no RECEIPT within %ss" % args.get("timeout", 10))
            if stop.is_set():
                break
            body = "%s-%d" % (prefix, sent)
            rid = "r-" + body
            with lock:
                pending[rid] = body
            conn.send(dest, body, headers={"receipt": rid, "persistent": "true"})
            sent += 1
        if not stop.is_set():
            deadline = time.monotonic() + args.get("timeout", 10)
            while time.monotonic() < deadline and not stop.is_set():
                with lock:
                    if not pending:
                        break
                time.sleep(0.01)
    except Exception as e:  # noqa: BLE001 - the broker died under us: expected
        out["send_error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        with lock:
            state["closed"] = True  # no "acked" line after the result line
            out["sent"] = sent
            out["receipts"] = state["acked"]
            out["unanswered"] = len(pending)
            out["errors"] = state["errors"]
            out["disconnected"] = stop.is_set()


def sc_crash_consume(args, out):
    """Consumes dest with client-individual acks until the connection drops, printing
    {"body", "redelivered"} for every MESSAGE before acknowledging it."""
    dest = args["dest"]
    lock = threading.Lock()
    stop = threading.Event()
    state = {"n": 0}
    holder = {}

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            with lock:
                if state.get("closed"):
                    return  # main prints the summary line now: no line may interleave with it
                state["n"] += 1
                sys.stdout.write(json.dumps({"body": text(frame.body),
                                             "redelivered": frame.headers.get("redelivered")}) + "\n")
                sys.stdout.flush()
            try:
                holder["conn"].ack(frame.headers["ack"])
            except Exception:  # noqa: BLE001 - the broker died under us
                stop.set()

        def on_receipt(self, frame):
            with lock:
                holder.setdefault("receipts", []).append(frame.headers.get("receipt-id"))

        def on_disconnected(self):
            stop.set()

    conn = stomp.Connection12([(args["host"], args["port"])], reconnect_attempts_max=1,
                              heartbeats=(0, 0))
    holder["conn"] = conn
    conn.set_listener("crash", Listener())
    conn.connect(wait=True)
    conn.subscribe(dest, "1", ack="client-individual", headers={"receipt": "sub-1"})
    deadline = time.monotonic() + args.get("timeout", 10)
    while "sub-1" not in holder.get("receipts", []) and not stop.is_set():
        if time.monotonic() > deadline:
            raise Timeout("no RECEIPT for SUBSCRIBE")
        time.sleep(0.005)
    emit({"ready": True}, lock)
    stop.wait(args.get("max_seconds", 60))
    with lock:
        state["closed"] = True  # not printed, so not acknowledged: it is delivered again
        out["received"] = state["n"]
        out["disconnected"] = stop.is_set()


def sc_drain(args, out):
    """Drains dest with client-individual acks: subscribes, sends a fence message after the
    SUBSCRIBE's receipt and consumes (acking each) until the fence arrives. Everything queued
    before the fence has then been delivered. Reports [body, redelivered] per MESSAGE."""
    dest, fence = args["dest"], args.get("fence", "FENCE")
    c = Client(args)
    c.timeout = args.get("drain_timeout", c.timeout)
    acked = [0]

    class Acker(stomp.ConnectionListener):
        def on_message(self, frame):
            c.conn.ack(frame.headers["ack"])
            acked[0] += 1

    c.conn.set_listener("acker", Acker())
    try:
        c.subscribe(dest, ack="client-individual")
        c.send(dest, fence)
        c.col.wait(lambda col: fence in col.bodies_unlocked(), c.timeout, "the fence " + fence)
        c.disconnect()
    finally:
        with c.col.cond:
            out["deliveries"] = [[text(b), h.get("redelivered")] for h, b in c.col.messages]
        out["errors"] = c.col.errors


def sc_send_bodies(args, out):
    """Sends each of args["bodies"] (or args["bodies_hex"], as bytes) to dest with a receipt
    and waits for it; headers go on every SEND. Reports epoch milliseconds just before the
    first SEND and after the last RECEIPT."""
    dest, headers = args["dest"], args.get("headers", {})
    binary = "bodies_hex" in args
    bodies = [bytes.fromhex(h) for h in args["bodies_hex"]] if binary else args["bodies"]
    c = Client(args, auto_decode=not binary)
    out["before_ms"] = int(time.time() * 1000)
    for b in bodies:
        c.send(dest, b, headers=headers)
    out["receipted_ms"] = int(time.time() * 1000)
    c.disconnect()


def sc_collect(args, out):
    """Subscribes to dest (ack mode and extra SUBSCRIBE headers from args), prints
    {"ready": true}, sends args["send"] bodies (if any), waits for `count` MESSAGEs, acks the
    first `ack_first` of them (client-individual), sends args["send_after"] and waits until
    those have arrived too (a fence: whatever came before them is in), then disconnects with
    a receipt. Reports each MESSAGE with its headers, body (hex when "binary") and arrival
    time in epoch milliseconds."""
    dest, count = args["dest"], args["count"]
    binary = args.get("binary", False)
    c = Client(args, auto_decode=not binary)
    arrivals = []

    class Clock(stomp.ConnectionListener):
        def on_message(self, frame):
            arrivals.append(int(time.time() * 1000))

    c.conn.set_listener("clock", Clock())  # called after the collector: same order
    out["subscribe_ms"] = int(time.time() * 1000)
    try:
        c.subscribe(dest, ack=args.get("ack", "auto"), headers=args.get("sub_headers", {}))
        out["subscribed_ms"] = int(time.time() * 1000)
        emit({"ready": True})
        for b in args.get("send", []):
            c.send(dest, b)
        c.col.wait(lambda col: len(col.messages) >= count, c.timeout, "%d messages" % count)
        for h, _ in c.col.messages[:args.get("ack_first", 0)]:
            c.ack(h)
        after = args.get("send_after", [])
        for b in after:
            c.send(dest, b)
        if after:
            c.col.wait(lambda col: set(after) <= set(col.bodies_unlocked()), c.timeout,
                       "the messages sent after the first %d" % count)
        c.disconnect()
    finally:
        with c.col.cond:
            out["messages"] = [{
                "body": bytes(b).hex() if binary else text(b),
                "sequence": h.get("sequence"),
                "redelivered": h.get("redelivered"),
                "destination": h.get("destination"),
                "ack": h.get("ack"),
                "content_length": h.get("content-length"),
            } for h, b in c.col.messages]
            out["arrival_ms"] = list(arrivals)
            out["errors"] = c.col.errors


# ---------------------------------------------------------------- scenarios of the destination
# pattern, ring queue, request/response and CLI tests (patterns_test.go, ring_test.go,
# rpc_test.go, cli_test.go). Some need the monitor API: args["monitor"] is its base URL.

import urllib.parse  # noqa: E402 - kept with the scenarios that use it
import urllib.request  # noqa: E402


def full_record(headers, body):
    """A MESSAGE with every header it carried."""
    return {"headers": dict(headers), "body": text(body)}


def monitor_queue(args, dest, group=None):
    """The monitor API's QueueInfo of dest (None when no such queue exists)."""
    q = {"destination": dest}
    if group:
        q["group"] = group
    url = args["monitor"] + "/titan/monitor/queues?" + urllib.parse.urlencode(q)
    with urllib.request.urlopen(url, timeout=5) as r:
        qs = json.load(r)["queues"]
    return qs[0] if qs else None


def poll_monitor(args, dest, pred, timeout, what):
    """Polls dest's QueueInfo until pred(info) holds; returns it, or raises Timeout."""
    deadline = time.monotonic() + timeout
    while True:
        info = monitor_queue(args, dest)
        if info is not None and pred(info):
            return info
        if time.monotonic() > deadline:
            raise Timeout("timed out after %.1fs waiting for %s (last: %s)" % (timeout, what, info))
        time.sleep(0.01)


class Poke(stomp.ConnectionListener):
    """Wakes the waiters of another connection's Collector when this connection receives a
    MESSAGE, so one wait can watch two connections."""

    def __init__(self, col):
        self.col = col

    def on_message(self, frame):
        with self.col.cond:
            self.col.cond.notify_all()


class Arrivals(stomp.ConnectionListener):
    """Records when each MESSAGE arrived (time.monotonic()), by body."""

    def __init__(self):
        self.at = {}

    def on_message(self, frame):
        self.at.setdefault(text(frame.body), time.monotonic())


class ReceiptFrames(stomp.ConnectionListener):
    """Keeps every RECEIPT's headers by receipt-id (Collector keeps only the ids)."""

    def __init__(self, col):
        self.col = col
        self.frames = {}

    def on_receipt(self, frame):
        with self.col.cond:
            self.frames[frame.headers.get("receipt-id")] = dict(frame.headers)
            self.col.cond.notify_all()


def sc_plan(args, out):
    """Subscribes each of args["subs"] ({name: {dest, ack, headers}}) on its own connection,
    sends args["sends"] ([{dest, body, headers}]) in order from one producer, each with a
    receipt, waits until each subscription named in args["wait"] ({name: [bodies]}) has
    received all those bodies, then DISCONNECTs every subscriber with a receipt (a delivery
    barrier). args["before"] ([{dest, body, headers}]) are sent before anything subscribes.
    Reports every MESSAGE, with all its headers, by subscriber name."""
    subs = {}
    out["received"] = {}
    out["errors"] = {}
    p = None
    try:
        if args.get("before"):
            p0 = Client(args)
            for m in args["before"]:
                p0.send(m["dest"], m["body"], headers=m.get("headers"))
            p0.disconnect()
        for name, s in sorted(args["subs"].items()):
            c = Client(args)
            subs[name] = c
            c.subscribe(s["dest"], ack=s.get("ack", "auto"), headers=s.get("headers"))
        p = Client(args)
        for m in args.get("sends") or []:
            p.send(m["dest"], m["body"], headers=m.get("headers"))
        p.disconnect()
        for name, want in sorted((args.get("wait") or {}).items()):
            c, want = subs[name], set(want)
            c.col.wait(lambda col: want <= set(col.bodies_unlocked()), c.timeout,
                       "%s to receive %s" % (name, sorted(want)))
        for c in subs.values():
            c.disconnect()
    finally:
        for name, c in subs.items():
            out["received"][name] = [full_record(h, b) for h, b in c.col.messages]
            out["errors"][name] = c.col.errors
        out["producer_errors"] = p.col.errors if p else []


def sc_invalid(args, out):
    """For each case {command: SEND|SUBSCRIBE, dest}, on a fresh connection, sends that frame
    with a receipt and reports what came back (the ERROR frames, or the RECEIPT) and whether
    the broker then closed the connection."""
    results = []
    out["results"] = results
    for case in args["cases"]:
        c = Client(args)
        rid = c.rid("invalid")
        r = {"command": case["command"], "dest": case["dest"], "receipt_id": rid}
        results.append(r)
        if case["command"] == "SEND":
            c.conn.send(case["dest"], "x", headers={"receipt": rid})
        else:
            c.conn.subscribe(case["dest"], "1", headers={"receipt": rid})
        c.col.wait(lambda col: col.errors or rid in col.receipts, c.timeout,
                   "an ERROR or RECEIPT for %s %s" % (case["command"], case["dest"]))
        with c.col.cond:
            r["receipt"] = rid in c.col.receipts
            r["errors"] = list(c.col.errors)
        if r["receipt"]:
            c.disconnect()
            continue
        c.col.wait(lambda col: col.disconnected, c.timeout, "the connection to close after ERROR")
        r["closed"] = True


def sc_dlq(args, out):
    """A client-individual subscriber NACKs every delivery of one message until it reaches the
    dead-letter queue args["dlq"], which another connection subscribes to. Reports each
    delivery (with the milliseconds since the NACK before it) and the dead letter."""
    dest, dlq = args["dest"], args["dlq"]
    d = Client(args)
    d.subscribe(dlq)
    c = Client(args)
    d.conn.set_listener("poke", Poke(c.col))
    c.subscribe(dest, ack="client-individual")
    out["deliveries"] = []
    out["dead_letters"] = []
    try:
        p = Client(args)
        p.send(dest, "poison", headers={"x-app": "kept", "content-type": "text/plain"})
        p.disconnect()
        handled, last_nack = 0, None
        while handled < 10:
            c.col.wait(lambda col: len(col.messages) > handled or d.col.messages, c.timeout,
                       "a redelivery or the dead letter")
            with c.col.cond:
                fresh = c.col.messages[handled:]
            with d.col.cond:
                dead = bool(d.col.messages)
            for h, b in fresh:
                rec = full_record(h, b)
                rec["since_nack_ms"] = None if last_nack is None else (time.monotonic() - last_nack) * 1000
                out["deliveries"].append(rec)
                handled += 1
                if not dead:
                    last_nack = time.monotonic()
                    c.nack(h)
            if dead:
                break
        # Barrier: anything queued to the subscriber before its DISCONNECT receipt arrives.
        c.disconnect()
        out["deliveries_total"] = len(c.col.messages)
        d.disconnect()
    finally:
        out["dead_letters"] = [full_record(h, b) for h, b in d.col.messages]


def sc_prefetch(args, out):
    """Queues args["count"] messages, then subscribes with ack args["ack"] and prefetch-count
    args["prefetch"] and acknowledges nothing: reports how many arrived and the queue's
    monitor counts; then acknowledges the first args["ack_n"] (cumulatively in client mode)
    and reports again."""
    dest, n, prefetch, ack_n = args["dest"], args["count"], args["prefetch"], args["ack_n"]
    mode = args.get("ack", "client")
    p = Client(args)
    for i in range(n):
        p.send(dest, "pf-%d" % i)
    p.disconnect()
    c = Client(args)
    out["received"] = []
    try:
        c.subscribe(dest, ack=mode, headers={"prefetch-count": str(prefetch)})
        c.col.wait(lambda col: len(col.messages) >= prefetch, c.timeout, "%d deliveries" % prefetch)
        out["monitor_first"] = poll_monitor(args, dest, lambda q: q["delivering"] >= prefetch,
                                            c.timeout, "delivering >= %d" % prefetch)
        c.send("/topic/prefetch-barrier", "barrier")  # a round trip on the subscriber's connection
        out["received_first"] = len(c.col.messages)
        with c.col.cond:
            held = [h for h, _ in c.col.messages]
        if mode == "client":
            c.ack(held[ack_n - 1])
        else:
            for h in held[:ack_n]:
                c.ack(h)
        c.col.wait(lambda col: len(col.messages) >= prefetch + ack_n, c.timeout,
                   "%d deliveries after acknowledging %d" % (prefetch + ack_n, ack_n))
        out["monitor_second"] = poll_monitor(
            args, dest, lambda q: q["acked"] >= ack_n and q["delivering"] >= prefetch,
            c.timeout, "acked >= %d and delivering >= %d" % (ack_n, prefetch))
        c.send("/topic/prefetch-barrier", "barrier")
        out["received_second"] = len(c.col.messages)
        c.disconnect()
    finally:
        out["received"] = c.bodies()


def sc_schedule(args, out):
    """Sends, to a queue with one auto-ack subscriber: "delayed" (delay header), "expired"
    (expires in the past), "future" (expires far ahead), "plain", then after "delayed" has
    arrived "after". Reports arrival order and times (ms after the delayed SEND was written)
    and the queue's monitor counts just after the delayed SEND and at the end."""
    dest, delay = args["dest"], args["delay_ms"]
    c = Client(args)
    arrivals = Arrivals()
    c.conn.set_listener("arrivals", arrivals)
    c.subscribe(dest)
    p = Client(args)
    out["received"] = []
    try:
        t0 = time.monotonic()
        p.send(dest, "delayed", headers={"delay": str(delay)})
        out["monitor_after_delayed_send"] = monitor_queue(args, dest)
        now_ms = int(time.time() * 1000)
        p.send(dest, "expired", headers={"expires": str(now_ms - 60000)})
        p.send(dest, "future", headers={"expires": str(now_ms + 600000)})
        p.send(dest, "plain")
        c.col.wait(lambda col: "delayed" in col.bodies_unlocked(), c.timeout, "the delayed message")
        p.send(dest, "after")
        c.col.wait(lambda col: "after" in col.bodies_unlocked(), c.timeout, "the message sent after it")
        out["monitor_end"] = poll_monitor(args, dest, lambda q: q["size"] == 0, c.timeout, "an empty queue")
        p.disconnect()
        c.disconnect()
        out["future_expires"] = str(now_ms + 600000)
    finally:
        recs = []
        for h, b in c.col.messages:
            r = full_record(h, b)
            at = arrivals.at.get(r["body"])
            r["at_ms"] = None if at is None else (at - t0) * 1000
            recs.append(r)
        out["received"] = recs


def sc_ring_slow(args, out):
    """A producer sends args["count"] messages (each with a receipt) to the ring queue
    args["dest"] while one client-individual subscriber with prefetch-count args["prefetch"]
    (default 1) acknowledges
    each message args["ack_delay_ms"] after it arrived. A poller samples the queue's monitor
    counts throughout and records every sample where size > ring_size + delivering. Reports
    the bodies received, in order, and the samples' summary."""
    dest, n, ring = args["dest"], args["count"], args["ring_size"]
    ack_delay = args["ack_delay_ms"] / 1000.0
    c = Client(args)
    c.subscribe(dest, ack="client-individual", headers={"prefetch-count": str(args.get("prefetch", 1))})
    stop = threading.Event()
    stats = {"samples": 0, "max_size": 0, "max_delivering": 0, "violations": [], "poll_errors": []}

    def poller():
        while not stop.is_set():
            try:
                q = monitor_queue(args, dest)
            except Exception as e:  # noqa: BLE001 - reported
                stats["poll_errors"].append(str(e))
                continue
            if q is not None:
                stats["samples"] += 1
                stats["max_size"] = max(stats["max_size"], q["size"])
                stats["max_delivering"] = max(stats["max_delivering"], q["delivering"])
                if q["size"] > ring + q["delivering"] and len(stats["violations"]) < 20:
                    stats["violations"].append({k: q[k] for k in ("size", "delivering", "scheduled", "ringSize")})
            stop.wait(0.002)

    def acker():
        acked = 0
        while not stop.is_set():
            with c.col.cond:
                if len(c.col.messages) <= acked:
                    c.col.cond.wait(0.05)
                    continue
                h = c.col.messages[acked][0]
            stop.wait(ack_delay)
            c.ack(h)
            acked += 1

    threads = [threading.Thread(target=poller, daemon=True), threading.Thread(target=acker, daemon=True)]
    for th in threads:
        th.start()
    p = Client(args)
    last = "m-%d" % (n - 1)
    try:
        t0 = time.monotonic()
        for i in range(n):
            p.send(dest, "m-%d" % i)
        out["produce_ms"] = (time.monotonic() - t0) * 1000
        out["samples_while_producing"] = stats["samples"]
        out["received_while_producing"] = len(c.col.messages)
        p.disconnect()
        if args.get("prefetch", 1) == 1:
            c.col.wait(lambda col: last in col.bodies_unlocked(), c.timeout, last)
        out["monitor_end"] = poll_monitor(args, dest, lambda q: q["size"] == 0, c.timeout, "an empty queue")
        stop.set()
        for th in threads:
            th.join(5)
        c.disconnect()
    finally:
        stop.set()
        out["received"] = c.bodies()
        out["stats"] = stats


class Responder:
    """One request/response responder connection (sc_rpc_serve): a worker thread answers
    its requests one at a time, in arrival order."""

    def __init__(self, args, ch, index, stop):
        self.args, self.ch, self.stop = args, ch, stop
        self.name = "%s#%d" % (ch["dest"], index) + ("@" + ch["group"] if ch.get("group") else "")
        self.c = Client(args)
        self.c.subscribe(ch["dest"], headers={"group": ch["group"]} if ch.get("group") else None)
        self.handled = []
        self.errors = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            with self.c.col.cond:
                if len(self.c.col.messages) <= len(self.handled):
                    self.c.col.cond.wait(0.05)
                    continue
                h, body = self.c.col.messages[len(self.handled)]
            self.handled.append(full_record(h, body))
            try:
                self.answer(h, text(body))
            except Exception as e:  # noqa: BLE001 - reported
                self.errors.append("%s: %s" % (type(e).__name__, e))

    def answer(self, h, body):
        ch = self.ch
        behaviour = ch.get("behaviour", "answer")
        if behaviour == "ignore":
            return
        if behaviour == "late":
            self.stop.wait(ch["delay_ms"] / 1000.0)
        reply = {"correlation-id": h.get("correlation-id", ""), "responder": self.name}
        if behaviour == "spy":
            reply["spy-result"] = self.spy(h.get("reply-to", ""))
            # A response nobody asked for: dropped; the real answer after it is the barrier.
            self.c.send(h["reply-to"], "", headers={"correlation-id": "unknown-1", "executed": "true"})
        if ch.get("kind", "command") == "query":
            reply["content-type"] = "text/plain"
            self.c.send(h["reply-to"], "answer:" + body, headers=reply)
        else:
            reply["executed"] = "true"
            self.c.send(h["reply-to"], "", headers=reply)

    def spy(self, reply_to):
        """Another connection tries to SUBSCRIBE to the requester's reply-to."""
        s = Client(self.args)
        rid = s.rid("spy")
        s.conn.subscribe(reply_to, "1", headers={"receipt": rid})
        s.col.wait(lambda col: col.errors or rid in col.receipts, s.timeout, "the spy's SUBSCRIBE")
        with s.col.cond:
            if rid in s.col.receipts:
                result = "subscribed"
            else:
                result = "ERROR " + s.col.errors[0]["headers"].get("message", "")
        if result == "subscribed":
            s.disconnect()
        else:  # the broker closes the connection after its ERROR
            s.col.wait(lambda col: col.disconnected, s.timeout, "the spy's connection to close")
        return result


def sc_rpc_serve(args, out):
    """Responders for args["channels"] ([{dest, responders, kind: command|query, behaviour:
    answer|ignore|late|spy, delay_ms}]): prints {"ready": true} once every responder has
    subscribed, serves until stdin closes, then reports what each responder handled."""
    stop = threading.Event()
    rs = []
    try:
        for ch in args["channels"]:
            for i in range(ch.get("responders", 1)):
                rs.append(Responder(args, ch, i, stop))
        print(json.dumps({"ready": True}), flush=True)
        sys.stdin.read()
    finally:
        stop.set()
        for r in rs:
            r.thread.join(5)
        out["handled"] = {r.name: r.handled for r in rs}
        out["errors"] = [e for r in rs for e in r.errors] + [
            e["headers"].get("message", "") for r in rs for e in r.c.col.errors]


class CorrelationArrivals(stomp.ConnectionListener):
    """Records when the first MESSAGE of each correlation-id arrived (time.monotonic())."""

    def __init__(self):
        self.at = {}

    def on_message(self, frame):
        self.at.setdefault(frame.headers.get("correlation-id"), time.monotonic())


def sc_rpc_request(args, out):
    """The requester's side of every request/response case, against rpc_serve (of either
    client script; channel names in args). Responses are matched by correlation-id and
    reported with all their headers; each request with its RECEIPT's headers and the time to
    its first response."""
    a = Client(args)
    rf = ReceiptFrames(a.col)
    a.conn.set_listener("receipt-frames", rf)
    arrivals = CorrelationArrivals()
    a.conn.set_listener("arrivals", arrivals)
    out["session"] = a.col.connected.get("session")
    out["requests"] = []
    sent = {}
    reply = "/temp-queue/replies"
    a.subscribe(reply)
    a.subscribe(args["reply_queue"])
    b = None

    def request(dest, body, corr=None, timeout_ms=None, reply_to=reply, conn=a, headers=None):
        h = dict(headers or {})
        h["reply-to"] = reply_to
        if corr is not None:
            h["correlation-id"] = corr
        if timeout_ms is not None:
            h["timeout"] = str(timeout_ms)
        rid = conn.rid("req")
        h["receipt"] = rid
        t = time.monotonic()
        conn.conn.send(dest, body, headers=h)
        conn.col.wait_receipt(rid, conn.timeout)
        if conn is a:  # only a's RECEIPT frames are kept (by a listener that may run after Collector's)
            a.col.wait(lambda col: rid in rf.frames, a.timeout, "RECEIPT frame " + rid)
        rec = rf.frames.get(rid, {}) if conn is a else None
        sent[corr or (rec or {}).get("correlation-id")] = t
        out["requests"].append({"dest": dest, "correlation_id": corr, "receipt": rec})
        return rec

    def wait_for(corr, conn=a):
        conn.col.wait(lambda col: any(h.get("correlation-id") == corr for h, _ in col.messages),
                      conn.timeout, "a response with correlation-id %s" % corr)

    try:
        # Round trips: a command, a query, a command without correlation-id, a reply-to queue.
        request(args["command"], "do-it", corr="rt-cmd", timeout_ms=5000)
        wait_for("rt-cmd")
        request(args["query"], "what", corr="rt-query", timeout_ms=5000)
        wait_for("rt-query")
        gen = request(args["command"], "no-corr", timeout_ms=5000).get("correlation-id")
        out["generated_correlation_id"] = gen
        if gen:
            wait_for(gen)
        request(args["command"], "to-queue", corr="rt-queue", timeout_ms=5000, reply_to=args["reply_queue"])
        wait_for("rt-queue")
        # Load balancing over the responders of one channel.
        for i in range(args["balanced_count"]):
            request(args["balanced"], "lb-%d" % i, corr="lb-%d" % i, timeout_ms=5000)
        for i in range(args["balanced_count"]):
            wait_for("lb-%d" % i)
        # No responder, and a responder that never answers.
        request(args["nobody"], "anyone?", corr="nobody-1", timeout_ms=5000)
        wait_for("nobody-1")
        request(args["silent"], "hello?", corr="timeout-1", timeout_ms=args["short_timeout_ms"])
        wait_for("timeout-1")
        # A late response: the responder answers late-1 after its timeout, then late-2 (same
        # responder, in order); once late-2's answer is here, late-1's would have been too.
        request(args["slow"], "late", corr="late-1", timeout_ms=args["short_timeout_ms"])
        wait_for("late-1")
        request(args["slow"], "in-time", corr="late-2", timeout_ms=5000)
        wait_for("late-2")
        # Temp-queue privacy: the responder has another connection SUBSCRIBE to our reply-to.
        request(args["spy"], "spy-on-me", corr="spy-1", timeout_ms=10000)
        wait_for("spy-1")
        # Requests reach only responders of their group.
        for i in range(args["grouped_count"]):
            request(args["grouped"], "grp", corr="grp-market-%d" % i, timeout_ms=5000, headers={"group": "market"})
            request(args["grouped"], "grp", corr="grp-default-%d" % i, timeout_ms=5000)
        for i in range(args["grouped_count"]):
            wait_for("grp-market-%d" % i)
            wait_for("grp-default-%d" % i)
        # Another requester using the same temp-queue name gets its own private queue.
        b = Client(args)
        b.subscribe(reply)
        request(args["command"], "from-b", corr="iso-b", timeout_ms=5000, conn=b)
        wait_for("iso-b", conn=b)
        b.disconnect()
        a.disconnect()  # barrier: everything queued to us before it has arrived
    finally:
        out["responses"] = [full_record(h, body) for h, body in a.col.messages]
        out["b_responses"] = [full_record(h, body) for h, body in (b.col.messages if b else [])]
        out["errors"] = [e["headers"].get("message", "") for e in a.col.errors]
        out["response_ms"] = {k: (arrivals.at[k] - t) * 1000 for k, t in sent.items() if k in arrivals.at}


def sc_session(args, out):
    """Runs commands read from stdin, one JSON object a line, and answers each with one JSON
    line ({"error": ...} when it failed), so a Go test can drive python3-stomp connections
    step by step while it runs the titan CLI in between. Commands (conn names a connection):
      {"op": "connect", "conn"}
      {"op": "subscribe", "conn", "dest", "ack", "headers"}     → {"id"}
      {"op": "unsubscribe", "conn", "id"}
      {"op": "try_subscribe", "conn", "dest", "ack", "headers"} → state, once its RECEIPT or an ERROR came
      {"op": "send", "conn", "dest", "body", "pad", "headers", "wait"} → {"receipt"} (wait: for it;
                                                                 pad: that many "h" appended to body)
      {"op": "wait_receipt", "conn", "receipt", "timeout"}      → {"ok": true} or {"error"}
      {"op": "wait_reply", "conn", "receipt", "timeout"}        → state, once the RECEIPT or an ERROR came
      {"op": "wait_closed", "conn"}                             → state, once the broker closed it
      {"op": "wait_messages", "conn", "count"}                  → {"messages"}
      {"op": "state", "conn"}                                   → {"messages", "receipts", "errors"}
      {"op": "ack"|"nack", "conn", "index"}
      {"op": "disconnect"|"kill", "conn"}
    "trunc": N on any command cuts the message bodies it answers with to N characters.
    When stdin closes, the final line is {"done": true}."""
    conns = {}
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        cmd = json.loads(line)
        res = {}
        try:
            op = cmd["op"]
            if op == "connect":
                conns[cmd["conn"]] = Client(args)
            else:
                c = conns[cmd["conn"]]
                if op == "subscribe":
                    res["id"] = c.subscribe(cmd["dest"], ack=cmd.get("ack", "auto"), headers=cmd.get("headers"))
                elif op == "try_subscribe":
                    sid, rid = str(len(c.subs) + 1), c.rid("sub")
                    h = dict(cmd.get("headers") or {})
                    h["receipt"] = rid
                    c.conn.subscribe(cmd["dest"], sid, ack=cmd.get("ack", "auto"), headers=h)
                    c.subs[sid] = cmd["dest"]
                    c.col.wait(lambda col: rid in col.receipts or col.errors, c.timeout, "RECEIPT %s or an ERROR" % rid)
                    res["id"] = sid
                elif op == "unsubscribe":
                    rid = c.rid("unsub")
                    c.conn.unsubscribe(cmd["id"], headers={"receipt": rid})
                    c.col.wait_receipt(rid, c.timeout)
                elif op == "send":
                    rid = c.rid("send")
                    h = dict(cmd.get("headers") or {})
                    h["receipt"] = rid
                    c.conn.send(cmd["dest"], cmd.get("body", "") + "h" * cmd.get("pad", 0), headers=h)
                    if cmd.get("wait", True):
                        c.col.wait_receipt(rid, c.timeout)
                    res["receipt"] = rid
                elif op == "wait_receipt":
                    c.col.wait_receipt(cmd["receipt"], cmd.get("timeout", c.timeout))
                    res["ok"] = True
                elif op == "wait_reply":
                    r = cmd["receipt"]
                    c.col.wait(lambda col: r in col.receipts or col.errors, cmd.get("timeout", c.timeout),
                               "RECEIPT %s or an ERROR" % r)
                elif op == "wait_closed":
                    c.col.wait(lambda col: col.disconnected, cmd.get("timeout", c.timeout), "the connection to close")
                elif op == "wait_messages":
                    n = cmd["count"]
                    c.col.wait(lambda col: len(col.messages) >= n, cmd.get("timeout", c.timeout), "%d messages" % n)
                elif op in ("ack", "nack"):
                    with c.col.cond:
                        h = c.col.messages[cmd["index"]][0]
                    (c.ack if op == "ack" else c.nack)(h)
                elif op == "disconnect":
                    c.disconnect()
                elif op == "kill":
                    c.kill()
                elif op != "state":
                    raise ValueError("unknown op %r" % op)
                if op in ("wait_messages", "state", "wait_reply", "wait_closed", "try_subscribe"):
                    with c.col.cond:
                        res["messages"] = [full_record(h, b) for h, b in c.col.messages]
                        if cmd.get("trunc"):
                            for r in res["messages"]:
                                r["body"] = r["body"][:cmd["trunc"]]
                        res["receipts"] = list(c.col.receipts)
                        res["errors"] = list(c.col.errors)
        except Exception as e:  # noqa: BLE001 - reported to the Go test
            res["error"] = "%s: %s" % (type(e).__name__, e)
        print(json.dumps(res), flush=True)
    out["done"] = True



# ---------------------------------------------------------------- cluster mode (issue 15)
# args["ports"] are the STOMP ports of three cluster nodes: the producer uses the first,
# consumers the others.


def node(args, i, **kw):
    a = dict(args)
    a["port"] = args["ports"][i]
    return Client(a, **kw)


def probe_until(prod, dest, subs, headers, timeout):
    """Sends probe messages to dest until every subscriber (a Client) has received one: a
    SUBSCRIBE on another node reaches the publisher's node asynchronously."""
    deadline = time.monotonic() + timeout
    n = 0
    while not all(any(b.startswith("probe-") for b in c.bodies()) for c in subs):
        if time.monotonic() > deadline:
            raise Timeout("subscription interest never reached the publishing node")
        prod.send(dest, "probe-%d" % n, headers=headers, receipt=False)
        n += 1
        time.sleep(0.05)


def real(bodies):
    return [b for b in bodies if not b.startswith("probe-")]


def sc_cluster_fanout(args, out):
    """Wildcard fan-out across nodes: node 1 and node 2 subscribe /topic/<p>.*.x and
    /topic/<p>.>, node 0 publishes count messages to /topic/<p>.a.x; both must get all."""
    p, n = args["prefix"], args["count"]
    b, c = node(args, 1), node(args, 2)
    b.subscribe("/topic/%s.*.x" % p)
    c.subscribe("/topic/%s.>" % p)
    a = node(args, 0)
    probe_until(a, "/topic/%s/a/x" % p, [b, c], {}, a.timeout)
    for i in range(n):
        a.send("/topic/%s/a/x" % p, "ev-%d" % i, receipt=False)
    a.send("/topic/%s/a/y" % p, "only-gt")  # matches c's > filter, not b's *.x
    for cl in (b, c):
        cl.col.wait(lambda col: len([x for x in col.bodies_unlocked() if x.startswith("ev-")]) >= n, cl.timeout, "the events")
    c.col.wait(lambda col: "only-gt" in col.bodies_unlocked(), c.timeout, "only-gt")
    a.send("/topic/%s/a/x" % p, "fence")
    b.col.wait(lambda col: "fence" in col.bodies_unlocked(), b.timeout, "fence")
    out["received"] = [real(b.bodies()), real(c.bodies())]


def sc_cluster_queue(args, out):
    """Queue across nodes: consumers on nodes 1 and 2 (client-individual, prefetch-count 1);
    node 1's consumer NACKs the first message it gets; node 0 sends count messages, each
    with a RECEIPT. Reports what each consumer acknowledged and the redelivery it saw."""
    dest, n = args["dest"], args["count"]
    cons = [node(args, 1), node(args, 2)]
    acked = [[], []]
    state = {"nacked": None, "redelivery": None}
    lock = threading.Lock()
    for i, cl in enumerate(cons):
        class L(stomp.ConnectionListener):
            def __init__(self, i, cl):
                self.i, self.cl = i, cl

            def on_message(self, frame):
                body = text(frame.body)
                with lock:
                    if self.i == 0 and state["nacked"] is None:
                        state["nacked"] = body
                        self.cl.conn.nack(frame.headers["ack"])
                        return
                    if body == state["nacked"] and state["redelivery"] is None:
                        state["redelivery"] = {"redelivered": frame.headers.get("redelivered"),
                                               "delivery-count": frame.headers.get("delivery-count"),
                                               "consumer": self.i}
                    acked[self.i].append(body)
                self.cl.conn.ack(frame.headers["ack"])
        cl.conn.set_listener("acker", L(i, cl))
        cl.subscribe(dest, ack="client-individual", headers={"prefetch-count": "1"})
    a = node(args, 0)
    for i in range(n):
        a.send(dest, "q-%d" % i)
    deadline = time.monotonic() + a.timeout
    while time.monotonic() < deadline:
        with lock:
            if len(acked[0]) + len(acked[1]) >= n:
                break
        time.sleep(0.02)
    with lock:
        out["acked"] = acked
        out["nacked"] = state["nacked"]
        out["redelivery"] = state["redelivery"]


def sc_cluster_dlq(args, out):
    """Dead-letter across nodes: node 1 NACKs every delivery of dest; node 2 subscribes to
    /queue/DLQ.<channel>; node 0 sends one message. Reports the deliveries node 1 saw and
    the dead letter's headers."""
    dest, dlq = args["dest"], args["dlq"]
    b, c = node(args, 1), node(args, 2)
    seen = []

    class Nacker(stomp.ConnectionListener):
        def on_message(self, frame):
            seen.append(frame.headers.get("delivery-count", "1"))
            b.conn.nack(frame.headers["ack"])
    b.conn.set_listener("nacker", Nacker())
    b.subscribe(dest, ack="client-individual")
    c.subscribe(dlq)
    a = node(args, 0)
    a.send(dest, "poison")
    c.col.wait(lambda col: "poison" in col.bodies_unlocked(), c.timeout, "the dead letter")
    with c.col.cond:
        h = c.col.messages[0][0]
    out["deliveries"] = seen
    out["dead_letter"] = {k: h.get(k) for k in ("dlq-reason", "dlq-delivery-count", "dlq-original-destination", "destination")}


def sc_cluster_groups(args, out):
    """Group isolation across nodes: node 1 in group g1 and node 2 in group g2 subscribe to
    the same topic and queue; node 0 sends one event and one queue message in g1, then a
    marker of each in g2. g2 must see only its markers."""
    t, q = args["topic"], args["queue"]
    b, c = node(args, 1), node(args, 2)
    b.subscribe(t, headers={"group": "g1"})
    b.subscribe(q, headers={"group": "g1"})
    c.subscribe(t, headers={"group": "g2"})
    c.subscribe(q, headers={"group": "g2"})
    a = node(args, 0)
    probe_until(a, t, [b], {"group": "g1"}, a.timeout)
    probe_until(a, t, [c], {"group": "g2"}, a.timeout)
    a.send(t, "ev-g1", headers={"group": "g1"})
    a.send(q, "q-g1", headers={"group": "g1"})
    a.send(t, "ev-g2-marker", headers={"group": "g2"})
    a.send(q, "q-g2-marker", headers={"group": "g2"})
    b.col.wait(lambda col: {"ev-g1", "q-g1"} <= set(col.bodies_unlocked()), b.timeout, "g1's messages")
    c.col.wait(lambda col: {"ev-g2-marker", "q-g2-marker"} <= set(col.bodies_unlocked()), c.timeout, "g2's markers")
    out["g1"] = real(b.bodies())
    out["g2"] = real(c.bodies())


def sc_cluster_delay(args, out):
    """Scheduled queue message across nodes: node 1 subscribes to dest; node 0 sends one
    message with a delay header (ms) and one without. Reports when each arrived, in ms after
    the delayed SEND was written."""
    dest, delay = args["dest"], args["delay"]
    b = node(args, 1)
    b.subscribe(dest)
    a = node(args, 0)
    arrived = {}

    class Clock(stomp.ConnectionListener):
        def on_message(self, frame):
            arrived[text(frame.body)] = time.monotonic()
    b.conn.set_listener("clock", Clock())
    t0 = time.monotonic()
    a.send(dest, "later", headers={"delay": str(delay)})
    a.send(dest, "now")
    b.col.wait(lambda col: {"now", "later"} <= set(col.bodies_unlocked()), b.timeout, "both messages")
    out["order"] = b.bodies()
    out["later_ms"] = int((arrived["later"] - t0) * 1000)
    out["now_ms"] = int((arrived["now"] - t0) * 1000)


def sc_cluster_store(args, out):
    """Events-store across nodes: node 0 appends e1..e5 to dest; subscribers on nodes 1 and 2
    read it from each start position; a durable subscription on node 1 acknowledges e1, e2
    and disconnects, and the same durable-name on node 2 resumes at e3. Reports the bodies
    (and sequences) each read got."""
    dest = args["dest"]
    a = node(args, 0)
    for i in range(1, 6):
        a.send(dest, "e%d" % i)
    res = {}

    def read(i, start, want, extra=None, ack="auto"):
        cl = node(args, i)
        hdrs = {"start-position": start}
        hdrs.update(extra or {})
        cl.subscribe(dest, ack=ack, headers=hdrs)
        cl.col.wait(lambda col: len(col.messages) >= want, cl.timeout, "%d messages from %s" % (want, start))
        return cl

    first = read(1, "first", 5)
    with first.col.cond:
        seqs = [h.get("sequence") for h, _ in first.col.messages]
    res["first"] = first.bodies()
    res["sequences"] = seqs
    res["last"] = read(2, "last", 1).bodies()
    res["seq3"] = read(1, seqs[2], 3).bodies()
    res["delta"] = read(2, "delta:1h", 5).bodies()
    res["time"] = read(1, "time:2000-01-01T00:00:00Z", 5).bodies()
    new = read(2, "new", 0)
    probe = 0
    while not new.bodies():
        probe += 1
        a.send(dest, "n%d" % probe)
        new.col.wait(lambda col: len(col.messages) >= 1, new.timeout, "a new message")
    res["new"] = new.bodies()
    # durable: ack e1, e2 on node 1, disconnect, resume on node 2
    d1 = read(1, "first", 2, {"durable-name": "dur1", "prefetch-count": "2"}, ack="client-individual")
    with d1.col.cond:
        msgs = list(d1.col.messages[:2])
    for h, _ in msgs:
        d1.ack(h)
    d1.disconnect()
    d2 = read(2, "first", len(new.bodies()) + 3, {"durable-name": "dur1"}, ack="client-individual")
    res["durable_first"] = [b for _, b in msgs]
    res["durable_resumed"] = d2.bodies()
    out.update(res)

def sc_flow(args, out):
    """Flow control (issue 11): `subscribers` reading clients on `dest`; a producer sends one
    message per entry of `sizes` (bytes), each body starting "m<i>:"; with `burst` it sends
    them all before waiting for the RECEIPTs, else it waits for each. Reports, per
    subscriber, "m<i>:<length>" for every message received, and the receipts."""
    dest, n, sizes = args["dest"], args["subscribers"], args["sizes"]
    subs = [Client(args) for _ in range(n)]
    for s in subs:
        s.subscribe(dest)
    p = Client(args)
    rids = []
    t0 = time.monotonic()
    try:
        for i, size in enumerate(sizes):
            tag = "m%d:" % i
            body = tag + "x" * (size - len(tag))
            if args.get("burst"):
                rid = p.rid("send")
                rids.append(rid)
                p.conn.send(dest, body, headers={"receipt": rid})
            else:
                p.send(dest, body)
        for rid in rids:
            p.col.wait_receipt(rid, p.timeout)
        out["receipts"] = len(rids) if args.get("burst") else len(sizes)
        for s in subs:
            s.col.wait(lambda col: len(col.messages) >= len(sizes), s.timeout, "%d messages" % len(sizes))
        out["seconds"] = time.monotonic() - t0
        p.disconnect()
        for s in subs:
            s.disconnect()
    finally:
        got = []
        for s in subs:
            with s.col.cond:
                got.append(["%s:%d" % (text(b).split(":", 1)[0], len(b)) for _, b in s.col.messages])
        out["received"] = got
        out["errors"] = [e for s in subs for e in s.col.errors] + p.col.errors


def sc_priority(args, out):
    """Sends args["messages"] ([body, priority or null] pairs) to a queue nobody consumes,
    each receipted, then consumes them all: out["received"] is the delivery order. A SEND
    with priority args["bad"] then reports its ERROR in out["invalid"]."""
    dest = args["dest"]
    p = Client(args)
    for body, prio in args["messages"]:
        p.send(dest, body, {"priority": prio} if prio is not None else None)
    p.disconnect()
    c = Client(args)
    try:
        c.subscribe(dest)
        c.col.wait(lambda col: len(col.messages) >= len(args["messages"]), c.timeout, "every message")
        c.disconnect()
    finally:
        out["received"] = c.bodies()
    bad = Client(args)
    bad.send(dest, "bad", {"priority": args["bad"]}, receipt=False)
    bad.col.wait(lambda col: len(col.errors) >= 1, bad.timeout, "the ERROR for an invalid priority")
    out["invalid"] = [{"message": e["headers"].get("message"), "body": e["body"]} for e in bad.col.errors]


SCENARIOS = {name[3:]: fn for name, fn in globals().items() if name.startswith("sc_")}


def run_scenarios(scenarios, prog):
    """Runs the scenario sys.argv[1] of scenarios with the JSON arguments sys.argv[2] and prints
    its result as one JSON line (an exception becomes its "error"); prog names the script in
    the usage line. Every scenario script of this folder ends in it."""
    if len(sys.argv) != 3 or sys.argv[1] not in scenarios:
        sys.stderr.write("usage: %s {%s} JSON\n" % (prog, "|".join(sorted(scenarios))))
        return 2
    args = json.loads(sys.argv[2])
    out = {}
    try:
        scenarios[sys.argv[1]](args, out)
    except Exception as e:  # noqa: BLE001 - reported to the Go test
        out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out), flush=True)
    # stomp.py's receiver and heart-beat threads can outlive a dropped connection: do not
    # wait for them.
    os._exit(0)


def main():
    return run_scenarios(SCENARIOS, "pyclient.py")

if __name__ == "__main__":
    sys.exit(main())
