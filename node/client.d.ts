// Types of the `turngate serve` client (client.js): JSON-RPC 2.0, params and results are the
// protocol types in snake_case (DESIGN §15).
import { EventEmitter } from 'node:events'
import { ChildProcess } from 'node:child_process'

export declare class RpcError extends Error {
  code?: number
  data?: unknown
}

export interface ServeClient extends EventEmitter {
  /** Call `method`; rejects with an RpcError carrying the JSON-RPC code. */
  call(method: string, params?: Record<string, unknown>): Promise<any>
  /** Close the connection; the server keeps this client's pending requests pending. */
  close(): void
  /** The spawned server, for `connect({ command })`. */
  process?: ChildProcess
}

export interface ConnectOptions {
  /** A Unix socket path (`turngate serve --socket PATH`). */
  socket?: string
  /** The argv of a `turngate serve` to spawn and speak to on its stdio. */
  command?: string[]
  /** Where the spawned server's stderr goes (default: inherit). */
  stderr?: 'inherit' | 'ignore' | 'pipe'
  /** `http://host:port` of `turngate serve --http` (calls only, no notifications). */
  http?: string
  /** The bearer token (STATE_DIR/token), with `http`. */
  token?: string
}

export declare function connect(opts: ConnectOptions): Promise<ServeClient>
