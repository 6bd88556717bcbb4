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
import { Waiting } from './waiting.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const toHex = (u8) => Buffer.from(u8).toString('hex');

let counter = 0;
const rid = (prefix) => `${prefix}-${++counter}`;

// Conn is one STOMP connection: a stompjs Client plus everything it received.
class Conn extends Waiting {
  constructor(args, opts = {}) {
    super((args.timeout || 10) * 1000);
    this.args = args;
    this.version = opts.version || args.version || '1.2';
    this.messages = []; // IMessage, in arrival order
    this.receipts = []; // receipt-id values, in arrival order
    this.errors = []; // ERROR frames as {headers, body}
    this.heartbeats = 0;
    this.heartbeatLost = 0;
    this.closed = false;
    this.connected = null;
    this.subCount = 0;
    const hb = opts.heartbeat || 0;
    this.client = new Client({
      webSocketFactory: () => new TCPWrapper(args.host, args.port),
      stompVersions: new Versions([this.version]),
      connectHeaders: args.login === undefined ? { host: 'localhost' } : { host: 'localhost', login: args.login, passcode: args.passcode },
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
  // Cluster mode (issue 15): args.ports are three nodes' STOMP ports; the producer uses the
  // first, consumers the others. See pyclient.py's cluster_* scenarios for the contracts.
  async cluster_fanout(args, out) {
    const at = (i) => ({ ...args, port: args.ports[i] });
    const p = args.prefix;
    const n = args.count;
    const b = await open(at(1));
    const c = await open(at(2));
    await b.subscribe(`/topic/${p}.*.x`);
    await c.subscribe(`/topic/${p}.>`);
    const a = await open(at(0));
    const probed = () => [b, c].every((x) => x.bodies().some((y) => y.startsWith('probe-')));
    const deadline = Date.now() + a.timeoutMs;
    for (let i = 0; !probed(); i++) {
      if (Date.now() > deadline) throw new Error('subscription interest never reached the publishing node');
      await a.send(`/topic/${p}/a/x`, `probe-${i}`, {}, false);
      await sleep(50);
    }
    for (let i = 0; i < n; i++) await a.send(`/topic/${p}/a/x`, `ev-${i}`, {}, false);
    await a.send(`/topic/${p}/a/y`, 'only-gt');
    const evs = (x) => x.bodies().filter((y) => y.startsWith('ev-'));
    await b.waitFor(() => evs(b).length >= n, 'the events on node 1');
    await c.waitFor(() => evs(c).length >= n && c.bodies().includes('only-gt'), 'the events on node 2');
    await a.send(`/topic/${p}/a/x`, 'fence');
    await b.waitFor(() => b.bodies().includes('fence'), 'fence');
    const real = (x) => x.bodies().filter((y) => !y.startsWith('probe-'));
    out.received = [real(b), real(c)];
  },

  async cluster_queue(args, out) {
    const at = (i) => ({ ...args, port: args.ports[i] });
    const cons = [await open(at(1)), await open(at(2))];
    const acked = [[], []];
    const state = { nacked: null, redelivery: null };
    cons.forEach((cl, i) => {
      const id = `${++cl.subCount}`;
      cl.client.subscribe(args.dest, (m) => {
        if (i === 0 && state.nacked === null) {
          state.nacked = m.body;
          m.nack();
          return;
        }
        if (m.body === state.nacked && state.redelivery === null) {
          state.redelivery = { redelivered: m.headers.redelivered, 'delivery-count': m.headers['delivery-count'], consumer: i };
        }
        acked[i].push(m.body);
        m.ack();
        cons.forEach((x) => x.notify()); // the wait below is on cons[0]
      }, { id, ack: 'client-individual', 'prefetch-count': '1', receipt: `qsub-${i}` });
    });
    await cons[0].waitReceipt('qsub-0');
    await cons[1].waitReceipt('qsub-1');
    const a = await open(at(0));
    for (let i = 0; i < args.count; i++) await a.send(args.dest, `q-${i}`);
    const done = () => acked[0].length + acked[1].length >= args.count;
    await cons[0].waitFor(() => done(), 'every message acknowledged').catch(() => {});
    out.acked = acked;
    out.nacked = state.nacked;
    out.redelivery = state.redelivery;
  },
  // selector (issue 26): ActiveMQ-style JMS selectors. On args.topic, subscriber A selects
  // "color = 'red' AND size > 5" and B, on args.wildcard (which covers it), "color = 'blue'";
  // on args.queue a red-only consumer takes the red messages and the blue ones wait for a
  // blue consumer that subscribes later. Each subscriber's last message is a fence it
  // selects, sent last, so nothing it should not have had can still be on its way.
  async selector(args, out) {
    const a = await open(args);
    const b = await open(args);
    await a.subscribe(args.topic, 'auto', { selector: "color = 'red' AND size > 5" });
    await b.subscribe(args.wildcard, 'auto', { selector: "color = 'blue'" });
    const p = await open(args);
    const sends = [['red', '10', 'red-big'], ['red', '1', 'red-small'], ['blue', '10', 'blue-big'], ['green', '99', 'green'], [null, '10', 'no-color']];
    for (const [color, size, body] of sends) {
      const h = { size };
      if (color) h.color = color;
      await p.send(args.topic, body, h);
    }
    await p.send(args.topic, 'fence-a', { color: 'red', size: '6' });
    await p.send(args.topic, 'fence-b', { color: 'blue', size: '0' });
    await a.waitFor(() => a.bodies().includes('fence-a'), 'fence-a');
    await b.waitFor(() => b.bodies().includes('fence-b'), 'fence-b');
    out.topic_a = a.bodies();
    out.topic_b = b.bodies();

    const red = await open(args);
    await red.subscribe(args.queue, 'auto', { selector: "color = 'red'" });
    for (let i = 0; i < 6; i++) await p.send(args.queue, `${i % 2 ? 'blue' : 'red'}-${i}`, { color: i % 2 ? 'blue' : 'red' });
    await red.waitFor(() => red.messages.length >= 3, 'the three red messages');
    const blue = await open(args);
    await blue.subscribe(args.queue, 'auto', { selector: "color = 'blue'" });
    await blue.waitFor(() => blue.messages.length >= 3, 'the three blue messages left for the blue consumer');
    await p.send(args.queue, 'red-fence', { color: 'red' });
    await red.waitFor(() => red.bodies().includes('red-fence'), 'red-fence');
    out.queue_red = red.bodies();
    out.queue_blue = blue.bodies();

    const bad = await open(args);
    bad.client.subscribe(args.queue, () => {}, { id: '1', selector: "color = 'red' AND", receipt: 'bad-sub' });
    await bad.waitFor(() => bad.errors.length >= 1, 'the ERROR for an invalid selector');
    out.invalid = bad.errors.map((e) => ({ message: e.headers.message ?? null, body: e.body }));
    const store = await open(args);
    store.client.subscribe(args.store, () => {}, { id: '1', selector: "color = 'red'", receipt: 'store-sub' });
    await store.waitFor(() => store.errors.length >= 1, 'the ERROR for a selector on an events-store log');
    out.unsupported = store.errors.map((e) => ({ message: e.headers.message ?? null, body: e.body }));
    for (const c of [a, b, p, red, blue]) await c.disconnect();
  },

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

// ---------------------------------------------------------------- WebSocket scenarios
// (websocket_test.go): the same stompjs Client over a real WebSocket (npm's ws package, as
// Node 20 has no global WebSocket) instead of @stomp/tcp-wrapper.

// WSConn is a Conn whose transport is a WebSocket to args.url, offering args.protocols.
// stompjs sends a frame as a text WebSocket message unless its body is binary;
// args.force_binary sets its forceBinaryWSFrames, so every frame goes as a binary message.
class WSConn extends Conn {
  constructor(args, WebSocket, opts = {}) {
    super(args, opts);
    this.ws = null;
    this.client.configure({
      forceBinaryWSFrames: !!args.force_binary,
      webSocketFactory: () => {
        this.ws = new WebSocket(args.url, args.protocols || ['v12.stomp']);
        return this.ws;
      },
    });
  }
}

async function openWS(args) {
  const { default: WebSocket } = await import('ws');
  return new WSConn(args, WebSocket).open();
}

function wsRecord(m) {
  return {
    body_hex: toHex(m.binaryBody),
    destination: m.headers.destination ?? null,
    content_length: m.headers['content-length'] ?? null,
  };
}

// wsBodies turns args.bodies (text) and args.bodies_hex (binary) into what publish sends.
function wsBodies(args) {
  const out = (args.bodies || []).slice();
  for (const h of args.bodies_hex || []) out.push(new Uint8Array(Buffer.from(h, 'hex')));
  return out;
}

Object.assign(scenarios, {
  // ws_receive subscribes over WebSocket, prints {"ready": true}, and waits for args.count
  // MESSAGEs (sent by another client), reporting each body as hex (message.binaryBody).
  async ws_receive(args, out) {
    const c = await openWS(args);
    out.protocol = c.ws.protocol;
    out.version = c.connected.version ?? null;
    await c.subscribe(args.dest);
    process.stdout.write(JSON.stringify({ ready: true }) + '\n');
    try {
      await c.waitFor(() => c.messages.length >= args.count, `${args.count} messages`);
      await c.disconnect();
    } finally {
      out.messages = c.messages.map(wsRecord);
    }
  },

  // ws_idle: a WebSocket subscriber without heart-beats (stompjs heartbeat 0) idles for
  // args.idle_ms, subscribed before the idle (args.subscribe_first) or after it; then a
  // second WebSocket connection sends one message, which the subscriber must receive
  // (issue 30).
  async ws_idle(args, out) {
    const c = await openWS(args);
    out.heart_beat = c.connected['heart-beat'] ?? null;
    if (args.subscribe_first) await c.subscribe(args.dest);
    await sleep(args.idle_ms);
    out.disconnected_while_idle = c.closed;
    try {
      if (!args.subscribe_first) await c.subscribe(args.dest);
      const p = await openWS(args);
      await p.send(args.dest, 'after-idle');
      await p.disconnect();
      await c.waitFor(() => c.messages.length >= 1, 'the MESSAGE after idling');
      out.received = c.bodies();
      await c.disconnect();
    } finally {
      out.errors = c.errors;
    }
  },

  // ws_send publishes args.bodies then args.bodies_hex (as binaryBody) over WebSocket, each
  // with a receipt it waits for.
  async ws_send(args, out) {
    const c = await openWS(args);
    out.protocol = c.ws.protocol;
    out.version = c.connected.version ?? null;
    for (const b of wsBodies(args)) await c.send(args.dest, b);
    await c.disconnect();
    out.sent = true;
  },

  // ws_echo subscribes over WebSocket and sends to itself (args.bodies, args.bodies_hex),
  // reporting what came back.
  async ws_echo(args, out) {
    const c = await openWS(args);
    out.protocol = c.ws.protocol;
    out.version = c.connected.version ?? null;
    await c.subscribe(args.dest);
    const bodies = wsBodies(args);
    try {
      for (const b of bodies) await c.send(args.dest, b);
      await c.waitFor(() => c.messages.length >= bodies.length, `${bodies.length} messages`);
      await c.disconnect();
    } finally {
      out.messages = c.messages.map(wsRecord);
    }
  },
});

// ---------------------------------------------------------------- scenarios of the destination
// pattern and request/response tests (patterns_test.go, rpc_test.go). Some need the monitor
// API: args.monitor is its base URL.

// fullRecord is a MESSAGE with every header it carried.
const fullRecord = (m) => ({ headers: { ...m.headers }, body: m.body });

// subscribeWith is Conn.subscribe calling hook(m) as each MESSAGE arrives.
async function subscribeWith(c, dest, ack, headers, hook) {
  const id = rid('sub');
  const onMessage = (m) => { hook(m); c.messages.push(m); c.notify(); };
  c.client.subscribe(dest, onMessage, { ...headers, id: `${++c.subCount}`, ack, receipt: id });
  await c.waitReceipt(id);
}

// sendForReceipt sends with a receipt and returns the RECEIPT frame's headers.
async function sendForReceipt(c, dest, body, headers = {}) {
  const id = rid('req');
  c.receiptFrames = c.receiptFrames || {};
  c.client.watchForReceipt(id, (frame) => {
    c.receiptFrames[id] = frame.headers;
    c.receipts.push(id);
    c.notify();
  });
  c.client.publish({ destination: dest, body, headers: { ...headers, receipt: id } });
  await c.waitReceipt(id);
  return c.receiptFrames[id];
}

// monitorQueue returns the monitor API's QueueInfo of dest (null when no such queue exists).
async function monitorQueue(args, dest) {
  const u = new URL(args.monitor + '/titan/monitor/queues');
  u.searchParams.set('destination', dest);
  const r = await fetch(u);
  const j = await r.json();
  return j.queues[0] ?? null;
}

async function pollMonitor(args, dest, pred, what) {
  const deadline = Date.now() + (args.timeout || 10) * 1000;
  for (;;) {
    const q = await monitorQueue(args, dest);
    if (q !== null && pred(q)) return q;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(q)})`);
    await sleep(10);
  }
}

// jsResponder is one request/response responder connection (rpc_serve): it answers its
// requests one at a time, in arrival order.
class JSResponder {
  constructor(args, ch, index) {
    this.args = args;
    this.ch = ch;
    this.name = `${ch.dest}#${index}` + (ch.group ? `@${ch.group}` : '');
    this.handled = [];
    this.errors = [];
    this.chain = Promise.resolve();
    this.stopped = false;
  }

  async start() {
    this.c = await open(this.args);
    await subscribeWith(this.c, this.ch.dest, 'auto', this.ch.group ? { group: this.ch.group } : {}, (m) => {
      this.handled.push(fullRecord(m));
      this.chain = this.chain.then(() => this.answer(m)).catch((e) => this.errors.push(`${e.name}: ${e.message}`));
    });
    return this;
  }

  async answer(m) {
    const ch = this.ch;
    const behaviour = ch.behaviour || 'answer';
    if (behaviour === 'ignore' || this.stopped) return;
    if (behaviour === 'late') await sleep(ch.delay_ms);
    const h = { 'correlation-id': m.headers['correlation-id'] ?? '', responder: this.name };
    if (behaviour === 'spy') {
      h['spy-result'] = await this.spy(m.headers['reply-to'] ?? '');
      // A response nobody asked for: dropped; the real answer after it is the barrier.
      await this.c.send(m.headers['reply-to'], '', { 'correlation-id': 'unknown-1', executed: 'true' });
    }
    if ((ch.kind || 'command') === 'query') {
      h['content-type'] = 'text/plain';
      await this.c.send(m.headers['reply-to'], `answer:${m.body}`, h);
    } else {
      h.executed = 'true';
      await this.c.send(m.headers['reply-to'], '', h);
    }
  }

  // spy has another connection try to SUBSCRIBE to the requester's reply-to.
  async spy(replyTo) {
    const s = await open(this.args, { discard: true });
    const id = rid('spy');
    s.client.subscribe(replyTo, () => {}, { receipt: id });
    await s.waitFor(() => s.errors.length > 0 || s.receipts.includes(id), "the spy's SUBSCRIBE");
    const result = s.receipts.includes(id) ? 'subscribed' : `ERROR ${s.errors[0].headers.message ?? ''}`;
    s.kill();
    return result;
  }
}

Object.assign(scenarios, {
  // plan: see sc_plan in pyclient.py.
  async plan(args, out) {
    const subs = {};
    out.received = {};
    out.errors = {};
    let p = null;
    try {
      if (args.before && args.before.length) {
        const p0 = await open(args);
        for (const m of args.before) await p0.send(m.dest, m.body, m.headers || {});
        await p0.disconnect();
      }
      for (const name of Object.keys(args.subs).sort()) {
        const s = args.subs[name];
        const c = await open(args);
        subs[name] = c;
        await c.subscribe(s.dest, s.ack || 'auto', s.headers || {});
      }
      p = await open(args);
      for (const m of args.sends || []) await p.send(m.dest, m.body, m.headers || {});
      await p.disconnect();
      for (const name of Object.keys(args.wait || {}).sort()) {
        const c = subs[name];
        const want = args.wait[name];
        await c.waitFor(() => want.every((b) => c.bodies().includes(b)), `${name} to receive ${JSON.stringify(want)}`);
      }
      for (const c of Object.values(subs)) await c.disconnect();
    } finally {
      for (const [name, c] of Object.entries(subs)) {
        out.received[name] = c.messages.map(fullRecord);
        out.errors[name] = c.errors;
      }
      out.producer_errors = p ? p.errors : [];
    }
  },

  // invalid: see sc_invalid in pyclient.py.
  async invalid(args, out) {
    out.results = [];
    for (const kase of args.cases) {
      const c = await open(args);
      const id = rid('invalid');
      const r = { command: kase.command, dest: kase.dest, receipt_id: id };
      out.results.push(r);
      if (kase.command === 'SEND') {
        c.client.publish({ destination: kase.dest, body: 'x', headers: { receipt: id } });
      } else {
        c.client.subscribe(kase.dest, () => {}, { id: '1', receipt: id });
      }
      await c.waitFor(() => c.errors.length > 0 || c.receipts.includes(id), `an ERROR or RECEIPT for ${kase.command} ${kase.dest}`);
      r.receipt = c.receipts.includes(id);
      r.errors = c.errors.slice();
      if (r.receipt) {
        await c.disconnect();
        continue;
      }
      await c.waitFor(() => c.closed, 'the connection to close after ERROR');
      r.closed = true;
      await c.client.deactivate();
    }
  },

  // dlq: see sc_dlq in pyclient.py.
  async dlq(args, out) {
    const d = await open(args);
    await d.subscribe(args.dlq);
    const c = await open(args);
    const dNotify = d.notify.bind(d);
    d.notify = () => { dNotify(); c.notify(); }; // one wait watches both connections
    await c.subscribe(args.dest, 'client-individual');
    out.deliveries = [];
    out.dead_letters = [];
    try {
      const p = await open(args);
      await p.send(args.dest, 'poison', { 'x-app': 'kept', 'content-type': 'text/plain' });
      await p.disconnect();
      let handled = 0;
      let lastNack = null;
      while (handled < 10) {
        await c.waitFor(() => c.messages.length > handled || d.messages.length > 0, 'a redelivery or the dead letter');
        const dead = d.messages.length > 0;
        for (const m of c.messages.slice(handled)) {
          const rec = fullRecord(m);
          rec.since_nack_ms = lastNack === null ? null : performance.now() - lastNack;
          out.deliveries.push(rec);
          handled++;
          if (!dead) {
            lastNack = performance.now();
            m.nack();
          }
        }
        if (dead) break;
      }
      await c.disconnect();
      out.deliveries_total = c.messages.length;
      await d.disconnect();
    } finally {
      out.dead_letters = d.messages.map(fullRecord);
    }
  },

  // prefetch: see sc_prefetch in pyclient.py.
  async prefetch(args, out) {
    const { dest, count, prefetch } = args;
    const ackN = args.ack_n;
    const mode = args.ack || 'client';
    const p = await open(args);
    for (let i = 0; i < count; i++) await p.send(dest, `pf-${i}`);
    await p.disconnect();
    const c = await open(args);
    out.received = [];
    try {
      await c.subscribe(dest, mode, { 'prefetch-count': String(prefetch) });
      await c.waitFor(() => c.messages.length >= prefetch, `${prefetch} deliveries`);
      out.monitor_first = await pollMonitor(args, dest, (q) => q.delivering >= prefetch, `delivering >= ${prefetch}`);
      await c.send('/topic/prefetch-barrier', 'barrier');
      out.received_first = c.messages.length;
      if (mode === 'client') {
        c.messages[ackN - 1].ack();
      } else {
        for (const m of c.messages.slice(0, ackN)) m.ack();
      }
      await c.waitFor(() => c.messages.length >= prefetch + ackN, `${prefetch + ackN} deliveries after acknowledging ${ackN}`);
      out.monitor_second = await pollMonitor(args, dest, (q) => q.acked >= ackN && q.delivering >= prefetch,
        `acked >= ${ackN} and delivering >= ${prefetch}`);
      await c.send('/topic/prefetch-barrier', 'barrier');
      out.received_second = c.messages.length;
      await c.disconnect();
    } finally {
      out.received = c.bodies();
    }
  },

  // schedule: see sc_schedule in pyclient.py.
  async schedule(args, out) {
    const dest = args.dest;
    const c = await open(args);
    const at = {};
    await subscribeWith(c, dest, 'auto', {}, (m) => { at[m.body] ??= performance.now(); });
    const p = await open(args);
    let t0 = performance.now();
    try {
      t0 = performance.now();
      await p.send(dest, 'delayed', { delay: String(args.delay_ms) });
      out.monitor_after_delayed_send = await monitorQueue(args, dest);
      const now = Date.now();
      await p.send(dest, 'expired', { expires: String(now - 60000) });
      await p.send(dest, 'future', { expires: String(now + 600000) });
      await p.send(dest, 'plain');
      await c.waitFor(() => c.bodies().includes('delayed'), 'the delayed message');
      await p.send(dest, 'after');
      await c.waitFor(() => c.bodies().includes('after'), 'the message sent after it');
      out.monitor_end = await pollMonitor(args, dest, (q) => q.size === 0, 'an empty queue');
      await p.disconnect();
      await c.disconnect();
      out.future_expires = String(now + 600000);
    } finally {
      out.received = c.messages.map((m) => ({ ...fullRecord(m), at_ms: at[m.body] === undefined ? null : at[m.body] - t0 }));
    }
  },

  // rpc_serve: see sc_rpc_serve in pyclient.py.
  async rpc_serve(args, out) {
    const rs = [];
    try {
      for (const ch of args.channels) {
        for (let i = 0; i < (ch.responders || 1); i++) rs.push(await new JSResponder(args, ch, i).start());
      }
      process.stdout.write(JSON.stringify({ ready: true }) + '\n');
      await new Promise((resolve) => {
        process.stdin.on('end', resolve);
        process.stdin.resume();
      });
    } finally {
      for (const r of rs) r.stopped = true;
      await Promise.race([Promise.all(rs.map((r) => r.chain)), sleep(5000)]);
      out.handled = Object.fromEntries(rs.map((r) => [r.name, r.handled]));
      out.errors = rs.flatMap((r) => r.errors.concat(r.c.errors.map((e) => e.headers.message ?? '')));
    }
  },

  // rpc_request: see sc_rpc_request in pyclient.py.
  async rpc_request(args, out) {
    const a = await open(args);
    out.session = a.connected.session ?? null;
    out.requests = [];
    const sent = {};
    const arrived = {};
    const reply = '/temp-queue/replies';
    const hook = (m) => { arrived[m.headers['correlation-id']] ??= performance.now(); };
    await subscribeWith(a, reply, 'auto', {}, hook);
    await subscribeWith(a, args.reply_queue, 'auto', {}, hook);
    let b = null;
    const request = async (dest, body, { corr, timeoutMs, replyTo = reply, conn = a, headers = {} } = {}) => {
      const h = { ...headers, 'reply-to': replyTo };
      if (corr !== undefined) h['correlation-id'] = corr;
      if (timeoutMs !== undefined) h.timeout = String(timeoutMs);
      const t = performance.now();
      const rec = await sendForReceipt(conn, dest, body, h);
      sent[corr ?? rec['correlation-id']] = t;
      out.requests.push({ dest, correlation_id: corr ?? null, receipt: conn === a ? rec : null });
      return rec;
    };
    const waitFor = (corr, conn = a) =>
      conn.waitFor(() => conn.messages.some((m) => m.headers['correlation-id'] === corr), `a response with correlation-id ${corr}`);
    const short = args.short_timeout_ms;
    try {
      await request(args.command, 'do-it', { corr: 'rt-cmd', timeoutMs: 5000 });
      await waitFor('rt-cmd');
      await request(args.query, 'what', { corr: 'rt-query', timeoutMs: 5000 });
      await waitFor('rt-query');
      const gen = (await request(args.command, 'no-corr', { timeoutMs: 5000 }))['correlation-id'] ?? null;
      out.generated_correlation_id = gen;
      if (gen) await waitFor(gen);
      await request(args.command, 'to-queue', { corr: 'rt-queue', timeoutMs: 5000, replyTo: args.reply_queue });
      await waitFor('rt-queue');
      for (let i = 0; i < args.balanced_count; i++) await request(args.balanced, `lb-${i}`, { corr: `lb-${i}`, timeoutMs: 5000 });
      for (let i = 0; i < args.balanced_count; i++) await waitFor(`lb-${i}`);
      await request(args.nobody, 'anyone?', { corr: 'nobody-1', timeoutMs: 5000 });
      await waitFor('nobody-1');
      await request(args.silent, 'hello?', { corr: 'timeout-1', timeoutMs: short });
      await waitFor('timeout-1');
      await request(args.slow, 'late', { corr: 'late-1', timeoutMs: short });
      await waitFor('late-1');
      await request(args.slow, 'in-time', { corr: 'late-2', timeoutMs: 5000 });
      await waitFor('late-2');
      await request(args.spy, 'spy-on-me', { corr: 'spy-1', timeoutMs: 10000 });
      await waitFor('spy-1');
      for (let i = 0; i < args.grouped_count; i++) {
        await request(args.grouped, 'grp', { corr: `grp-market-${i}`, timeoutMs: 5000, headers: { group: 'market' } });
        await request(args.grouped, 'grp', { corr: `grp-default-${i}`, timeoutMs: 5000 });
      }
      for (let i = 0; i < args.grouped_count; i++) {
        await waitFor(`grp-market-${i}`);
        await waitFor(`grp-default-${i}`);
      }
      b = await open(args);
      await b.subscribe(reply);
      await request(args.command, 'from-b', { corr: 'iso-b', timeoutMs: 5000, conn: b });
      await waitFor('iso-b', b);
      await b.disconnect();
      await a.disconnect();
    } finally {
      out.responses = a.messages.map(fullRecord);
      out.b_responses = b ? b.messages.map(fullRecord) : [];
      out.errors = a.errors.map((e) => e.headers.message ?? '');
      out.response_ms = {};
      for (const [k, t] of Object.entries(sent)) if (arrived[k] !== undefined) out.response_ms[k] = arrived[k] - t;
    }
  },

  // auth_connect: CONNECT with args.login/args.passcode; report CONNECTED, or the ERROR and
  // the close that followed (stompjs's "should not connect with invalid credentials").
  auth_connect: async (args, out) => {
    const c = new Conn(args);
    const start = Date.now();
    try {
      c.client.activate();
      await c.waitFor(() => c.connected !== null || c.errors.length > 0 || c.closed, 'CONNECTED or ERROR');
      if (c.connected === null) await c.waitFor(() => c.closed, 'the close after ERROR');
    } finally {
      out.elapsed_ms = Date.now() - start;
      out.connected = c.connected !== null;
      out.errors = c.errors.map((e) => e.headers.message);
      out.disconnected = c.closed;
    }
    if (c.connected !== null) await c.disconnect();
    else await c.client.deactivate();
  },

  // auth_ops: each op ({op: send|subscribe, dest}) on a new connection logged in as
  // args.login: "ok" when its RECEIPT came, else the ERROR's message.
  auth_ops: async (args, out) => {
    out.results = [];
    for (const op of args.ops) {
      const c = await open(args);
      const id = rid(op.op);
      if (op.op === 'send') c.client.publish({ destination: op.dest, body: op.body || 'x', headers: { receipt: id } });
      else c.client.subscribe(op.dest, (m) => { c.messages.push(m); c.notify(); }, { id: '1', ack: 'auto', receipt: id });
      await c.waitFor(() => c.receipts.includes(id) || c.errors.length > 0, `RECEIPT or ERROR for ${id}`);
      if (c.errors.length > 0) {
        const e = c.errors[0];
        out.results.push(`${e.headers.message} receipt-id=${e.headers['receipt-id'] || ''}`);
        await c.waitFor(() => c.closed, 'the close after ERROR');
        await c.client.deactivate();
      } else {
        out.results.push('ok');
        await c.disconnect();
      }
    }
  },
});

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
