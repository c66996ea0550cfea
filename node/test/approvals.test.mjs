// The approval flow through the Node package: a gate under a supervised snapshot asks a
// JavaScript approver (a function, an async function), a rejection is a denial with its reason,
// a never-settling Promise leaves the request pending while the event loop keeps serving timers,
// and a broker approver is answered by a client that follows the notifications.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

import * as turngate from '../index.mjs'

const PLATFORM = { os: 'linux', landlock_abi: 7, seccomp: true, user_namespaces: true, seatbelt: false, restricted_token: false }

async function turn(approver, { broker, mode = 'supervised' } = {}) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-')))
  writeFileSync(path.join(dir, 'a.txt'), 'x')
  const snapshot = turngate.resolve({ mode, source: 'composer' }, { workspace_root: dir, execution_backend: 'native', platform: PLATFORM })
  const store = await turngate.Store.open(path.join(dir, 'audit.db'))
  const gate = new turngate.Gate('turn-1', snapshot, { store, approver, broker })
  return { dir, store, gate, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

test('an allowed read never reaches the approver; an ask does, with the request shown', async () => {
  const asks = []
  const { gate, store, dir, cleanup } = await turn(
    turngate.Approver.fromFunction((ask) => {
      asks.push(ask)
      return true
    }),
  )
  try {
    const read = await gate.authorize({ kind: 'file_read', target: 'a.txt' })
    assert.equal(read.outcome, 'allowed')
    assert.equal(asks.length, 0)
    const write = await gate.authorize({ kind: 'file_write', target: 'a.txt', tool: 'edit' })
    assert.equal(write.outcome, 'allowed')
    assert.equal(write.target, path.join(dir, 'a.txt'))
    assert.equal(asks.length, 1)
    assert.equal(asks[0].action.kind, 'file_write')
    assert.equal(asks[0].request.tool_name, 'edit')
    assert.match(asks[0].request.scope_hash, /^[0-9a-f]{64}$/)
    assert.equal(asks[0].verdict.effect, 'ask')
    const kinds = (await store.replay('turn-1')).map((e) => e.kind)
    assert.deepEqual(kinds, ['profile_selected', 'decision_allowed', 'approval_requested', 'approval_resolved', 'decision_allowed'])
  } finally {
    cleanup()
  }
})

test('an async approver answers; "deny" and false deny; a rejection is a denial with its reason', async () => {
  const answers = [Promise.resolve('approve'), 'deny', false, () => Promise.reject(new Error('no writes on Fridays'))]
  const { gate, cleanup } = await turn(turngate.Approver.fromFunction(async () => { const a = answers.shift(); return typeof a === 'function' ? a() : a }))
  try {
    assert.equal((await gate.authorize({ kind: 'file_write', target: 'a.txt' })).outcome, 'allowed')
    assert.equal((await gate.authorize({ kind: 'file_write', target: 'a.txt' })).outcome, 'denied')
    assert.equal((await gate.authorize({ kind: 'file_write', target: 'a.txt' })).outcome, 'denied')
    const rejected = await gate.authorize({ kind: 'file_write', target: 'a.txt' })
    assert.equal(rejected.outcome, 'denied')
    assert.match(rejected.reason, /no writes on Fridays/)
    assert.match(rejected.toolResult, /no writes on Fridays/)
  } finally {
    cleanup()
  }
})

test('a throwing approver is a denial with the error message', async () => {
  const { gate, cleanup } = await turn(
    turngate.Approver.fromFunction(() => {
      throw new TypeError('approver crashed')
    }),
  )
  try {
    const r = await gate.authorize({ kind: 'file_write', target: 'a.txt' })
    assert.equal(r.outcome, 'denied')
    assert.match(r.reason, /approver crashed/)
  } finally {
    cleanup()
  }
})

test('a denied action never reaches the approver', async () => {
  let called = 0
  const { gate, cleanup } = await turn(turngate.Approver.fromFunction(() => ++called && true))
  try {
    const r = await gate.authorize({ kind: 'file_write', target: '/etc/passwd' })
    assert.equal(r.outcome, 'denied')
    assert.equal(called, 0)
  } finally {
    cleanup()
  }
})

test('a never-settling approver leaves the request pending and the event loop serving timers', async () => {
  let asked = 0
  const { gate, cleanup } = await turn(
    turngate.Approver.fromFunction(() => {
      asked++
      return new Promise(() => {})
    }),
  )
  try {
    let settled = false
    const pending = gate.authorize({ kind: 'file_write', target: 'a.txt' }).finally(() => (settled = true))
    pending.catch(() => {})
    let ticks = 0
    const timer = setInterval(() => ticks++, 5)
    await sleep(200)
    clearInterval(timer)
    assert.equal(asked, 1)
    assert.equal(settled, false, 'the authorize call is still waiting')
    assert.ok(ticks >= 10, `timers kept firing while the approval was pending (${ticks} ticks)`)
    // Other calls of the same turn are not blocked by the pending one.
    assert.equal((await gate.authorize({ kind: 'file_read', target: 'a.txt' })).outcome, 'allowed')
    gate.close()
    await assert.rejects(pending, (e) => e instanceof turngate.ApprovalError && e.code === 'ERR_TURNGATE_APPROVAL')
  } finally {
    cleanup()
  }
})

test('a broker approver: a client follows notifications and answers allow_for_turn; later asks use the grant', async () => {
  const policy = turngate.Policy.mode('supervised')
  const broker = new turngate.Broker(policy)
  const sub = broker.subscribe()
  const { gate, store, cleanup } = await turn(turngate.Approver.broker(broker), { broker })
  try {
    const seen = []
    const client = (async () => {
      for await (const n of sub) {
        seen.push(n.method)
        if (n.method === 'turn/permission/request/requested') {
          const id = n.params.request?.id ?? n.params.id
          const r = broker.respond(id, 'allow_for_turn')
          assert.equal(r.applied, true)
          // Idempotent: a second answer returns the recorded outcome.
          assert.equal(broker.respond(id, 'deny').applied, false)
        }
        if (n.method === 'turn/permission/request/resolved') break
      }
    })()
    const first = await gate.authorize({ kind: 'file_write', target: 'a.txt' })
    await client
    assert.equal(first.outcome, 'allowed')
    assert.equal(first.cachedApproval, false)
    assert.deepEqual(seen, ['turn/permission/request/requested', 'turn/permission/request/resolved'])
    const second = await gate.authorize({ kind: 'file_write', target: 'a.txt' })
    assert.equal(second.outcome, 'allowed')
    assert.equal(second.cachedApproval, true)
    // A grant never widens to an unrelated scope: another file asks again (and nobody answers).
    const other = gate.authorize({ kind: 'file_write', target: 'b.txt' })
    await sleep(50)
    assert.equal(broker.pendingRequests().length, 1)
    broker.cancelTurn('turn-1')
    assert.equal((await other).outcome, 'denied')
    const rows = (await store.replay('turn-1')).map((e) => [e.kind, e.cached_approval_used])
    assert.deepEqual(rows.slice(-4), [['decision_allowed', true], ['approval_requested', false], ['approval_resolved', false], ['decision_denied', false]])
  } finally {
    broker.close()
    cleanup()
  }
})

test('errors are TurnGateError subclasses with the facade variant as code', async () => {
  assert.throws(() => turngate.Policy.mode('yolo'), (e) => e instanceof turngate.PolicyError && e instanceof turngate.TurnGateError && e.code === 'ERR_TURNGATE_POLICY')
  const broker = new turngate.Broker(turngate.Policy.tiered())
  assert.throws(() => broker.respond('nope', 'allow_once'), (e) => e instanceof turngate.ApprovalError && e.code === 'ERR_TURNGATE_APPROVAL')
  assert.throws(() => broker.respond('nope', 'maybe'), (e) => e instanceof turngate.InvalidInputError && e.code === 'ERR_TURNGATE_INVALID_INPUT')
  await assert.rejects(turngate.Store.open('/proc/nonexistent/dir/audit.db'), (e) => e instanceof turngate.StoreError && e.code === 'ERR_TURNGATE_STORE')
  assert.throws(
    () => turngate.resolve({ mode: 'supervised', source: 'composer' }, { workspace_root: 'relative/path', execution_backend: 'native', platform: PLATFORM }),
    (e) => e instanceof turngate.SnapshotError && e.snapshotCode === 'invalid_path',
  )
  broker.close()
})

test('broker.open: wait() resolves with the first resolution; a timeout expires the request', async () => {
  const broker = new turngate.Broker(turngate.Policy.mode('supervised'))
  const request = (id) => ({
    id,
    turn_id: 't1',
    tool_name: 'write_file',
    action_kind: 'file_write',
    scope_hash: turngate.scopeHash(turngate.scopeFromAction('file_write', '/w/a.txt', 'write_file')),
    reason: 'default',
    details: { target: '/w/a.txt' },
    visible_thread_ids: [],
    allowed_resolutions: ['allow_once', 'allow_for_turn', 'deny'],
  })
  try {
    const pending = broker.open(request('apr_1'), { kind: 'file_write', target: '/w/a.txt', tool: 'write_file' })
    assert.equal(pending.request.id, 'apr_1')
    assert.deepEqual(broker.pendingRequests().map((r) => r.id), ['apr_1'])
    const waited = pending.wait()
    assert.equal(broker.respond('apr_1', 'deny').applied, true)
    const outcome = await waited
    assert.equal(outcome.resolution, 'deny')
    assert.deepEqual(broker.outcome('apr_1'), outcome)
    await assert.rejects(pending.wait(), (e) => e instanceof turngate.ApprovalError)
    assert.throws(() => broker.open(request('apr_1'), { kind: 'file_write', target: '/w/a.txt' }), (e) => e instanceof turngate.ApprovalError)

    const expiring = broker.open(request('apr_2'), { kind: 'file_write', target: '/w/a.txt' }, 30)
    assert.equal((await expiring.wait()).resolution, 'expired')
  } finally {
    broker.close()
  }
})
