// What the client knows of each table: the last snapshot or update applied, by event number.
// Updates are applied only in order (first event = last + 1); older ones are ignored and a gap
// asks for a resync. A snapshot or update older than the last event held (an answer overtaken by
// a later update on the way) is not applied: the client never goes back. A resync answered
// ``not_found`` (the table closed, or the store lost it) forgets the table after a "gone" event. The last number held is kept in localStorage so a reload resyncs from it.
//
// The table log (the last LOG_SIZE events, as {seq, event}) survives a reload or a late arrival
// (a spectator): when a table is (re)loaded with an empty log, its recent history is fetched once
// (the snapshot's ``history`` field when the server sends one, else a ``resync`` from further
// back) and put in front of the log without being replayed as news.
//
// Each logged event keeps ``names``: who sat at each seat when it happened (null: empty or not
// known), so that the log names a player who left since as they were named, not "Seat N".

const SEQ_PREFIX = "blackdrez.seq.";
const LOG_SIZE = 40;

export class TableStore extends EventTarget {
  constructor(connection) {
    super();
    this.connection = connection;
    this.tables = new Map();
  }

  get(id) { return this.tables.get(id); }

  ensure(id) {
    let table = this.tables.get(id);
    if (!table) {
      const stored = Number(localStorage.getItem(SEQ_PREFIX + id));
      table = {
        id, seq: 0, stored: Number.isFinite(stored) ? stored : 0, seat: null, info: null,
        view: null, legal: [], deadline: null, log: [], resyncing: false, backfilled: false,
        names: [],
      };
      this.tables.set(id, table);
    }
    return table;
  }

  forget(id) {
    this.tables.delete(id);
    localStorage.removeItem(SEQ_PREFIX + id);
    this.changed(id);
  }

  /** Apply any table message (joined, snapshot, update); return whether it was one. */
  apply(message) {
    switch (message.type) {
      case "joined": {
        const table = this.ensure(message.table.id);
        table.seat = message.seat;
        table.info = message.table;
        learnNames(table);
        if (message.invite) table.invite = message.invite;
        this.changed(table.id);
        return true;
      }
      case "snapshot": {
        const table = this.ensure(message.table);
        if (message.seq < table.seq) return true; // older than what is held: stale
        Object.assign(table, {
          seq: message.seq, seat: message.seat, info: message.info, view: message.view,
          legal: message.legal || [], deadline: message.deadline ?? null, resyncing: false,
        });
        learnNames(table);
        if (Array.isArray(message.history)) this.prepend(table, message.history);
        this.remember(table);
        this.changed(table.id);
        this.backfill(table);
        return true;
      }
      case "update":
        this.applyUpdate(message);
        return true;
      default:
        return false;
    }
  }

  applyUpdate(update) {
    const table = this.tables.get(update.table);
    if (!table) return;
    if (update.seq < table.seq) return; // older than what is held (an answer overtaken on the way)
    const events = update.events.filter((e) => e.seq > table.seq);
    if (update.events.length && !events.length) return; // already held
    if (update.seq > table.seq && (!events.length || events[0].seq !== table.seq + 1)) {
      // events were missed (even if this update has none: only the info changed after them)
      this.resync(table.id);
      return;
    }
    // Names not learned yet (no info held): these events happened just before the update's info.
    if (!table.info && update.info) nameHistory(events, update.info.seats.map((s) => s?.name ?? null));
    for (const numbered of events) {
      if (table.info) numbered.names = seatedDuring(table.names, numbered.event);
      table.names = seatedAfter(table.names, numbered.event);
      // The table log keeps the game and the seats; chat lines are the chat's (chat.js): at a
      // talkative table they would push the game's events out of the log's last LOG_SIZE.
      if (numbered.event.type !== "said") table.log.push(numbered);
      this.dispatchEvent(new CustomEvent("event", { detail: { table: table.id, event: numbered.event, names: numbered.names } }));
    }
    if (this.tables.get(table.id) !== table) return; // an event closed the table
    if (table.log.length > LOG_SIZE) table.log.splice(0, table.log.length - LOG_SIZE);
    table.seq = Math.max(table.seq, update.seq);
    table.view = update.view;
    table.legal = update.legal || [];
    table.deadline = update.deadline ?? null;
    table.resyncing = false;
    if (update.info) {
      table.info = update.info;
      learnNames(table);
      table.seat = seatOf(update.info, this.connection.welcome?.player);
    }
    this.remember(table);
    this.changed(table.id);
    this.backfill(table);
  }

  /** Ask for what was missed since the last event held (after a reload: the stored number). */
  async resync(id) {
    const table = this.ensure(id);
    if (table.resyncing) return;
    table.resyncing = true;
    const since = table.seq || table.stored || 0;
    if (!table.seq) table.seq = since;
    try {
      await this.connection.request({ type: "resync", table: id, since });
    } catch (error) {
      if (error.code === "not_found" || error.code === "not_seated") {
        if (error.code === "not_found") this.dispatchEvent(new CustomEvent("gone", { detail: id }));
        this.forget(id);
      } else throw error;
    } finally {
      // answered, even by an answer not applied (older than what is held): the next gap resyncs
      table.resyncing = false;
    }
  }

  /** Once per table load: fetch the recent events before the first one held, for the log. */
  async backfill(table) {
    if (table.backfilled || table.log.length || !table.seq || !table.info) return;
    table.backfilled = true;
    try {
      const reply = await this.connection.request({ type: "resync", table: table.id, since: Math.max(0, table.seq - LOG_SIZE) });
      if (reply.type === "update") this.prepend(table, reply.events);
      this.changed(table.id);
    } catch { /* no history then: the log starts now */ }
  }

  /** Put ``events`` that are older than everything in the log in front of it (no news). */
  prepend(table, events) {
    table.backfilled = true;
    const first = table.log.length ? table.log[0].seq : table.seq + 1;
    const older = events.filter((e) => e && e.seq < first && e.seq <= table.seq && e.event.type !== "said");
    if (!older.length) return;
    nameHistory(older, table.log.length ? seatedBefore(table.log[0]) : table.names);
    table.log = [...older, ...table.log].slice(-LOG_SIZE);
  }

  remember(table) {
    localStorage.setItem(SEQ_PREFIX + table.id, String(table.seq));
  }

  changed(id) {
    this.dispatchEvent(new CustomEvent("change", { detail: id }));
  }
}

/** Who sits where now, from the table's info (the names the next events are told with). */
function learnNames(table) {
  if (table.info?.seats) table.names = table.info.seats.map((s) => s?.name ?? null);
}

const seatEvent = (e) => e.type === "seat_taken" || e.type === "seat_freed";

/** The names an event is told with: the seats' names before it, and a seat taken by it named. */
function seatedDuring(names, e) {
  const during = [...names];
  if (e.type === "seat_taken") during[e.seat] = e.name;
  return during;
}

/** The seats' names after an event (a freed seat is empty). */
function seatedAfter(names, e) {
  const after = seatedDuring(names, e);
  if (e.type === "seat_freed") after[e.seat] = null;
  return after;
}

/** The seats' names just before a logged event (from the names it is told with). */
function seatedBefore(numbered) {
  const names = [...(numbered.names ?? [])];
  if (numbered.event.type === "seat_taken") names[numbered.event.seat] = null;
  return names;
}

/** Give older events (history put in front of the log) the names they happened with, knowing
 * the names ``end`` just after the last of them: a seat that no event in them takes or frees
 * kept its name throughout; one first taken was empty before; one first freed held a player
 * whose name only an earlier seat_taken could tell (none: not known, "Seat N"). */
function nameHistory(older, end) {
  let names = [...end];
  const first = new Map();
  for (const { event } of older) if (seatEvent(event) && !first.has(event.seat)) first.set(event.seat, event.type);
  for (const seat of first.keys()) names[seat] = null;
  for (const numbered of older) {
    numbered.names = seatedDuring(names, numbered.event);
    names = seatedAfter(names, numbered.event);
  }
}

/** The seat ``player`` holds in ``info`` (null for a spectator or with no info). */
export function seatOf(info, player) {
  if (!info || !player) return null;
  const index = info.seats.findIndex((s) => s && s.player === player);
  return index >= 0 ? index : null;
}
