// @blackdrez/client: the BlackDrez protocol (docs/protocol.md) for JavaScript, in the browser and
// in Node.js (22+, or 20 with --experimental-websocket; or pass a WebSocket class).
//
// Theory of operation. A Client is one WebSocket to a node. open() greets with hello (the
// versions spoken: 1; the token of the last welcome, so a reconnect is the same player) and
// resolves with the welcome. request(message) gives the message the next id and resolves with the
// reply bearing that id, or rejects with a ServerError for an error reply; send() is the same
// without waiting. Every frame goes through a token bucket of the welcome's limits (the rate,
// half the burst: the rest absorbs the network's jitter), so a client does not trip the
// server's flood limit; a rate_limited reply is retried once after its retry_after.
//
// Tables are kept in step: each snapshot replaces what is held of its table, each update is
// applied if its first new event follows the last one held, and a gap asks for a resync (the
// server sends what was missed, or a snapshot). A dropped connection (anything but a close asked
// for, 4004 replaced or 4007 signed out) is opened again with exponential backoff and jitter;
// after its welcome every table held is resynced. Requests in flight when it dropped are
// rejected with code "closed" (the caller decides whether to send them again).
//
// Encoding: JSON text frames by default; { encoding: "msgpack" } sends and reads MessagePack
// binary frames with @msgpack/msgpack, loaded only then (a dependency of the package in Node; a
// browser page uses JSON or passes { msgpack: { encode, decode } }).
//
// Events (EventTarget; each event's detail): "welcome" (the welcome), "message" (every server
// message), "snapshot" / "update" ({table, state, message}: after it is applied), "status"
// ({state: "connecting" | "open" | "waiting" | "replaced" | "closed", wait?}).
//
// Made to be extended (the browser client's Connection is a subclass): { tables: false } leaves
// the tables to the application; hello(), deliver(message, reply), retryDelay(), refused(error)
// and dropped(ws, event) are the places to change what is greeted with, which messages are
// announced, how long a reconnection waits, and what a refusal or a close does.

export const VERSIONS = [1];
const MIN_DELAY = 100; // ms, the first reconnection wait; doubled up to MAX_DELAY
const MAX_DELAY = 5000;

/** An error reply, as a rejection of request(). */
export class ServerError extends Error {
  constructor(reply) {
    super(reply.message);
    this.name = "ServerError";
    this.code = reply.code;
    this.retry_after = reply.retry_after ?? null;
    this.reply = reply;
  }
}

/** A token bucket: take() resolves once a token is there (rate per second, burst at most). */
class Pacer {
  constructor(rate = Infinity, burst = Infinity) { this.set(rate, burst); }

  set(rate, burst) {
    this.rate = rate;
    this.burst = burst;
    this.tokens = burst;
    this.at = performance.now();
    this.queue = this.queue ?? Promise.resolve();
  }

  take() {
    const turn = this.queue.then(async () => {
      for (;;) {
        const now = performance.now();
        this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rate);
        this.at = now;
        if (this.tokens >= 1) { this.tokens -= 1; return; }
        await sleep(Math.ceil(((1 - this.tokens) / this.rate) * 1000));
      }
    });
    this.queue = turn.catch(() => {});
    return turn;
  }
}

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

const JSON_CODEC = {
  binary: false,
  encode: (message) => JSON.stringify(message),
  decode: (data) => JSON.parse(typeof data === "string" ? data : new TextDecoder().decode(data)),
};

export class Client extends EventTarget {
  /** A client of the node at ``url`` (ws:// or wss://); open() connects it. Options: name (a new
   * guest's), token (come back as that player), encoding ("json" | "msgpack"), client (free text
   * for the server's logs), reconnect (default true), WebSocket (a class, default the global),
   * msgpack ({encode, decode}), tokenStore ({get(), set(token)}: where the token is kept). */
  constructor(url, options = {}) {
    super();
    this.url = url;
    this.options = { encoding: "json", reconnect: true, tables: true, client: "blackdrez-js/0.1", ...options };
    if (options.token !== undefined || options.tokenStore) this.token = options.token ?? options.tokenStore.get();
    if (options.name !== undefined) this.name = options.name;
    this.welcome = null; // the last welcome (kept while reconnecting)
    this.greeted = false;
    this.tables = new Map(); // table id -> {seq, seat, info, view, legal, deadline}
    this.pending = new Map(); // request id -> {resolve, reject}
    this.nextId = 1;
    this.pacer = new Pacer();
    this.ws = null;
    this.closing = false;
    this.delay = MIN_DELAY;
    this.codec = null;
  }

  /** A client connected and greeted: new Client(url, options), then open(). */
  static async connect(url, options = {}) {
    const client = new Client(url, options);
    await client.open();
    return client;
  }

  get connected() { return this.ws !== null && this.greeted && this.ws.readyState === 1; }

  /** Connect and greet: resolves with the welcome, rejects with the handshake's error (a
   * ServerError: unsupported_version, bad_token...) or a failure to connect. */
  async open() {
    this.closing = false;
    // (JSON needs no wait: the socket is made before open() first yields, so two calls in a row
    // cannot open two; MessagePack's module is loaded once, before the first socket)
    this.codec ??= this.options.encoding === "msgpack" ? await this.msgpackCodec() : JSON_CODEC;
    const Socket = this.options.WebSocket ?? globalThis.WebSocket;
    if (typeof Socket !== "function") throw new Error("no WebSocket: Node 20 needs --experimental-websocket");
    this.emit("status", { state: "connecting" });
    const ws = new Socket(this.url);
    if (this.codec.binary) ws.binaryType = "arraybuffer";
    this.ws = ws;
    this.greeted = false;
    return new Promise((resolve, reject) => {
      let greeted = false;
      ws.onopen = () => ws.send(this.codec.encode(this.hello()));
      ws.onmessage = (frame) => {
        let message;
        try { message = this.codec.decode(frame.data); } catch { return; }
        if (greeted) { this.receive(message); return; }
        if (message.type === "welcome") {
          greeted = true;
          this.greet(message);
          resolve(message);
        } else if (message.type === "error") {
          const error = new ServerError(message);
          this.refused(error);
          if (message.code === "bad_token") this.setToken(null); // a new guest next time
          reject(error);
        }
      };
      ws.onclose = (event) => {
        if (!greeted) reject(Object.assign(new Error(`closed before welcome (${event.code})`), { code: "closed" }));
        this.dropped(ws, event);
      };
      ws.onerror = () => {}; // (onclose follows and says it)
    });
  }

  /** Close for good (no reconnection); pending requests are rejected. */
  close(code = 1000, reason = "bye") {
    this.closing = true;
    this.ws?.close(code, reason);
    this.emit("status", { state: "closed" });
  }

  /** Send ``message`` with a fresh id; resolve with its reply, reject with a ServerError. A
   * rate_limited reply is waited out (retry_after) and the request sent once more. */
  async request(message, { retryRateLimited = true } = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.ask(message);
      } catch (error) {
        const wait = error.reply?.retry_after;
        if (!(error.code === "rate_limited" && retryRateLimited && attempt === 0 && wait != null)) throw error;
        await sleep(wait * 1000);
      }
    }
  }

  /** Send ``message`` without an id (paced like every frame). */
  async send(message) {
    await this.pacer.take();
    if (!this.connected) throw Object.assign(new Error("not connected"), { code: "closed" });
    this.ws.send(this.codec.encode(message));
  }

  /** The state held of ``table`` ({seq, seat, info, view, legal, deadline}), if any. */
  table(table) { return this.tables.get(table); }

  /** Act at ``table`` (the reply's ok, or a ServerError). */
  act(table, action) { return this.request({ type: "act", table, action }); }

  /** Resolve with the first server message for which ``predicate`` holds (within ``ms``). */
  waitFor(predicate, ms = 30000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { this.removeEventListener("message", listen); reject(new Error("timed out")); }, ms);
      const listen = (event) => {
        if (!predicate(event.detail)) return;
        clearTimeout(timer);
        this.removeEventListener("message", listen);
        resolve(event.detail);
      };
      this.addEventListener("message", listen);
    });
  }

  // ------------------------------------------------------------------ to extend
  /** The hello this client greets with. */
  hello() {
    const hello = { type: "hello", versions: VERSIONS, client: this.options.client };
    if (this.token) hello.token = this.token;
    else if (this.name) hello.name = this.name;
    return hello;
  }

  /** Announce ``message`` (``reply``: it answered a request of ours, whose promise has it). */
  deliver(message, reply) { this.emit("message", message); } // eslint-disable-line no-unused-vars

  /** Milliseconds before the next reconnection: exponential backoff with jitter. */
  retryDelay() {
    const wait = Math.min(MAX_DELAY, this.delay) * (0.5 + Math.random() / 2);
    this.delay = Math.min(MAX_DELAY, this.delay * 2);
    return wait;
  }

  /** The handshake was refused (``error``: a ServerError); open() rejects with it too. */
  refused(error) {} // eslint-disable-line no-unused-vars

  // ------------------------------------------------------------------ internals
  async ask(message) {
    const id = this.nextId++;
    const reply = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
    try {
      await this.send({ ...message, id });
    } catch (error) {
      this.pending.delete(id);
      throw error;
    }
    return reply;
  }

  greet(welcome) {
    this.welcome = welcome;
    this.greeted = true;
    this.setToken(welcome.token);
    this.name = welcome.name;
    this.delay = MIN_DELAY;
    const { messages_per_second: rate, burst } = welcome.limits;
    // Half the burst: frames the network holds up and then delivers together reach the server
    // closer together than they were sent, and the other half absorbs that (as the Python
    // client does). The clock is monotonic (performance.now), as the server's is.
    this.pacer.set(rate, Math.max(1, Math.floor(burst / 2)));
    this.emit("status", { state: "open" });
    this.emit("welcome", welcome);
    if (!this.options.tables) return;
    // Back after a drop: bring every table held (and every seat the server says is ours) in step.
    const held = new Set([...this.tables.keys(), ...(welcome.tables ?? [])]);
    for (const table of held) {
      const since = this.tables.get(table)?.seq ?? 0;
      this.request({ type: "resync", table, since }).catch(() => {});
    }
  }

  setToken(token) {
    this.token = token;
    this.options.tokenStore?.set(token);
  }

  receive(message) {
    const waiter = message.id != null ? this.pending.get(message.id) : undefined;
    if (waiter) {
      this.pending.delete(message.id);
      if (message.type === "error") waiter.reject(new ServerError(message));
      else waiter.resolve(message);
    }
    if (this.options.tables) {
      if (message.type === "snapshot") this.applySnapshot(message);
      else if (message.type === "update") this.applyUpdate(message);
    }
    this.deliver(message, waiter !== undefined);
  }

  applySnapshot(snapshot) {
    const state = {
      seq: snapshot.seq, seat: snapshot.seat, info: snapshot.info,
      view: snapshot.view, legal: snapshot.legal, deadline: snapshot.deadline,
    };
    this.tables.set(snapshot.table, state);
    this.emit("snapshot", { table: snapshot.table, state, message: snapshot });
  }

  applyUpdate(update) {
    const state = this.tables.get(update.table);
    if (state === undefined) return; // its snapshot is on its way
    const fresh = update.events.filter((e) => e.seq > state.seq);
    if (update.events.length > 0 && fresh.length === 0) return; // held already
    if (fresh.length > 0 && fresh[0].seq !== state.seq + 1) {
      this.request({ type: "resync", table: update.table, since: state.seq }).catch(() => {});
      return;
    }
    state.seq = update.seq;
    state.view = update.view ?? null;
    state.legal = update.legal ?? [];
    state.deadline = update.deadline ?? null;
    if (update.info) state.info = update.info; // (only when the seats, status or options changed)
    this.emit("update", { table: update.table, state, message: update });
  }

  dropped(ws, event) {
    if (this.ws !== ws) return;
    this.ws = null;
    this.greeted = false;
    for (const { reject } of this.pending.values()) reject(Object.assign(new Error("connection closed"), { code: "closed" }));
    this.pending.clear();
    if (event.code === 4007) this.setToken(null); // signed out everywhere: this token is refused
    if (event.code === 4004) { this.emit("status", { state: "replaced" }); return; }
    if (this.closing || !this.options.reconnect) { this.emit("status", { state: "closed" }); return; }
    const wait = this.retryDelay();
    this.emit("status", { state: "waiting", wait });
    setTimeout(() => { if (!this.closing && !this.ws) this.open().catch(() => {}); }, wait);
  }

  async msgpackCodec() {
    const msgpack = this.options.msgpack ?? (await import("@msgpack/msgpack"));
    return {
      binary: true,
      encode: (message) => msgpack.encode(message),
      decode: (data) => msgpack.decode(data instanceof ArrayBuffer ? new Uint8Array(data) : data),
    };
  }

  emit(type, detail) { this.dispatchEvent(new CustomEvent(type, { detail })); }
}
