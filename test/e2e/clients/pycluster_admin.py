#!/usr/bin/python3
"""Cluster-mode operator scenarios (titan queue redrive and friends) driven through
stomp.py, on top of pyclient.py's helpers.

Usage: /usr/bin/python3 pycluster_admin.py SCENARIO 'JSON-ARGS'

Same contract as pyclient.py: one JSON object on stdout, an "error" field when a wait timed
out; the script observes, the Go test asserts. args["ports"] are the three nodes' STOMP ports.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import stomp  # noqa: E402

from pyclient import node, text, run_scenarios  # noqa: E402


def sc_dead_letter(args, out):
    """Node 1 NACKs every delivery of dest (client-individual); node 0 sends args["bodies"]
    (args["headers"] on each). With max-deliveries 1 each goes to the dead-letter queue at
    its first NACK. Disconnects (with a receipt: every NACK was handled) once node 1 saw
    every body. Reports the bodies node 1 saw, in order."""
    dest, bodies = args["dest"], args["bodies"]
    b = node(args, 1)
    seen = []

    class Nacker(stomp.ConnectionListener):
        def on_message(self, frame):
            seen.append(text(frame.body))
            b.conn.nack(frame.headers["ack"])

    b.conn.set_listener("nacker", Nacker())
    b.subscribe(dest, ack="client-individual")
    a = node(args, 0)
    for x in bodies:
        a.send(dest, x, headers=args.get("headers", {}))
    a.disconnect()
    try:
        b.col.wait(lambda col: set(bodies) <= set(col.bodies_unlocked()), b.timeout, "every message")
        b.disconnect()
    finally:
        out["seen"] = list(seen)
        out["errors"] = b.col.errors


SCENARIOS = {name[3:]: fn for name, fn in globals().items() if name.startswith("sc_")}


def main():
    return run_scenarios(SCENARIOS, "pycluster_admin.py")

if __name__ == "__main__":
    sys.exit(main())
