'use strict'
// A small client for `turngate serve` (the Turns API out of process, DESIGN §15): pure
// JavaScript, no native addon. It only carries JSON-RPC 2.0; every decision is the server's.
//
//   const { connect } = require('turngate/client')
//   const c = await connect({ socket: '/run/user/1000/turngate.sock' })   // a Unix socket
//   const c = await connect({ command: ['turngate', 'serve', '--state-dir', dir] })  // stdio
//   const c = await connect({ http: 'http://127.0.0.1:8731', token })     // POST /rpc (no notifications)
//   c.on('turn/permission/request/opened', (params) => ...)
//   const { turn_id } = await c.call('turn/start', { profile: { mode: 'supervised' }, workspace })
//   const auth = await c.call('turn/action/authorize', { turn_id, kind: 'shell_command', target: 'make' })
//   c.close()

const net = require('node:net')
const { spawn } = require('node:child_process')
const { EventEmitter } = require('node:events')

/** A JSON-RPC error answered by the server: `code` is the JSON-RPC code. */
class RpcError extends Error {
  constructor(error) {
    super(error && error.message ? error.message : 'JSON-RPC error')
    this.name = 'RpcError'
    this.code = error ? error.code : undefined
    this.data = error ? error.data : undefined
  }
}

class LineClient extends EventEmitter {
  constructor(readable, writable, onClose) {
    super()
    this._writable = writable
    this._onClose = onClose
    this._next = 1
    this._pending = new Map()
    this._buf = ''
    readable.setEncoding('utf8')
    readable.on('data', (chunk) => {
      this._buf += chunk
      let i
      while ((i = this._buf.indexOf('\n')) >= 0) {
        const line = this._buf.slice(0, i).trim()
        this._buf = this._buf.slice(i + 1)
        if (line) this._message(line)
      }
    })
    readable.on('close', () => this._closed(new Error('turngate serve closed the connection')))
    readable.on('error', (e) => this._closed(e))
  }

  _message(line) {
    let msg
    try {
      msg = JSON.parse(line)
    } catch (e) {
      this.emit('error', new Error(`turngate serve sent a line that is not JSON: ${line.slice(0, 200)}`))
      return
    }
    if (msg.id !== undefined && msg.id !== null && this._pending.has(msg.id)) {
      const { resolve, reject } = this._pending.get(msg.id)
      this._pending.delete(msg.id)
      if (msg.error) reject(new RpcError(msg.error))
      else resolve(msg.result)
    } else if (typeof msg.method === 'string') {
      this.emit(msg.method, msg.params)
      this.emit('notification', msg)
    } else if (msg.error) {
      this.emit('error', new RpcError(msg.error))
    }
  }

  _closed(err) {
    for (const { reject } of this._pending.values()) reject(err)
    this._pending.clear()
    this.emit('close')
  }

  /** Call `method` with `params`; resolves with the result, rejects with an RpcError. */
  call(method, params = {}) {
    const id = this._next++
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject })
      this._writable.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n')
    })
  }

  /** Close the connection. The server keeps the requests this client left pending. */
  close() {
    this._onClose()
  }
}

class HttpClient extends EventEmitter {
  constructor(base, token) {
    super()
    this._base = base.replace(/\/+$/, '')
    this._token = token
    this._next = 1
  }

  async call(method, params = {}) {
    const id = this._next++
    const resp = await fetch(this._base + '/rpc', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this._token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
    })
    if (!resp.ok) throw new Error(`turngate serve: HTTP ${resp.status}: ${await resp.text()}`)
    const msg = await resp.json()
    if (msg.error) throw new RpcError(msg.error)
    return msg.result
  }

  close() {}
}

/**
 * Connect to `turngate serve`: `{socket}` (a Unix socket path), `{command}` (argv of a
 * `turngate serve` to spawn and speak to on its stdio) or `{http, token}` (calls only: HTTP has
 * no notifications without a WebSocket).
 */
function connect(opts = {}) {
  if (opts.socket) {
    return new Promise((resolve, reject) => {
      const sock = net.createConnection(opts.socket)
      sock.once('error', reject)
      sock.once('connect', () => {
        sock.off('error', reject)
        resolve(new LineClient(sock, sock, () => sock.end()))
      })
    })
  }
  if (opts.command) {
    const [cmd, ...args] = opts.command
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', opts.stderr ?? 'inherit'] })
    const client = new LineClient(child.stdout, child.stdin, () => {
      child.stdin.end()
      child.kill()
    })
    client.process = child
    return Promise.resolve(client)
  }
  if (opts.http) {
    if (!opts.token) return Promise.reject(new Error('connect({http}) needs the bearer token'))
    return Promise.resolve(new HttpClient(opts.http, opts.token))
  }
  return Promise.reject(new Error('connect() needs socket, command or http'))
}

module.exports = { connect, RpcError }
