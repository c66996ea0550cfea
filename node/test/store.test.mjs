// The store's everyday API from Node: an in-memory store, durability levels, waiting for a
// person's answer without polling (waitResolved), resuming with the recorded decision, and a
// gate constructor that leaves the disk to the store's committer thread.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, realpathSync, rmSync, existsSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

import * as turngate from '../index.mjs'

const PLATFORM = { os: 'linux', landlock_abi: 7, seccomp: true, user_namespaces: true, seatbelt: false, restricted_token: false }

function workspace() {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-store-')))
  writeFileSync(path.join(dir, 'a.txt'), 'x')
  const snapshot = turngate.resolve({ mode: 'supervised', source: 'composer' }, { workspace_root: dir, execution_backend: 'native', platform: PLATFORM })
  return { dir, snapshot, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

test('Store.memory() records and replays like a file store and writes nothing to disk', async () => {
  const { dir, snapshot, cleanup } = workspace()
  try {
    const store = turngate.Store.memory()
    assert.equal(store.path, ':memory:')
    const gate = new turngate.Gate('mem-1', snapshot, { store, approver: turngate.Approver.denyAll() })
    assert.equal((await gate.authorize({ kind: 'file_read', target: 'a.txt' })).outcome, 'allowed')
    assert.equal((await gate.authorize({ kind: 'file_write', target: 'a.txt' })).outcome, 'denied')
    const events = await store.replay('mem-1')
    assert.deepEqual(events.map((e) => e.kind), ['profile_selected', 'decision_allowed', 'approval_requested', 'approval_resolved', 'decision_denied'])
    assert.deepEqual(events.map((e) => e.seq), [1, 2, 3, 4, 5])
    assert.deepEqual(readdirSync(dir), ['a.txt'])
    // Another memory store is another database.
    assert.deepEqual(await turngate.Store.memory().replay('mem-1'), [])
  } finally {
    cleanup()
  }
})

test('durability is process or power; another name is InvalidInputError naming it', async () => {
  const { dir, cleanup } = workspace()
  try {
    const power = await turngate.Store.open(path.join(dir, 'power.db'), { durability: 'power' })
    assert.equal(await power.append({ turn_id: 't', seq: 0, kind: 'profile_selected', profile_mode: 'supervised', profile_source: 'composer', cached_approval_used: false }), 1)
    await turngate.Store.open(path.join(dir, 'process.db'), { durability: 'process' })
    await assert.rejects(turngate.Store.open(path.join(dir, 'x.db'), { durability: 'fsync' }), (e) => e instanceof turngate.InvalidInputError && /durability/.test(e.message) && /fsync/.test(e.message))
    assert.equal(existsSync(path.join(dir, 'x.db')), false)
    await assert.rejects(turngate.Store.open(':memory:', { durability: 'power' }), turngate.InvalidInputError)
    assert.throws(() => turngate.Store.open(path.join(dir, 'y.db'), 'power'), turngate.InvalidInputError)
  } finally {
    cleanup()
  }
})

test('waitResolved wakes when another store handle on the file records the answer; resume() acts on it once', async () => {
  const { dir, snapshot, cleanup } = workspace()
  try {
    const db = path.join(dir, 'audit.db')
    const store = await turngate.Store.open(db)
    const gate = new turngate.Gate('wait-1', snapshot, { store, approver: turngate.Approver.deferAll() })
    const deferred = await gate.authorize({ kind: 'file_write', target: 'a.txt' })
    assert.equal(deferred.outcome, 'deferred')
    const id = deferred.request.id
    // Still pending: a timeout resolves to the pending approval, and resume() with no
    // decision refuses.
    const pending = await gate.waitResolved(id, 20)
    assert.equal(pending.resolution ?? null, null)
    await assert.rejects(gate.resume(id), turngate.ApprovalError)
    // A person answers through another connection (what `turngate approvals` does).
    const waiting = gate.waitResolved(id)
    let settled = false
    waiting.then(() => { settled = true })
    await sleep(30)
    assert.equal(settled, false)
    const person = await turngate.Store.open(db)
    assert.equal((await person.resolve(id, 'allow_once', 'person')).applied, true)
    const resolved = await waiting
    assert.equal(resolved.resolution.resolution, 'allow_once')
    const auth = await gate.resume(id)
    assert.equal(auth.outcome, 'allowed')
    assert.equal(auth.target, path.join(dir, 'a.txt'))
    // Spent once: a second resume is refused.
    await assert.rejects(gate.resume(id), turngate.ApprovalError)
    // An unknown id rejects instead of waiting forever.
    await assert.rejects(gate.waitResolved('apr_nope'), turngate.TurnGateError)
  } finally {
    cleanup()
  }
})

test('a recorded deny resumes as the denial', async () => {
  const { snapshot, cleanup } = workspace()
  try {
    const store = turngate.Store.memory()
    const gate = new turngate.Gate('wait-2', snapshot, { store, approver: turngate.Approver.deferAll() })
    const { request } = await gate.authorize({ kind: 'file_write', target: 'a.txt' })
    await store.resolve(request.id, 'deny', 'not today')
    assert.equal((await store.waitResolved(request.id)).resolution.resolution, 'deny')
    const auth = await gate.resume(request.id)
    assert.equal(auth.outcome, 'denied')
  } finally {
    cleanup()
  }
})

test('closing the gate rejects a wait in progress', async () => {
  const { snapshot, cleanup } = workspace()
  try {
    const gate = new turngate.Gate('wait-3', snapshot, { store: turngate.Store.memory(), approver: turngate.Approver.deferAll() })
    const { request } = await gate.authorize({ kind: 'file_write', target: 'a.txt' })
    const waiting = gate.waitResolved(request.id)
    await sleep(10)
    gate.close()
    await assert.rejects(waiting, turngate.ApprovalError)
  } finally {
    cleanup()
  }
})
