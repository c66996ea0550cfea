// Gate.guard: a tool function wrapped so that every call is authorized first. The wrapper only
// calls gate.authorize; these tests check that an allowed call runs the function with its own
// arguments, and that a denied or deferred one never runs it.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import * as turngate from '../index.mjs'

async function turn(mode, approver) {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-guard-')))
  const ws = path.join(root, 'ws')
  mkdirSync(ws)
  const snap = turngate.resolve({ mode }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
  const store = await turngate.Store.open(path.join(root, 'audit.db'))
  const gate = new turngate.Gate('turn-guard', snap, { store, approver })
  return { root, ws, gate, store, cleanup: () => rmSync(root, { recursive: true, force: true }) }
}

test('an allowed call runs the function with its arguments and returns its result', async () => {
  const asks = []
  const t = await turn('auto_accept_edits', turngate.Approver.fromFunction((ask) => { asks.push(ask); return 'deny' }))
  try {
    const writeNote = t.gate.guard({ kind: 'file_write', target: (p) => p }, function writeNote(p, text) {
      writeFileSync(p, text)
      return `wrote ${text.length} bytes`
    })
    const note = path.join(t.ws, 'note.txt')
    assert.equal(await writeNote(note, 'hello'), 'wrote 5 bytes')
    assert.equal(readFileSync(note, 'utf8'), 'hello')
    assert.equal(asks.length, 0, 'an allowed write never reaches the approver')
    const rows = (await t.store.replay('turn-guard')).filter((e) => e.kind === 'decision_allowed')
    assert.equal(rows.length, 1, 'the call is recorded')
    assert.equal(rows[0].action_kind, 'file_write')
  } finally {
    t.cleanup()
  }
})

test('a denied call never runs the function and returns the text a model can adapt to', async () => {
  let asked = 0
  const t = await turn('auto_accept_edits', turngate.Approver.fromFunction(() => { asked++; return 'approve' }))
  try {
    let ran = false
    const outside = path.join(t.root, 'outside.txt')
    const write = t.gate.guard({ kind: 'file_write', target: (p) => p, tool: 'write_file' }, (p) => { ran = true; writeFileSync(p, 'x') })
    const result = await write(outside)
    assert.equal(ran, false)
    assert.equal(existsSync(outside), false)
    assert.equal(asked, 0, 'a denied action never reaches the approver')
    assert.equal(typeof result, 'string')
    assert.match(result, /outside_roots|outside/)

    const strict = t.gate.guard({ kind: 'file_write', target: (p) => p, onDeny: 'throw' }, () => { ran = true })
    await assert.rejects(strict(outside), (e) => {
      assert.ok(e instanceof turngate.PermissionDeniedError)
      assert.ok(e instanceof turngate.TurnGateError)
      assert.equal(e.code, 'PermissionDenied')
      assert.equal(e.outcome, 'denied')
      assert.equal(e.kind, 'file_write')
      assert.equal(e.target, outside)
      assert.equal(e.toolResult, result)
      assert.match(e.reason, /outside/)
      return true
    })
    assert.equal(ran, false)
  } finally {
    t.cleanup()
  }
})

test('a deferred call does not run the function and says it is pending', async () => {
  const t = await turn('supervised', turngate.Approver.deferAll())
  try {
    let ran = false
    const target = path.join(t.ws, 'report.md')
    const write = t.gate.guard({ kind: 'file_write', target }, () => { ran = true })
    assert.match(await write(), /^Permission pending/)
    const strict = t.gate.guard({ kind: 'file_write', target, onDeny: 'throw' }, () => { ran = true })
    await assert.rejects(strict(), (e) => e instanceof turngate.PermissionDeniedError && e.outcome === 'deferred')
    assert.equal(ran, false)
    assert.equal((await t.store.pendingApprovals()).length, 2, 'both asks wait in the store')
  } finally {
    t.cleanup()
  }
})

test('an approved ask runs the function once, with `this` kept', async () => {
  const t = await turn('supervised', turngate.Approver.fromFunction((ask) => (ask.action.tool === 'append' ? 'approve' : 'deny')))
  try {
    const log = {
      lines: [],
      append: null,
    }
    log.append = t.gate.guard({ kind: 'file_write', target: path.join(t.ws, 'log.txt'), tool: 'append' }, function (line) {
      this.lines.push(line)
      return this.lines.length
    })
    assert.equal(await log.append('one'), 1)
    assert.deepEqual(log.lines, ['one'])
  } finally {
    t.cleanup()
  }
})

test('the tool name defaults to the function name', async () => {
  const tools = []
  const t = await turn('supervised', turngate.Approver.fromFunction((ask) => { tools.push(ask.action.tool); return 'approve' }))
  try {
    const saveReport = t.gate.guard({ kind: 'file_write', target: path.join(t.ws, 'r.md') }, function saveReport() { return 'saved' })
    assert.equal(await saveReport(), 'saved')
    assert.deepEqual(tools, ['saveReport'])
  } finally {
    t.cleanup()
  }
})

test('bad options are an InvalidInputError naming the option, before any call', async () => {
  const t = await turn('auto_accept_edits', turngate.Approver.denyAll())
  try {
    const fn = () => {}
    for (const [options, name] of [
      [null, 'options'],
      [{ target: 'x' }, 'options.kind'],
      [{ kind: 'file_write' }, 'options.target'],
      [{ kind: 'file_write', target: 'x', onDeny: 'ignore' }, 'options.onDeny'],
      [{ kind: 'file_write', target: 'x', tool: 7 }, 'options.tool'],
    ]) {
      assert.throws(() => t.gate.guard(options, fn), (e) => e instanceof turngate.InvalidInputError && e.message.includes(name), name)
    }
    assert.throws(() => t.gate.guard({ kind: 'file_write', target: 'x' }), turngate.InvalidInputError)
    // An unknown kind is the core's error, at the call.
    const bad = t.gate.guard({ kind: 'file_delete', target: 'x' }, fn)
    await assert.rejects(bad(), (e) => e instanceof turngate.PolicyError && e.message.includes('file_delete'))
  } finally {
    t.cleanup()
  }
})
