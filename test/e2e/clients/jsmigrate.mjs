// Migration scenarios (issue 26) driven through @stomp/stompjs (over TCP with
// @stomp/tcp-wrapper) with ActiveMQ 5's STOMP headers.
//
// Usage: node jsmigrate.mjs SCENARIO 'JSON-ARGS'
//
// Same contract as jsclient.mjs: one JSON object on stdout, an "error" field when a wait timed
// out; the script observes, the Go test asserts.

import { Client, Versions } from '@stomp/stompjs';
import { TCPWrapper } from '@stomp/tcp-wrapper';
import { Waiting } from './waiting.mjs';

let counter = 0;
const rid = (prefix) => `${prefix}-${++counter}`;

// Conn is one stompjs connection and what it received; waitFor bounds every wait.
class Conn extends Waiting {
  constructor(args, connectHeaders = {}) {
    super((args.timeout || 10) * 1000);
    this.messages = [];
    this.receipts = [];
    this.errors = [];
    this.connected = false;
    this.client = new Client({
      webSocketFactory: () => new TCPWrapper(args.host, args.port),
      stompVersions: new Versions(['1.2']),
      connectHeaders: { host: 'localhost', ...connectHeaders },
      reconnectDelay: 0,
      heartbeatIncoming: 0,
      heartbeatOutgoing: 0,
      debug: () => {},
      onConnect: () => { this.connected = true; this.notify(); },
      onStompError: (f) => { this.errors.push(f.headers.message); this.notify(); },
      onUnhandledReceipt: (f) => { this.receipts.push(f.headers['receipt-id']); this.notify(); },
      onDisconnect: (f) => { this.receipts.push(f.headers['receipt-id']); this.notify(); },
    });
  }

  async open() {
    this.client.activate();
    await this.waitFor(() => this.connected, 'CONNECTED');
    return this;
  }

  // subscribe subscribes with headers and waits for the RECEIPT; MESSAGEs are acknowledged
  // individually as they arrive (client-individual).
  async subscribe(dest, headers) {
    const id = rid('sub');
    const sub = this.client.subscribe(dest, (m) => { this.messages.push(m); m.ack(); this.notify(); },
      { ...headers, ack: 'client-individual', receipt: id });
    await this.waitFor(() => this.receipts.includes(id), `RECEIPT ${id}`);
    return sub;
  }

  async unsubscribe(sub, headers = {}) {
    const id = rid('unsub');
    sub.unsubscribe({ ...headers, receipt: id });
    await this.waitFor(() => this.receipts.includes(id) || this.errors.length > 0, `RECEIPT ${id}`);
  }

  async send(dest, body) {
    const id = rid('send');
    this.client.publish({ destination: dest, body, headers: { receipt: id } });
    await this.waitFor(() => this.receipts.includes(id), `RECEIPT ${id}`);
  }

  async disconnect() {
    const id = rid('disc');
    this.client.configure({ disconnectHeaders: { receipt: id } });
    const done = this.client.deactivate();
    await this.waitFor(() => this.receipts.includes(id), `RECEIPT ${id}`);
    await done;
  }
}

const open = (args, headers) => new Conn(args, headers).open();

const scenarios = {
  // activemq_durable: client-id args.client_id and activemq.subscriptionName args.name on
  // args.topic: subscribe, detach (DISCONNECT), args.count messages published (args.publish_to)
  // while away, reattach and take them, then UNSUBSCRIBE naming the subscription deletes it:
  // a new subscription with the name gets only "fresh", published after it.
  async activemq_durable(args, out) {
    const hdrs = { 'activemq.subscriptionName': args.name, 'activemq.prefetchSize': '5' };
    let c = await open(args, { 'client-id': args.client_id });
    await c.subscribe(args.topic, hdrs);
    await c.disconnect();
    const p = await open(args);
    for (let i = 0; i < args.count; i++) await p.send(args.publish_to, `j${i}`);
    c = await open(args, { 'client-id': args.client_id });
    const sub = await c.subscribe(args.topic, hdrs);
    await c.waitFor(() => c.messages.length >= args.count, `${args.count} messages`);
    out.bodies = c.messages.map((m) => m.body);
    out.destinations = [...new Set(c.messages.map((m) => m.headers.destination))];
    await c.unsubscribe(sub, { 'activemq.subscriptionName': args.name });
    out.unsubscribe_errors = [...c.errors];
    await p.send(args.publish_to, 'while-deleted');
    const before = c.messages.length;
    await c.subscribe(args.topic, hdrs);
    await p.send(args.publish_to, 'fresh');
    await c.waitFor(() => c.messages.length > before, 'the first message of the new subscription');
    await c.disconnect();
    out.after_delete = c.messages.slice(before).map((m) => m.body);
    await p.disconnect();
  },

  // missing_client_id: activemq.subscriptionName on a connection without client-id.
  async missing_client_id(args, out) {
    const c = await open(args);
    c.client.subscribe(args.topic, () => {}, { 'activemq.subscriptionName': 'x', receipt: 'r1' });
    await c.waitFor(() => c.errors.length > 0 || c.receipts.includes('r1'), 'ERROR or RECEIPT');
    out.errors = c.errors;
    await c.client.deactivate();
  },
};

async function main() {
  const [name, json] = process.argv.slice(2);
  if (!scenarios[name] || json === undefined) {
    process.stderr.write(`usage: node jsmigrate.mjs {${Object.keys(scenarios).join('|')}} JSON\n`);
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
