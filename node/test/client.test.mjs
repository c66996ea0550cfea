// The pure-JS `turngate serve` client against a real server: a stdio client asks, a socket
// client answers, an HTTP client reads; errors come back as RpcError with the JSON-RPC code.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, rmSync } from 'node:fs'

import { connect, RpcError } from '../client.mjs'
import { freePort, once, serveDir, turngateBin, waitFor } from './serve-helpers.mjs'

test('a stdio client asks, a socket client answers, an HTTP client reads the events', { timeout: 60_000 }, async (t) => {
  const d = serveDir()
  const port = await freePort()
  const a = await connect({
    command: [turngateBin(), 'serve', '--state-dir', d.state, '--store', d.store, '--socket', d.socket, '--http', `127.0.0.1:${port}`],
  })
  t.after(() => {
    a.close()
    rmSync(d.dir, { recursive: true, force: true })
  })
  await waitFor(() => existsSync(d.socket), 'the socket')
  const b = await connect({ socket: d.socket })
  t.after(() => b.close())

  const { turn_id } = await a.call('turn/start', { turn_id: 'js1', profile: { mode: 'supervised' }, workspace: d.workspace })
  assert.equal(turn_id, 'js1')
  const opened = once(b, 'turn/permission/request/opened')
  const resolvedA = once(a, 'turn/permission/request/resolved')
  const asking = a.call('turn/action/authorize', { turn_id, kind: 'shell_command', target: 'make test' })
  const { request } = await opened
  assert.equal(request.details.target, 'make test')
  const r = await b.call('turn/permission/request/respond', { request_id: request.id, resolution: 'allow_once' })
  assert.deepEqual(r, { resolution: 'allow_once', applied: true })
  const auth = await asking
  assert.equal(auth.outcome, 'allowed')
  assert.equal((await resolvedA).resolution, 'allow_once')

  await assert.rejects(b.call('turn/permission/request/respond', { request_id: 'apr_nope', resolution: 'deny' }),
    (e) => e instanceof RpcError && e.code === -32002)
  await assert.rejects(a.call('no/such/method'), (e) => e instanceof RpcError && e.code === -32601)

  await waitFor(async () => {
    try { d.token(); return true } catch { return false }
  }, 'the bearer token')
  const h = await connect({ http: `http://127.0.0.1:${port}`, token: d.token() })
  const { events } = await h.call('turn/events', { turn_id })
  const kinds = events.map((e) => e.kind)
  assert.deepEqual(kinds, ['profile_selected', 'approval_requested', 'approval_resolved', 'decision_allowed'])
  const bad = await connect({ http: `http://127.0.0.1:${port}`, token: 'wrong' })
  await assert.rejects(bad.call('turn/events', { turn_id }), /HTTP 401/)
})
