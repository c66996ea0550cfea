// Gate.guard: a tool function wrapped so that every call is authorized first, and runs the action
// that was decided or nothing. These tests check that an allowed call runs the function, that a
// denied or deferred one never runs it, and that the function gets the checked path (or the
// reviewer's modified action) in place of the argument the target came from.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
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
      assert.equal(e.code, 'ERR_TURNGATE_PERMISSION_DENIED')
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

// ---- what runs is what was decided ----------------------------------------------------------
// A file tool receives the resolved absolute path the gate checked (a relative path resolves
// against the snapshot's sandbox.cwd, never process.cwd()); a reviewer's modified action
// replaces the original; a modified action the policy denies, or of another kind, runs nothing.

function denyWrite(snap, pattern) {
  snap.permission_profile.effective_policy = turngate.Policy.fromObject(snap.permission_profile.effective_policy).rule('file_write', 'deny', pattern).toObject()
  return snap
}

async function decided(answer, { deny } = {}) {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-guard-')))
  const ws = path.join(root, 'ws')
  const elsewhere = path.join(root, 'elsewhere')
  mkdirSync(ws)
  mkdirSync(elsewhere)
  let snap = turngate.resolve({ mode: 'supervised' }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
  if (deny) snap = denyWrite(snap, deny)
  const store = await turngate.Store.open(path.join(root, 'audit.db'))
  const approver = typeof answer === 'function' ? turngate.Approver.fromFunction(answer) : turngate.Approver.approveAll()
  const gate = new turngate.Gate('turn-decided', snap, { store, approver })
  const seen = []
  const writer = (options) => gate.guard({ kind: 'file_write', ...options }, function writeFile(p, text = 'new') {
    seen.push(p)
    writeFileSync(p, text)
    return 'ok'
  })
  const cwd = process.cwd()
  return {
    root, ws, elsewhere, gate, seen, writer,
    cleanup: () => {
      process.chdir(cwd)
      rmSync(root, { recursive: true, force: true })
    },
  }
}

test('after chdir away, a relative path is written inside the workspace, not the cwd', async () => {
  const t = await decided()
  try {
    const write = t.writer({ arg: 0 })
    process.chdir(t.elsewhere)
    assert.equal(await write('notes.txt', 'hi'), 'ok')
    assert.equal(readFileSync(path.join(t.ws, 'notes.txt'), 'utf8'), 'hi')
    assert.equal(existsSync(path.join(t.elsewhere, 'notes.txt')), false)
    assert.deepEqual(t.seen, [path.join(t.ws, 'notes.txt')])
    // A second call is authorized again and gets its own checked path; `..` is normalized.
    mkdirSync(path.join(t.ws, 'sub'))
    assert.equal(await write('sub/../sub/./m.txt'), 'ok')
    assert.equal(t.seen[1], path.join(t.ws, 'sub', 'm.txt'))
  } finally {
    t.cleanup()
  }
})

test('a property of the first argument is replaced on a copy, the caller\'s object untouched', async () => {
  const t = await decided()
  try {
    const seen = []
    const write = t.gate.guard({ kind: 'file_write', arg: 'path' }, function writeFile(req) {
      seen.push(req)
      writeFileSync(req.path, req.content)
      return 'ok'
    })
    process.chdir(t.elsewhere)
    const req = { path: 'notes.txt', content: 'x' }
    assert.equal(await write(req), 'ok')
    assert.deepEqual(seen, [{ path: path.join(t.ws, 'notes.txt'), content: 'x' }])
    assert.equal(req.path, 'notes.txt')
    assert.equal(existsSync(path.join(t.elsewhere, 'notes.txt')), false)
    await assert.rejects(write('notes.txt'), (e) => e instanceof turngate.InvalidInputError && e.message.includes('first argument'))
    await assert.rejects(write({ content: 'x' }), (e) => e instanceof turngate.InvalidInputError && e.message.includes('no such argument'))
  } finally {
    t.cleanup()
  }
})

test('a symlink inside the workspace is passed resolved; paths leaving it run nothing', async () => {
  const t = await decided()
  try {
    mkdirSync(path.join(t.ws, 'real'))
    symlinkSync(path.join(t.ws, 'real'), path.join(t.ws, 'link'))
    symlinkSync(t.elsewhere, path.join(t.ws, 'link_out'))
    const write = t.writer({ arg: 0 })
    assert.equal(await write(path.join(t.ws, 'link', 'a.txt')), 'ok')
    assert.deepEqual(t.seen, [path.join(t.ws, 'real', 'a.txt')])
    process.chdir(t.elsewhere)
    for (const escape of ['../elsewhere/x.txt', 'link_out/x.txt', path.join(t.elsewhere, 'abs.txt')]) {
      const refused = await write(escape)
      assert.match(refused, /^Permission denied by turngate/, escape)
    }
    assert.equal(t.seen.length, 1)
    assert.deepEqual(readdirSync(t.elsewhere), [])
  } finally {
    t.cleanup()
  }
})

test('a path swapped for a symlink while the approver decides runs nothing', async () => {
  const t = await decided((ask) => {
    // What an attacker racing the check would do: after the check, before the write.
    symlinkSync(path.join(path.dirname(ask.action.target), 'other.txt'), ask.action.target)
    return 'approve'
  })
  try {
    writeFileSync(path.join(t.ws, 'other.txt'), 'other')
    const refused = await t.writer({ arg: 0 })(path.join(t.ws, 'a.txt'))
    assert.match(refused, /^Permission denied by turngate.*now resolves/)
    assert.deepEqual(t.seen, [])
    assert.equal(readFileSync(path.join(t.ws, 'other.txt'), 'utf8'), 'other')
  } finally {
    t.cleanup()
  }
})

test('a target function runs fn only with the exact checked path, and names it otherwise', async () => {
  const t = await decided()
  try {
    const write = t.writer({ target: (p) => p })
    process.chdir(t.elsewhere)
    const refused = await write('notes.txt')
    assert.match(refused, /^Permission denied by turngate/)
    assert.ok(refused.includes(path.join(t.ws, 'notes.txt')), refused)
    assert.deepEqual(t.seen, [])
    assert.equal(existsSync(path.join(t.elsewhere, 'notes.txt')), false)
    assert.equal(await write(path.join(t.ws, 'notes.txt')), 'ok')
    const strict = t.writer({ target: (p) => p, onDeny: 'throw' })
    await assert.rejects(strict('other.txt'), (e) => e instanceof turngate.PermissionDeniedError && e.kind === 'file_write' && e.target === 'other.txt' && e.outcome === 'denied')
    assert.equal(t.seen.length, 1)
  } finally {
    t.cleanup()
  }
})

test('a modified approval writes the modified path and leaves the original untouched', async () => {
  for (const modified of ['ABS', 'b.txt']) {
    const t = await decided((ask) => ({ decision: 'approve', modified: { kind: 'file_write', target: modified === 'ABS' ? path.join(path.dirname(ask.action.target), 'b.txt') : modified } }))
    try {
      const original = path.join(t.ws, 'a.txt')
      writeFileSync(original, 'original')
      const write = t.writer({ arg: 0 })
      process.chdir(t.elsewhere)
      assert.equal(await write(original), 'ok', modified)
      assert.equal(readFileSync(original, 'utf8'), 'original')
      assert.equal(readFileSync(path.join(t.ws, 'b.txt'), 'utf8'), 'new')
      assert.deepEqual(t.seen, [path.join(t.ws, 'b.txt')])
      assert.deepEqual(readdirSync(t.elsewhere), [])
      // With a target function, the modified path cannot be passed: nothing runs.
      const opaque = t.writer({ target: (p) => p })
      assert.match(await opaque(original), /^Permission denied by turngate.*b\.txt/)
      assert.equal(t.seen.length, 1)
    } finally {
      t.cleanup()
    }
  }
})

test('a modified approval whose target is denied runs nothing', async () => {
  for (const target of ['.env', 'ABS', 'OUTSIDE']) {
    const t = await decided((ask) => {
      const ws = path.dirname(ask.action.target)
      const to = target === 'ABS' ? path.join(ws, '.env') : target === 'OUTSIDE' ? path.join(path.dirname(ws), 'elsewhere', 'x.txt') : target
      return { decision: 'approve', modified: { kind: 'file_write', target: to } }
    }, { deny: '**/.env' })
    try {
      const original = path.join(t.ws, 'a.txt')
      writeFileSync(original, 'original')
      const refused = await t.writer({ arg: 0 })(original)
      assert.match(refused, /^Permission denied by turngate/, target)
      assert.deepEqual(t.seen, [])
      assert.equal(readFileSync(original, 'utf8'), 'original')
      assert.equal(existsSync(path.join(t.ws, '.env')), false)
      assert.deepEqual(readdirSync(t.elsewhere), [])
    } finally {
      t.cleanup()
    }
  }
})

test('a modified approval of another kind runs nothing', async () => {
  for (const modified of [{ kind: 'shell_command', target: 'touch pwned' }, { kind: 'file_read', target: 'a.txt' }, { kind: 'network', target: 'example.com:443' }]) {
    const t = await decided(() => ({ decision: 'approve', modified }))
    try {
      const original = path.join(t.ws, 'a.txt')
      writeFileSync(original, 'original')
      const refused = await t.writer({ arg: 0 })(original)
      assert.match(refused, /^Permission denied by turngate/, modified.kind)
      assert.ok(refused.includes('performs only file_write'), refused)
      await assert.rejects(t.writer({ arg: 0, onDeny: 'throw' })(original), (e) => e instanceof turngate.PermissionDeniedError && e.kind === modified.kind)
      assert.deepEqual(t.seen, [])
      assert.equal(readFileSync(original, 'utf8'), 'original')
    } finally {
      t.cleanup()
    }
  }
})

test('a modified shell command replaces the argument; with a target function nothing runs', async () => {
  const t = await decided(() => ({ decision: 'approve', modified: { kind: 'shell_command', target: 'echo safer' } }))
  try {
    const seen = []
    const run = t.gate.guard({ kind: 'shell_command', arg: 0 }, (cmd) => { seen.push(cmd); return 'ran' })
    const opaque = t.gate.guard({ kind: 'shell_command', target: (cmd) => cmd }, (cmd) => { seen.push(cmd); return 'ran' })
    assert.equal(await run('echo original'), 'ran')
    assert.deepEqual(seen, ['echo safer'])
    assert.match(await opaque('echo original'), /^Permission denied by turngate/)
    assert.deepEqual(seen, ['echo safer'])
  } finally {
    t.cleanup()
  }
})

test('options.arg is validated before any call', async () => {
  const t = await decided()
  try {
    for (const [options, text] of [
      [{ kind: 'file_write', arg: 0, target: 'x' }, 'not both'],
      [{ kind: 'file_write', arg: -1 }, 'options.arg'],
      [{ kind: 'file_write', arg: 1.5 }, 'options.arg'],
      [{ kind: 'file_write', arg: '' }, 'options.arg'],
    ]) {
      assert.throws(() => t.gate.guard(options, () => {}), (e) => e instanceof turngate.InvalidInputError && e.message.includes(text), JSON.stringify(options))
    }
  } finally {
    t.cleanup()
  }
})

// ---- an argument read twice: what an attacker passes so that `fn` acts on a path never checked --

/** `first` for the guard's one read, `then` for every later one (a getter, or `toString`). */
function flipping(first, then) {
  let reads = 0
  return () => (++reads === 1 ? first : then)
}

test('fn gets the checked text, not an argument that names another path when read again', async () => {
  const t = await turn('auto_accept_edits', turngate.Approver.fromFunction(() => 'deny'))
  try {
    const ok = path.join(t.ws, 'ok.txt')
    const secret = path.join(t.root, 'secret.txt')
    writeFileSync(ok, 'fine')
    writeFileSync(secret, 'SECRET')
    const seen = []
    const byIndex = t.gate.guard({ kind: 'file_read', arg: 0 }, (p) => { seen.push(p); return readFileSync(String(p), 'utf8') })
    const byName = t.gate.guard({ kind: 'file_read', arg: 'path' }, (req) => { seen.push(req.path); return readFileSync(String(req.path), 'utf8') })

    // An object whose text changes after the guard read it.
    assert.equal(await byIndex({ toString: flipping(ok, secret) }), 'fine')
    // A getter on the first argument.
    const getter = {}
    Object.defineProperty(getter, 'path', { get: flipping(ok, secret), enumerable: true })
    assert.equal(await byName(getter), 'fine')
    // A class whose setter drops the allowed path and whose getter names another (a copy made
    // with Object.assign would write through the setter).
    class Request {
      get path() { return this.reads++ === 0 ? 'ok.txt' : secret }
      set path(_) {}
    }
    Request.prototype.reads = 0
    assert.equal(await byName(new Request()), 'fine')
    assert.deepEqual(seen, [ok, ok, ok])
    assert.ok(seen.every((p) => typeof p === 'string'))
  } finally {
    t.cleanup()
  }
})

test('a target function must return a string: fn would read any other value again', async () => {
  const t = await turn('auto_accept_edits', turngate.Approver.fromFunction(() => 'deny'))
  try {
    const ok = path.join(t.ws, 'ok.txt')
    const secret = path.join(t.root, 'secret.txt')
    writeFileSync(ok, 'fine')
    writeFileSync(secret, 'SECRET')
    let ran = 0
    const read = t.gate.guard({ kind: 'file_read', target: (p) => p }, function readNote(p) { ran++; return readFileSync(String(p), 'utf8') })
    await assert.rejects(read({ toString: flipping(ok, secret) }), (e) => {
      assert.ok(e instanceof turngate.InvalidInputError, String(e))
      assert.match(e.message, /options\.target returned an object/)
      return true
    })
    assert.equal(ran, 0)
    assert.equal(await read(ok), 'fine')
  } finally {
    t.cleanup()
  }
})

test('an approval without remember runs one call; the next call asks again', async () => {
  const asks = []
  const t = await turn('supervised', turngate.Approver.fromFunction((ask) => { asks.push(ask); return asks.length === 1 ? 'approve' : 'deny' }))
  try {
    const seen = []
    const write = t.gate.guard({ kind: 'file_write', arg: 0 }, (p, text) => { seen.push(p); writeFileSync(p, text); return 'ok' })
    assert.equal(await write('a.txt', '1'), 'ok')
    assert.match(await write('a.txt', '2'), /^Permission denied by turngate/)
    assert.equal(asks.length, 2)
    assert.deepEqual(seen, [path.join(t.ws, 'a.txt')])
    assert.equal(readFileSync(path.join(t.ws, 'a.txt'), 'utf8'), '1')
  } finally {
    t.cleanup()
  }
})
