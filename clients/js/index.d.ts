// Types of @blackdrez/client (index.js); the protocol's own types are in protocol.d.ts, generated
// from the protocol's JSON Schema (`python -m blackdrez.protocol.typescript`).
import type * as P from "./protocol.js";

export * from "./protocol.js";

export declare const VERSIONS: number[];

/** An error reply (``error``), as the rejection of a request. */
export declare class ServerError extends globalThis.Error {
  constructor(reply: P.Error);
  readonly code: string;
  readonly retry_after: number | null;
  readonly reply: P.Error;
}

/** What is held of one table, kept in step with its snapshots and updates. */
export interface TableState {
  seq: number;
  seat: number | null;
  info: P.TableInfo;
  view: any;
  legal: any[];
  deadline: number | null;
}

export interface ClientOptions {
  /** A new guest's display name. */
  name?: string;
  /** A session token from an earlier welcome: the same player. */
  token?: string;
  encoding?: "json" | "msgpack";
  /** Free text naming the client program, for the server's logs. */
  client?: string;
  /** Open a dropped connection again (default true). */
  reconnect?: boolean;
  /** Keep every table in step (default true; false: the application does). */
  tables?: boolean;
  /** A WebSocket class (default: the global one). */
  WebSocket?: unknown;
  /** MessagePack functions (default: @msgpack/msgpack, loaded when encoding is "msgpack"). */
  msgpack?: { encode(value: unknown): Uint8Array; decode(data: Uint8Array): unknown };
  /** Where the session token is kept (default: in memory). */
  tokenStore?: { get(): string | null; set(token: string | null): void };
}

/** A message as sent: its ``id`` is given by the client. */
export type Outgoing = P.ClientMessage extends infer M ? (M extends { id?: unknown } ? Omit<M, "id"> : M) : never;

export declare class Client extends EventTarget {
  constructor(url: string, options?: ClientOptions);
  static connect(url: string, options?: ClientOptions): Promise<Client>;
  readonly url: string;
  token: string | null;
  name: string | null;
  /** The last welcome (kept while reconnecting). */
  welcome: P.Welcome | null;
  greeted: boolean;
  readonly tables: Map<string, TableState>;
  readonly connected: boolean;
  open(): Promise<P.Welcome>;
  close(code?: number, reason?: string): void;
  request(message: Outgoing, options?: { retryRateLimited?: boolean }): Promise<P.ServerMessage>;
  send(message: Outgoing): Promise<void>;
  table(table: string): TableState | undefined;
  act(table: string, action: unknown): Promise<P.ServerMessage>;
  waitFor(predicate: (message: P.ServerMessage) => boolean, ms?: number): Promise<P.ServerMessage>;
  /** To extend: the hello greeted with. */
  protected hello(): P.Hello;
  /** To extend: announce a message (``reply``: it answered a request). */
  protected deliver(message: P.ServerMessage, reply: boolean): void;
  /** To extend: milliseconds before the next reconnection. */
  protected retryDelay(): number;
  /** To extend: the handshake was refused. */
  protected refused(error: ServerError): void;
}
