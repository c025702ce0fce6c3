// The connection: WebSocket to this page's host, hello, request/reply by id, reconnection with
// exponential backoff using the session token kept in localStorage.
//
// A Connection emits: "welcome" (after every successful hello), "message" (every server message
// that is not a reply awaited by request()), "status" ({state: "connecting" | "open" | "waiting" | "replaced", wait}),
// "moving" ({table}: a request is waiting for its table to finish moving to another node),
// "moved" (no request waits for a moving table any more: it was answered, or given up), and
// "error" (an error reply nobody awaited: {code, message}).

const TOKEN_KEY = "blackdrez.token";
const NAME_KEY = "blackdrez.name";
const MIN_DELAY = 100;
const MAX_DELAY = 5000;
const MOVING_PATIENCE = 30000; // ms to keep retrying a request while its table moves between nodes
// After the server said it is restarting ("shutdown"), try again often rather than backing off:
// a lone server is back within seconds, and behind a load balancer the first try finds a node.
const RESTART_PATIENCE = 60000; // ms
const RESTART_DELAY = 400; // ms, plus up to as much again at random (no herd of exact retries)

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

export class Connection extends EventTarget {
  constructor(url = defaultUrl()) {
    super();
    this.url = url;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.delay = MIN_DELAY;
    this.restartingSince = null; // when the server said it was restarting (null: it did not)
    this.welcome = null;
    this.greeted = false;
    /** Closed because this identity connected elsewhere (4004): no reconnection until resume(). */
    this.replaced = false;
    this.clockOffset = 0; // server time minus local time, in seconds
    this.movingWaits = 0; // requests waiting for their table to finish moving
  }

  get token() { return storedToken(); }
  get name() { return localStorage.getItem(NAME_KEY) || ""; }
  set name(value) { localStorage.setItem(NAME_KEY, value); }

  /** Open the connection, and keep it open: a dropped one is opened again. */
  start() {
    this.open();
  }

  /** Keep a new token for the same identity (after sign_up or sign_out_everywhere). */
  keep(session) {
    localStorage.setItem(TOKEN_KEY, session.token);
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
    localStorage.removeItem(TOKEN_KEY);
  }

  /** Forget the current identity and greet again as a new guest with ``name``. */
  renew(name) {
    localStorage.removeItem(TOKEN_KEY);
    this.name = name;
    if (this.ws) this.ws.close(1000, "new identity");
    else this.open();
  }

  open() {
    this.emit("status", { state: "connecting" });
    const ws = new WebSocket(this.url);
    this.ws = ws;
    let greeted = false;
    ws.onopen = () => {
      const hello = { type: "hello", versions: [1], client: "blackdrez-browser/0.1" };
      if (this.token) hello.token = this.token;
      else if (this.name) hello.name = this.name;
      ws.send(JSON.stringify(hello));
    };
    ws.onmessage = (frame) => {
      let message;
      try { message = JSON.parse(frame.data); } catch { return; }
      if (!greeted) {
        if (message.type === "welcome") {
          greeted = true;
          this.greeted = true;
          this.delay = MIN_DELAY;
          this.restartingSince = null;
          this.welcome = message;
          localStorage.setItem(TOKEN_KEY, message.token);
          this.name = message.name;
          this.emit("status", { state: "open" });
          this.emit("welcome", message);
          this.measureClock();
        } else if (message.type === "error") {
          if (message.code === "bad_token") this.forget();
          this.emit("error", message);
        }
        return;
      }
      this.receive(message);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.greeted = false;
      if (event.code === 4007) {  // signed out everywhere: this token is refused from now on
        this.forget();
        this.emit("error", { code: "signed_out", message: event.reason });
      }
      for (const { reject } of this.pending.values()) reject(Object.assign(new Error("connection closed"), { code: "closed" }));
      this.pending.clear();
      if (event.code === 4004) {
        // Replaced: this identity connected again from another tab or browser, which is now the
        // live one. Reconnecting on our own would take the connection back, and the other would
        // do the same: wait until the player asks (resume).
        this.replaced = true;
        this.emit("status", { state: "replaced" });
        return;
      }
      this.retry();
    };
  }

  /** Connect again after being replaced (the player chose to play here). */
  resume() {
    this.replaced = false;
    this.delay = MIN_DELAY;
    if (!this.ws) this.open();
  }

  retry() {
    const restarting = this.restartingSince !== null && Date.now() - this.restartingSince < RESTART_PATIENCE;
    const wait = restarting ? RESTART_DELAY + Math.random() * RESTART_DELAY : Math.min(this.delay, MAX_DELAY);
    this.delay = Math.min(this.delay * 2, MAX_DELAY);
    this.emit("status", { state: "waiting", wait });
    setTimeout(() => { if (!this.ws) this.open(); }, wait);
  }

  get connected() { return this.greeted && this.ws !== null && this.ws.readyState === WebSocket.OPEN; }

  receive(message) {
    if (message.type === "shutdown") this.restartingSince = Date.now();
    const waiter = message.id != null ? this.pending.get(message.id) : undefined;
    if (waiter) {
      this.pending.delete(message.id);
      if (message.type === "error") waiter.reject(Object.assign(new Error(message.message), { code: message.code, retry_after: message.retry_after ?? null }));
      else waiter.resolve(message);
      // Snapshots and updates answering a request still change table state.
      if (message.type === "snapshot" || message.type === "update" || message.type === "joined") {
        this.emit("message", message);
      }
      return;
    }
    if (message.type === "error") this.emit("error", message);
    else this.emit("message", message);
  }

  /** Send a request with a fresh id; resolve with its reply, reject with an Error carrying the
   * error's ``code``. A table that is ``moving`` to another node is waited out: the request is
   * sent again (a little later each time) for up to MOVING_PATIENCE ms, since nothing was done. */
  async request(message) {
    const started = Date.now();
    let wait = 200;
    let waited = false;
    try {
      for (;;) {
        try {
          return await this.requestOnce(message);
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

  requestOnce(message) {
    if (this.replaced) return Promise.reject(Object.assign(new Error("playing elsewhere"), { code: "replaced" }));
    if (!this.connected) return Promise.reject(Object.assign(new Error("not connected: reconnecting…"), { code: "closed" }));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ ...message, id }));
    });
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

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }
}

function defaultUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/`;
}
