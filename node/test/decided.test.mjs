// What runs is what was decided (DESIGN §11), from Node: only a shell_command authorization
// starts a process, an approved request runs its stored command once under the snapshot it was
// requested under, and nothing runs a bare command line.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import * as turngate from '../index.mjs'

function dirs() {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-decided-')))
  const ws = path.join(root, 'ws')
  const outside = path.join(root, 'outside')
  mkdirSync(ws)
  mkdirSync(outside)
  return { root, ws, outside, cleanup: () => rmSync(root, { recursive: true, force: true }) }
}

function snapshot(ws, mode) {
  return turngate.resolve({ mode }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
}

async function deferred(ws, store, line) {
  const gate = new turngate.Gate('t', snapshot(ws, 'auto_accept_edits'), { store, approver: turngate.Approver.deferAll() })
  const r = await gate.spawn({ kind: 'shell_command', target: line })
  assert.equal(r.outcome, 'deferred')
  return r.request.id
}

test('spawn refuses every kind but shell_command before anything runs', async () => {
  const { root, ws, cleanup } = dirs()
  try {
    const marker = path.join(ws, 'ran.txt')
    writeFileSync(path.join(ws, 'run.sh'), `#!/bin/sh\necho x > ${marker}\n`)
    chmodSync(path.join(ws, 'run.sh'), 0o755)
    const store = await turngate.Store.open(path.join(root, 'a.db'))
    const gate = new turngate.Gate('t', snapshot(ws, 'full_access'), { store, approver: turngate.Approver.approveAll() })
    for (const kind of ['file_read', 'file_write', 'network', 'mcp_read']) {
      for (const target of ['./run.sh', path.join(ws, 'run.sh')]) {
        await assert.rejects(gate.spawn({ kind, target }), (e) => e.message.includes('shell_command') && e.message.includes(kind))
      }
    }
    assert.ok(!existsSync(marker), 'a non-shell authorization executed the script')
  } finally {
    cleanup()
  }
})

test('an allow_once runs its stored command once, and runApproved takes no command line', async () => {
  const { root, ws, cleanup } = dirs()
  try {
    const store = await turngate.Store.open(path.join(root, 'a.db'))
    const log = path.join(ws, 'log.txt')
    const id = await deferred(ws, store, `sh -c 'echo ran >> ${log}'`)
    const gate = new turngate.Gate('t', snapshot(ws, 'auto_accept_edits'), { store })
    await assert.rejects(gate.runApproved(id), /pending/)
    const first = await gate.resumeSpawn(id, { decision: 'approve' })
    assert.equal(first.outcome, 'ran')
    assert.equal(first.exitCode, 0)
    for (let i = 0; i < 3; i++) {
      await assert.rejects(gate.resumeSpawn(id, { decision: 'approve' }), /already_used/)
      await assert.rejects(gate.runApproved(id), /already_used/)
    }
    assert.equal(readFileSync(log, 'utf8'), 'ran\n')
    const marker = path.join(ws, 'never.txt')
    await assert.rejects(gate.runApproved(`touch ${marker}`), /touch/)
    assert.ok(!existsSync(marker))
  } finally {
    cleanup()
  }
})

test('a resumed command keeps the sandbox it was requested under', async () => {
  const { root, ws, outside, cleanup } = dirs()
  try {
    const store = await turngate.Store.open(path.join(root, 'a.db'))
    const escaped = path.join(outside, 'escaped.txt')
    writeFileSync(path.join(ws, 'w.sh'), `echo in > ${path.join(ws, 'in.txt')}\necho out > ${escaped}\n`)
    const id = await deferred(ws, store, 'sh ./w.sh')
    const resumer = new turngate.Gate('t', snapshot(ws, 'full_access'), { store })
    const r = await resumer.resumeSpawn(id, { decision: 'approve' })
    assert.equal(r.outcome, 'ran')
    assert.ok(existsSync(path.join(ws, 'in.txt')))
    assert.ok(!existsSync(escaped), 'the resumed command ran without its sandbox')
  } finally {
    cleanup()
  }
})
