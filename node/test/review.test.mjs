// Reviewable writes from Node: `gate.spawn({ ..., review: true })` runs a real child against an
// overlay, the workspace stays untouched, and the store lists, shows, applies and discards the
// change set; every refusal is a `ChangesError` (`ERR_TURNGATE_CHANGES`) with its
// `changesCode` and `paths`.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import * as turngate from '../index.mjs'

const LINE = "sh -c 'echo new > a.txt; rm b.txt'"

async function fixture(t, storeIn = 'state/audit.db') {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-review-')))
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const ws = path.join(root, 'ws')
  mkdirSync(ws)
  writeFileSync(path.join(ws, 'b.txt'), 'b\n')
  const db = path.join(root, storeIn)
  mkdirSync(path.dirname(db), { recursive: true })
  const store = await turngate.Store.open(db)
  return { root, ws, store, gate: gateOver(ws, store) }
}

function gateOver(ws, store) {
  const snap = turngate.resolve({ mode: 'auto_accept_edits' }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
  return new turngate.Gate('t-review', snap, { store, approver: turngate.Approver.approveAll() })
}

async function run(fx, target = LINE) {
  const r = await fx.gate.spawn({ kind: 'shell_command', target, cwd: fx.ws, review: true })
  assert.equal(r.outcome, 'ran', JSON.stringify(r))
  assert.equal(r.exitCode, 0, r.stderr.toString())
  assert.ok(r.changeSet, 'a reviewed spawn carries its change set')
  return r.changeSet
}

/** Rejects with a ChangesError of `code`; returns the error. */
async function changesError(promise, code) {
  let error
  await assert.rejects(promise, (e) => {
    error = e
    return e instanceof turngate.ChangesError && e.code === 'ERR_TURNGATE_CHANGES' && e.changesCode === code
  })
  return error
}

const read = (p) => readFileSync(p, 'utf8')

test('a reviewed spawn holds its writes until the store applies them', async (t) => {
  const fx = await fixture(t)
  const summary = await run(fx)
  assert.equal(existsSync(path.join(fx.ws, 'a.txt')), false)
  assert.equal(read(path.join(fx.ws, 'b.txt')), 'b\n')
  assert.deepEqual(summary.added, [path.join(fx.ws, 'a.txt')])
  assert.deepEqual(summary.deleted, [path.join(fx.ws, 'b.txt')])
  assert.deepEqual([summary.modified, summary.modeChanged, summary.unsupported], [[], [], []])
  assert.equal(summary.summary, '1 added, 1 deleted')

  const listed = await fx.store.changeSets()
  assert.deepEqual(listed.map((s) => s.id), [summary.id])
  const shown = await fx.store.changeSet(summary.id)
  assert.deepEqual(shown.changes.map((c) => [c.path, c.kind]), [['a.txt', 'added'], ['b.txt', 'deleted']])
  assert.equal(shown.changes[0].diff, '--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+new\n')

  const applied = await fx.store.applyChangeSet(summary.id, { by: 'person:ana' })
  assert.equal(applied.status, 'applied')
  assert.equal(applied.resolved_by, 'person:ana')
  assert.equal(read(path.join(fx.ws, 'a.txt')), 'new\n')
  assert.equal(existsSync(path.join(fx.ws, 'b.txt')), false)

  await changesError(fx.store.applyChangeSet(summary.id), 'not_pending')
  await changesError(fx.store.discardChangeSet(summary.id), 'not_pending')

  const plain = await fx.gate.spawn({ kind: 'shell_command', target: 'touch direct.txt', cwd: fx.ws })
  assert.equal(plain.changeSet ?? null, null)
  assert.equal(existsSync(path.join(fx.ws, 'direct.txt')), true)
})

test('a discarded run leaves the workspace untouched and cannot be applied', async (t) => {
  const fx = await fixture(t)
  const summary = await run(fx)
  const discarded = await fx.store.discardChangeSet(summary.id, { by: 'person:ana' })
  assert.equal(discarded.status, 'discarded')
  assert.equal(existsSync(path.join(fx.ws, 'a.txt')), false)
  assert.equal(read(path.join(fx.ws, 'b.txt')), 'b\n')
  await changesError(fx.store.applyChangeSet(summary.id), 'not_pending')
  assert.equal(existsSync(path.join(fx.ws, 'a.txt')), false, 'apply after discard wrote')
})

test('apply refuses a conflict and names the path', async (t) => {
  const fx = await fixture(t)
  const summary = await run(fx)
  writeFileSync(path.join(fx.ws, 'b.txt'), 'edited meanwhile\n')
  const e = await changesError(fx.store.applyChangeSet(summary.id), 'conflicts')
  assert.deepEqual(e.paths, [path.join(fx.ws, 'b.txt')])
  assert.match(e.message, /b\.txt/)
  assert.equal(existsSync(path.join(fx.ws, 'a.txt')), false)
  assert.equal(read(path.join(fx.ws, 'b.txt')), 'edited meanwhile\n')
})

test('ids from another store or a path are refused', async (t) => {
  const fx = await fixture(t)
  const summary = await run(fx)
  mkdirSync(path.join(fx.root, 'other'))
  const other = await turngate.Store.open(path.join(fx.root, 'other', 'audit.db'))
  await changesError(other.applyChangeSet(summary.id), 'not_found')
  for (const bad of ['../state/changes', '../../etc/passwd', 'cs-1/../../x', '']) {
    await changesError(fx.store.applyChangeSet(bad), 'bad_id')
    await changesError(fx.store.changeSet(bad), 'bad_id')
  }
  assert.equal(existsSync(path.join(fx.ws, 'a.txt')), false)
  // Unknown apply options are refused (synchronously, like a malformed invocation), not ignored.
  assert.throws(() => fx.store.applyChangeSet(summary.id, { confirm: true }), turngate.InvalidInputError)
  assert.equal(existsSync(path.join(fx.ws, 'a.txt')), false)
})

test('review is refused where the store is the workspace, or on a call that is not a spawn', async (t) => {
  const inside = await fixture(t, 'ws/audit.db')
  await assert.rejects(
    inside.gate.spawn({ kind: 'shell_command', target: 'touch ran.txt', cwd: inside.ws, review: true }),
    turngate.RunError,
  )
  assert.equal(existsSync(path.join(inside.ws, 'ran.txt')), false, 'the command ran')
  assert.deepEqual(await inside.store.changeSets(), [])

  const fx = await fixture(t)
  await assert.rejects(
    fx.gate.authorize({ kind: 'file_write', target: path.join(fx.ws, 'x.txt'), review: true }),
    turngate.InvalidInputError,
  )
})
