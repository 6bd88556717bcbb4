// Scenarios driven through @stomp/stompjs (over TCP with @stomp/tcp-wrapper) for Titan's
// end-to-end tests.
//
// Usage: node jsclient.mjs SCENARIO 'JSON-ARGS'
//
// Every scenario prints what it observed as one JSON object on stdout (the Go test asserts on
// it) and exits 0; a scenario that could not run to the end (a wait timed out, a connection
// failed) still prints what it saw, with an "error" field. Scripts never assert: they observe.
// Waits are bounded by the "timeout" argument (seconds).

import { Client, Versions } from '@stomp/stompjs';
import { TCPWrapper } from '@stomp/tcp-wrapper';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const toHex = (u8) => Buffer.from(u8).toString('hex');

let counter = 0;
const rid = (prefix) => `${prefix}-${++counter}`;

// Conn is one STOMP connection: a stompjs Client plus everything it received.
class Conn {
  constructor(args, opts = {}) {
    this.args = args;
    this.version = opts.version || args.version || '1.2';
    this.timeoutMs = (args.timeout || 10) * 1000;
    this.messages = []; // IMessage, in arrival order
    this.receipts = []; // receipt-id values, in arrival order
    this.errors = []; // ERROR frames as {headers, body}
    this.heartbeats = 0;
    this.heartbeatLost = 0;
    this.closed = false;
    this.connected = null;
    this.waiters = new Set();
    this.subCount = 0;
    const hb = opts.heartbeat || 0;
    this.client = new Client({
      webSocketFactory: () => new TCPWrapper(args.host, args.port),
      stompVersions: new Versions([this.version]),
      connectHeaders: { host: 'localhost' },
      reconnectDelay: 0,
      connectionTimeout: this.timeoutMs,
      heartbeatIncoming: hb,
      heartbeatOutgoing: hb,
      discardWebsocketOnCommFailure: !!opts.discard,
      debug: () => {},
      onConnect: (frame) => { this.connected = frame.headers; this.notify(); },
      onStompError: (frame) => {
        this.errors.push({ headers: frame.headers, body: frame.body });
        this.notify();
      },
      onUnhandledMessage: (m) => { this.messages.push(m); this.notify(); },
      onUnhandledReceipt: (frame) => { this.receipts.push(frame.headers['receipt-id']); this.notify(); },
      onDisconnect: (frame) => { this.receipts.push(frame.headers['receipt-id']); this.notify(); },
      onHeartbeatReceived: () => { this.heartbeats++; this.notify(); },
      onHeartbeatLost: () => { this.heartbeatLost++; this.notify(); },
      onWebSocketClose: () => { this.closed = true; this.notify(); },
    });
  }

  notify() {
    for (const w of this.waiters) {
      if (w.pred()) {
        this.waiters.delete(w);
        clearTimeout(w.timer);
        w.resolve();
      }
    }
  }

  // waitFor resolves once pred() holds, or rejects after the timeout naming what it awaited.
  waitFor(pred, what) {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = { pred, resolve };
      w.timer = setTimeout(() => {
        this.waiters.delete(w);
        reject(new Error(`timed out after ${this.timeoutMs} ms waiting for ${what}`));
      }, this.timeoutMs);
      this.waiters.add(w);
    });
  }

  waitReceipt(id) {
    return this.waitFor(() => this.receipts.includes(id), `RECEIPT ${id}`);
  }

  async open() {
    this.client.activate();
    await this.waitFor(() => this.connected !== null || this.closed, 'CONNECTED');
    if (this.connected === null) throw new Error('connection closed before CONNECTED');
    return this;
  }

  async subscribe(dest, ack = 'auto', headers = {}) {
    const id = rid('sub');
    const onMessage = (m) => { this.messages.push(m); this.notify(); };
    this.client.subscribe(dest, onMessage, { ...headers, id: `${++this.subCount}`, ack, receipt: id });
    await this.waitReceipt(id);
  }

  async send(dest, body, headers = {}, receipt = true) {
    const h = { ...headers };
    let id;
    if (receipt) {
      id = rid('send');
      h.receipt = id;
    }
    if (body instanceof Uint8Array) {
      this.client.publish({ destination: dest, binaryBody: body, headers: h });
    } else {
      this.client.publish({ destination: dest, body, headers: h });
    }
    if (id) await this.waitReceipt(id);
  }

  // disconnect sends DISCONNECT with a receipt and waits for it. The broker writes the RECEIPT
  // after every frame queued to this connection before it, so this is a delivery barrier.
  async disconnect() {
    const id = rid('disc');
    this.client.configure({ disconnectHeaders: { receipt: id } });
    const done = this.client.deactivate();
    await this.waitReceipt(id);
    await done;
    return id;
  }

  // kill drops the TCP connection without DISCONNECT (stompjs's forceDisconnect; with
  // discardWebsocketOnCommFailure the tcp-wrapper destroys the socket at once).
  kill() {
    this.client.forceDisconnect();
  }

  bodies() {
    return this.messages.map((m) => m.body);
  }
}

async function open(args, opts) {
  return new Conn(args, opts).open();
}

function record(m) {
  const h = m.headers;
  return {
    body: m.body,
    message_id: h['message-id'] ?? null,
    ack: h.ack ?? null,
    subscription: h.subscription ?? null,
    destination: h.destination ?? null,
    redelivered: h.redelivered ?? null,
    group: h.group ?? null,
    content_length: h['content-length'] ?? null,
  };
}

// ---------------------------------------------------------------- scenarios

const scenarios = {
  async connect(args, out) {
    const c = await open(args);
    out.version = c.connected.version ?? null;
    out.server = c.connected.server ?? null;
    out.session = c.connected.session ?? null;
    await c.disconnect();
  },

  async binary(args, out) {
    const c = await open(args);
    await c.subscribe(args.dest);
    const body = new Uint8Array(256);
    for (let i = 0; i < 256; i++) body[i] = i;
    out.sent_hex = toHex(body);
    await c.send(args.dest, body);
    await c.waitFor(() => c.messages.length >= 1, 'the MESSAGE');
    out.received_hex = toHex(c.messages[0].binaryBody);
    out.content_length = c.messages[0].headers['content-length'] ?? null;
    await c.disconnect();
  },

  async receipts(args, out) {
    const c = await open(args);
    out.receipts = c.receipts; // filled in as receipts arrive
    c.client.publish({ destination: args.dest, body: 'receipted', headers: { receipt: 'r-send' } });
    await c.waitReceipt('r-send');
    c.client.subscribe(args.dest, () => {}, { id: '1', receipt: 'r-sub' });
    await c.waitReceipt('r-sub');
    c.client.configure({ disconnectHeaders: { receipt: 'r-disc' } });
    const done = c.client.deactivate();
    await c.waitReceipt('r-disc');
    await done;
  },

  async fanout(args, out) {
    const subs = [];
    for (let i = 0; i < args.subscribers; i++) subs.push(await open(args));
    for (const s of subs) await s.subscribe(args.dest);
    try {
      const p = await open(args);
      for (let i = 0; i < args.count; i++) await p.send(args.dest, `fan-${i}`);
      await p.disconnect();
      for (const s of subs) await s.waitFor(() => s.messages.length >= args.count, `${args.count} messages`);
      for (const s of subs) await s.disconnect();
    } finally {
      out.received = subs.map((s) => s.bodies());
    }
  },

  async queue(args, out) {
    const subs = [];
    for (let i = 0; i < args.subscribers; i++) subs.push(await open(args));
    for (const s of subs) await s.subscribe(args.dest);
    try {
      const p = await open(args);
      for (let i = 0; i < args.count; i++) await p.send(args.dest, `q-${i}`);
      await p.disconnect();
      const total = () => subs.reduce((n, s) => n + s.messages.length, 0);
      await Promise.all(subs.map((s) => s.waitFor(() => total() >= args.count, `${args.count} messages over all subscribers`)));
      for (const s of subs) await s.disconnect();
    } finally {
      out.received = subs.map((s) => s.bodies());
    }
  },

  async nack(args, out) {
    const c = await open(args);
    await c.subscribe(args.dest, 'client-individual');
    try {
      await c.send(args.dest, 'nack-me');
      await c.waitFor(() => c.messages.length >= 1, 'the first delivery');
      c.messages[0].nack();
      await c.waitFor(() => c.messages.length >= 2, 'the redelivery after NACK');
      c.messages[1].ack();
      await c.disconnect();
    } finally {
      out.deliveries = c.messages.map(record);
    }
  },

  async abrupt(args, out) {
    const a = await open(args, { discard: true });
    await a.subscribe(args.dest, 'client');
    const p = await open(args);
    for (let i = 0; i < args.count; i++) await p.send(args.dest, `abrupt-${i}`);
    await p.disconnect();
    let b = null;
    try {
      await a.waitFor(() => a.messages.length >= args.count, `A to receive ${args.count}`);
      b = await open(args);
      await b.subscribe(args.dest, 'client');
      out.b_before_kill = b.messages.length;
      a.kill();
      await b.waitFor(() => b.messages.length >= args.count, `B to receive the ${args.count} redeliveries`);
      for (const m of b.messages) m.ack();
      await b.disconnect();
    } finally {
      out.a = a.bodies();
      out.b = b ? b.messages.map(record) : [];
    }
  },

  async groups(args, out) {
    const market = await open(args);
    await market.subscribe(args.dest, 'auto', { group: 'market' });
    const def = await open(args);
    await def.subscribe(args.dest);
    try {
      const p = await open(args);
      for (let i = 0; i < args.count; i++) {
        await p.send(args.dest, `market-${i}`, { group: 'market' });
        await p.send(args.dest, `default-${i}`);
      }
      await p.disconnect();
      await market.waitFor(() => market.messages.length >= args.count, 'market messages');
      await def.waitFor(() => def.messages.length >= args.count, 'default messages');
      await market.disconnect();
      await def.disconnect();
    } finally {
      out.market = market.messages.map(record);
      out.default = def.messages.map(record);
    }
  },

  async transaction(args, out) {
    const s = await open(args);
    await s.subscribe(args.dest);
    const p = await open(args);
    const has = (body) => () => s.bodies().includes(body);
    try {
      const tx = p.client.begin('tx-commit');
      p.client.publish({ destination: args.dest, body: 'tx-a1', headers: { transaction: tx.id } });
      p.client.publish({ destination: args.dest, body: 'tx-a2', headers: { transaction: tx.id } });
      // A fence sent outside the transaction: once it has arrived, anything the broker had
      // delivered at SEND time would have arrived before it.
      await p.send(args.dest, 'fence-1');
      await s.waitFor(has('fence-1'), 'fence-1');
      out.before_commit = s.bodies();
      tx.commit();
      await s.waitFor(() => has('tx-a1')() && has('tx-a2')(), 'the committed messages');
      const tx2 = p.client.begin('tx-abort');
      p.client.publish({ destination: args.dest, body: 'tx-b1', headers: { transaction: tx2.id } });
      tx2.abort();
      await p.send(args.dest, 'fence-2');
      await s.waitFor(has('fence-2'), 'fence-2');
      await p.disconnect();
      await s.disconnect();
    } finally {
      out.received = s.bodies();
      out.producer_errors = p.errors;
    }
  },

  async heartbeat(args, out) {
    const c = await open(args, { heartbeat: args.heartbeat_ms });
    out.heart_beat = c.connected['heart-beat'] ?? null;
    await c.subscribe(args.dest);
    const startHB = c.heartbeats;
    // The scenario itself: stay idle (no frames from us; stompjs's own pinger keeps beating)
    // for idle_ms.
    await sleep(args.idle_ms);
    out.server_heartbeats_while_idle = c.heartbeats - startHB;
    out.disconnected_while_idle = c.closed;
    out.heartbeat_timeouts = c.heartbeatLost;
    try {
      await c.send(args.dest, 'after-idle');
      await c.waitFor(() => c.messages.length >= 1, 'the MESSAGE after idling');
      out.received = c.bodies();
      await c.disconnect();
    } finally {
      out.errors = c.errors;
    }
  },
};

async function main() {
  const [name, json] = process.argv.slice(2);
  if (!scenarios[name] || json === undefined) {
    process.stderr.write(`usage: node jsclient.mjs {${Object.keys(scenarios).join('|')}} JSON\n`);
    process.exit(2);
  }
  const args = JSON.parse(json);
  const out = {};
  try {
    await scenarios[name](args, out);
  } catch (e) {
    out.error = `${e && e.name}: ${e && e.message}`;
  }
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}

main();
