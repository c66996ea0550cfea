// The gate across processes and the kernel: a deferral persisted by one Node process is
// resumed by another (re-checked against the policy), and a sandboxed spawn's write outside the
// workspace is refused by the kernel while the workspace stays writable.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import * as turngate from '../index.mjs'

const entry = fileURLToPath(new URL('../index.js', import.meta.url))

function workspace() {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-gate-')))
  const ws = path.join(root, 'ws')
  mkdirSync(ws)
  return { root, ws, cleanup: () => rmSync(root, { recursive: true, force: true }) }
}

function snapshot(ws, mode = 'supervised') {
  return turngate.resolve({ mode }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
}

// The deferring process: a supervised turn whose approver defers; it prints what it was shown.
const DEFERRING_CHILD = `
const turngate = require(process.argv[1])
const [ws, db] = process.argv.slice(2)
;(async () => {
  const snap = turngate.resolve({ mode: 'supervised' }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
  const store = await turngate.Store.open(db)
  const gate = new turngate.Gate('turn-a', snap, { store, approver: turngate.Approver.fromFunction(async () => 'defer') })
  const auth = await gate.authorize({ kind: 'file_write', target: ws + '/report.md', tool: 'write_file' })
  process.stdout.write(JSON.stringify({ outcome: auth.outcome, request: auth.request }))
})().catch((e) => { console.error(e); process.exit(1) })
`

test('a deferral persisted by one Node process is resumed by another', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    const db = path.join(root, 'shared.db')
    const out = execFileSync(process.execPath, ['-e', DEFERRING_CHILD, entry, ws, db], { encoding: 'utf8', timeout: 60_000 })
    const shown = JSON.parse(out)
    assert.equal(shown.outcome, 'deferred')
    const { request } = shown
    const store = await turngate.Store.open(db)
    const pending = await store.pendingApprovals()
    assert.equal(pending.length, 1)
    assert.deepEqual(pending[0].request, request, 'the stored request is exactly the one shown')
    assert.deepEqual(pending[0].action, { kind: 'file_write', target: path.join(ws, 'report.md'), tool: 'write_file' })
    const gate = new turngate.Gate('turn-a', snapshot(ws), { store })
    const auth = await gate.resume(request.id, { decision: 'approve' })
    assert.equal(auth.outcome, 'allowed')
    assert.deepEqual({ kind: auth.kind, target: auth.target, tool: auth.tool }, { kind: 'file_write', target: path.join(ws, 'report.md'), tool: 'write_file' })
    assert.deepEqual(await store.pendingApprovals(), [])
    // The resume spent the allow_once approval: a second one (whatever it decides) rejects, so
    // the write cannot happen twice.
    await assert.rejects(gate.resume(request.id, { decision: 'deny' }), /already_used/)
  } finally {
    cleanup()
  }
})

test('resuming a deferral under a policy that now denies it is refused', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    const store = await turngate.Store.open(path.join(root, 'audit.db'))
    const gate = new turngate.Gate('t', snapshot(ws), { store, approver: turngate.Approver.deferAll() })
    const auth = await gate.authorize({ kind: 'file_write', target: path.join(ws, 'x.txt') })
    assert.equal(auth.outcome, 'deferred')
    const strict = snapshot(ws)
    strict.permission_profile.effective_policy = turngate.Policy.fromObject(strict.permission_profile.effective_policy)
      .rule('file_write', 'deny', '**', { layer: 'late-deny' })
      .toObject()
    const later = new turngate.Gate('t', strict, { store })
    assert.equal((await later.resume(auth.request.id, { decision: 'approve' })).outcome, 'denied')
  } finally {
    cleanup()
  }
})

test('a sandboxed spawn cannot write outside the workspace (the kernel refuses)', async (t) => {
  const platform = turngate.probePlatform()
  if (platform.os !== 'linux' || !platform.landlock_abi) {
    t.skip(`no Landlock here (${JSON.stringify(platform)})`)
    return
  }
  const { root, ws, cleanup } = workspace()
  try {
    const outside = path.join(root, 'outside')
    mkdirSync(outside)
    const store = await turngate.Store.open(path.join(root, 'audit.db'))
    const gate = new turngate.Gate('t', snapshot(ws, 'auto_accept_edits'), { store, approver: turngate.Approver.approveAll() })
    const r = await gate.spawn({ kind: 'shell_command', target: `touch ${outside}/escaped; touch ${ws}/inside` })
    assert.equal(r.outcome, 'ran', JSON.stringify(r))
    assert.equal(r.sandbox?.backend, 'nono')
    // The namespace layer's read-only view refuses first (EROFS); without it, Landlock (EACCES).
    const refusal = (r.sandbox?.namespaces ?? []).includes('mount') ? /Read-only file system/ : /Permission denied/
    assert.match(r.stderr.toString(), refusal)
    assert.equal(existsSync(path.join(outside, 'escaped')), false, 'the kernel refused the write outside')
    assert.equal(existsSync(path.join(ws, 'inside')), true, 'the workspace stays writable')
    // The parent is not sandboxed.
    execFileSync('touch', [path.join(outside, 'parent-can')])
    assert.equal(existsSync(path.join(outside, 'parent-can')), true)
  } finally {
    cleanup()
  }
})

test('a denied command never runs', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    const store = await turngate.Store.open(path.join(root, 'audit.db'))
    const gate = new turngate.Gate('t', snapshot(ws, 'auto_accept_edits'), { store, approver: turngate.Approver.denyAll() })
    const r = await gate.spawn({ kind: 'shell_command', target: `touch ${ws}/never` })
    assert.equal(r.outcome, 'denied')
    assert.ok(r.toolResult.length > 0)
    assert.equal(existsSync(path.join(ws, 'never')), false)
  } finally {
    cleanup()
  }
})

test('race-free opens hand back a file descriptor, or a denial for an escape', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    const { writeSync, readFileSync, closeSync, symlinkSync } = await import('node:fs')
    const store = await turngate.Store.open(path.join(root, 'audit.db'))
    const gate = new turngate.Gate('t', snapshot(ws, 'auto_accept_edits'), { store, approver: turngate.Approver.approveAll() })
    const w = await gate.openWrite({ kind: 'file_write', target: 'out.txt', tool: 'write_file' })
    assert.equal(w.outcome, 'opened', JSON.stringify(w))
    writeSync(w.fd, 'hello')
    closeSync(w.fd)
    assert.equal(readFileSync(path.join(ws, 'out.txt'), 'utf8'), 'hello')
    symlinkSync('/etc', path.join(ws, 'etc-link'))
    const escape = await gate.openWrite({ kind: 'file_write', target: 'etc-link/turngate-escape' })
    assert.equal(escape.outcome, 'denied')
    assert.equal(escape.fd, undefined)
    assert.equal(existsSync('/etc/turngate-escape'), false)
  } finally {
    cleanup()
  }
})
