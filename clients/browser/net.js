// The connection: the JavaScript client package (@blackdrez/client, served as /client.js) with
// what a page adds to it: the session token and name kept in localStorage, requests to a table
// that is moving to another node waited out, quick retries while a restarting server comes back,
// the server's clock, and the identity changes of the account screens. The package greets,
// matches replies to requests, paces frames to the welcome's limits and reconnects; the tables
// are the page's store's (tables: false).
//
// A Connection emits: "welcome" (after every successful hello), "message" (every server message
// that is not a reply awaited by request(), and the snapshots, updates and joined that are),
// "status" ({state: "connecting" | "open" | "waiting" | "replaced", wait}), "moving" ({table}: a
// request is waiting for its table to finish moving to another node), "moved" (no request waits
// for a moving table any more: it was answered, or given up), and "error" (an error nobody
// awaited: {code, message}).

import { Client } from "./client.js";

const TOKEN_KEY = "blackdrez.token";
const NAME_KEY = "blackdrez.name";
// ms, the longest wait between two reconnections: a server back after a crash (no "shutdown"
// said) is found within this of its return (at 5 s, a restart that took a second longer than
// the last doubling left the page waiting 4-5 s more).
const MAX_DELAY = 2000;
const MOVING_PATIENCE = 30000; // ms to keep retrying a request while its table moves between nodes
// After the server said it is restarting ("shutdown"), try again often rather than backing off:
// a lone server is back within seconds, and behind a load balancer the first try finds a node.
const RESTART_PATIENCE = 60000; // ms
const RESTART_DELAY = 400; // ms, plus up to as much again at random (no herd of exact retries)
const IN_STEP = new Set(["snapshot", "update", "joined"]); // replies that still change a table

/** The session token this browser greets with (null before its first welcome). */
export function storedToken() {
  return localStorage.getItem(TOKEN_KEY);
}

/** Whether ``token`` belongs to an account (a claimed identity), from its payload. */
export function isAccount(token) {
  try {
    const payload = JSON.parse(atob(token.split(".")[0].replace(/-/g, "+").replace(/_/g, "/")));
    return (payload.g ?? 0) > 0;
  } catch {
    return false;
  }
}

export class Connection extends Client {
  constructor(url = defaultUrl()) {
    super(url, { tables: false, client: "blackdrez-browser/0.1" });
    this.restartingSince = null; // when the server said it was restarting (null: it did not)
    /** Closed because this identity connected elsewhere (4004): no reconnection until resume(). */
    this.replaced = false;
    this.clockOffset = 0; // server time minus local time, in seconds
    this.movingWaits = 0; // requests waiting for their table to finish moving
  }

  get token() { return storedToken(); }
  set token(value) {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  }
  get name() { return localStorage.getItem(NAME_KEY) || ""; }
  set name(value) { localStorage.setItem(NAME_KEY, value ?? ""); }

  /** Open the connection, and keep it open: a dropped one is opened again. */
  start() {
    this.open();
  }

  open() {
    return super.open().catch(() => {}); // (a refusal is an "error" event; a drop retries)
  }

  /** Keep a new token for the same identity (after sign_up or sign_out_everywhere). */
  keep(session) {
    this.token = session.token;
    this.name = session.name;
  }

  /** Greet again as another identity (after sign_in): its token from now on. */
  become(session) {
    this.keep(session);
    if (this.ws) this.ws.close(1000, "new identity");
    else this.open();
  }

  /** Forget a token the server refuses. An account's name goes with it: the browser goes on as
   * a plain guest with a name of its own, not as a guest bearing the account's name. */
  forget() {
    if (this.token && isAccount(this.token)) this.name = "";
    this.token = null;
  }

  /** Forget the current identity and greet again as a new guest with ``name``. */
  renew(name) {
    this.token = null;
    this.name = name;
    if (this.ws) this.ws.close(1000, "new identity");
    else this.open();
  }

  /** Connect again after being replaced (the player chose to play here). */
  resume() {
    this.replaced = false;
    this.delay = 100;
    if (!this.ws) this.open();
  }

  greet(welcome) {
    this.restartingSince = null;
    super.greet(welcome);
    this.measureClock();
  }

  refused(error) {
    if (error.code === "bad_token") this.forget();
    this.emit("error", error.reply);
  }

  deliver(message, reply) {
    if (message.type === "shutdown") this.restartingSince = Date.now();
    if (reply) {
      if (IN_STEP.has(message.type)) this.emit("message", message);
    } else if (message.type === "error") this.emit("error", message);
    else this.emit("message", message);
  }

  /** After "shutdown", every half second or so; else 100 ms doubling to 2 s, without the
   * package's jitter (a page is one client: no herd to spread, and a server back after a crash
   * is found at the next doubling). */
  retryDelay() {
    const restarting = this.restartingSince !== null && Date.now() - this.restartingSince < RESTART_PATIENCE;
    if (restarting) return RESTART_DELAY + Math.random() * RESTART_DELAY;
    const wait = Math.min(this.delay, MAX_DELAY);
    this.delay = Math.min(this.delay * 2, MAX_DELAY);
    return wait;
  }

  dropped(ws, event) {
    if (this.ws !== ws) return;
    if (event.code === 4007) { // signed out everywhere: this token is refused from now on
      this.forget();
      this.emit("error", { code: "signed_out", message: event.reason });
    }
    if (event.code === 4004) {
      // Replaced: this identity connected again from another tab or browser, which is now the
      // live one. Reconnecting on our own would take the connection back, and the other would
      // do the same: wait until the player asks (resume).
      this.replaced = true;
    }
    super.dropped(ws, event);
  }

  /** Send a request with a fresh id; resolve with its reply, reject with an Error carrying the
   * error's ``code`` (and ``retry_after``). A table that is ``moving`` to another node is waited
   * out: the request is sent again (a little later each time) for up to MOVING_PATIENCE ms,
   * since nothing was done. */
  async request(message) {
    const started = Date.now();
    let wait = 200;
    let waited = false;
    try {
      for (;;) {
        try {
          if (this.replaced) throw Object.assign(new Error("playing elsewhere"), { code: "replaced" });
          if (!this.connected) throw Object.assign(new Error("not connected: reconnecting…"), { code: "closed" });
          return await super.request(message, { retryRateLimited: false });
        } catch (error) {
          if (error.code !== "moving" || Date.now() - started > MOVING_PATIENCE) throw error;
          if (!waited) this.movingWaits += 1;
          waited = true;
          this.emit("moving", { table: message.table ?? null });
          await new Promise((resolve) => setTimeout(resolve, wait));
          wait = Math.min(wait * 2, 2000);
        }
      }
    } finally {
      if (waited && --this.movingWaits === 0) this.emit("moved", {});
    }
  }

  async measureClock() {
    const sent = Date.now();
    try {
      const pong = await this.request({ type: "ping" });
      const now = Date.now();
      this.clockOffset = pong.time - (sent + now) / 2000;
    } catch { /* the next connection measures again */ }
  }

  /** The server's clock now, in Unix seconds. */
  serverNow() { return Date.now() / 1000 + this.clockOffset; }
}

function defaultUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/`;
}
