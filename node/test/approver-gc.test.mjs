// An approver's Promise that nobody else references (a person has not answered yet) must
// survive garbage collection: the ask stays pending, it is not failed with "channel closed".

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import v8 from 'node:v8'
import vm from 'node:vm'

import * as turngate from '../index.mjs'

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

test('a never-settling approver answer survives garbage collection and stays pending', async () => {
  const ws = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-gc-')))
  try {
    const snap = turngate.resolve({ mode: 'supervised' }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
    const store = await turngate.Store.open(path.join(ws, 'audit.db'))
    const gate = new turngate.Gate('t', snap, { store, approver: turngate.Approver.fromFunction(() => new Promise(() => {})) })
    let settled = null
    const pending = gate.authorize({ kind: 'file_write', target: 'a.txt' }).then(
      (a) => (settled = `resolved: ${a.outcome} ${a.reason}`),
      (e) => (settled = `rejected: ${e.message}`),
    )
    await sleep(50)
    for (let i = 0; i < 5; i++) {
      gc()
      await sleep(20)
    }
    await sleep(100)
    assert.equal(settled, null, 'the pending ask was settled by garbage collection')
    gate.close()
    await pending
    assert.match(settled, /^rejected/, 'closing the gate ends the pending ask')
  } finally {
    rmSync(ws, { recursive: true, force: true })
  }
})
