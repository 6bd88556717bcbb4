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
        self.conn.connect(wait=True)
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


SCENARIOS = {name[3:]: fn for name, fn in globals().items() if name.startswith("sc_")}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SCENARIOS:
        sys.stderr.write("usage: pyclient.py {%s} JSON\n" % "|".join(sorted(SCENARIOS)))
        return 2
    args = json.loads(sys.argv[2])
    out = {}
    try:
        SCENARIOS[sys.argv[1]](args, out)
    except Exception as e:  # noqa: BLE001 - reported to the Go test
        out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out), flush=True)
    # stomp.py's receiver and heart-beat threads can outlive a dropped connection: do not
    # wait for them.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
