// Waiting is the bounded wait the stompjs client scripts share: a connection records what
// it received, calls notify() after each arrival, and awaits waitFor(pred) until pred()
// holds or timeoutMs passed.

export class Waiting {
  constructor(timeoutMs) {
    this.timeoutMs = timeoutMs;
    this.waiters = new Set();
  }

  // notify resolves every wait whose predicate now holds.
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
}
