// A terminated worker_threads Worker never takes the process down: terminating a worker while
// its `authorize` waits on an approver that never answers, or while its `spawn` runs a command,
// cancels that work (the command is killed) and the process carries on and exits 0. Each case
// runs in a child Node process (a crash there is an exit signal here, not a lost test run), 20
// workers in a row, terminated at several points of their call.
//
// This one file plays three roles: the node:test file, the driver process (`--driver`), and
// the worker (`!isMainThread`).

import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'

const self = fileURLToPath(import.meta.url)
// A duration no other process on the machine is likely to sleep for: it names our commands.
const SLEEP = '2.437'

async function worker({ mode, root, index }) {
  const turngate = await import('../index.mjs')
  const ws = path.join(root, `ws-${index}`)
  mkdirSync(ws)
  const snap = turngate.resolve({ mode: 'supervised' }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
  const store = await turngate.Store.open(path.join(root, `audit-${index}.db`))
  if (mode === 'authorize') {
    const approver = turngate.Approver.fromFunction(() => {
      parentPort.postMessage('pending')
      return new Promise(() => {})
    })
    const gate = new turngate.Gate(`turn-${index}`, snap, { store, approver })
    gate.authorize({ kind: 'file_write', target: path.join(ws, 'notes.txt'), tool: 'write_file' })
  } else {
    const gate = new turngate.Gate(`turn-${index}`, snap, { store, approver: turngate.Approver.approveAll() })
    gate.spawn({ kind: 'shell_command', target: `sleep ${SLEEP}` }).then(
      (r) => parentPort.postMessage(`settled ${r.outcome} ${r.exitCode}`),
      (e) => parentPort.postMessage(`rejected ${e.message}`),
    )
    parentPort.postMessage('pending')
  }
}

/** The pids of our `sleep` commands still running. */
function sleepers() {
  const pids = []
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      if (argv.includes(SLEEP) && path.basename(argv[0]) === 'sleep') pids.push(pid)
    } catch {
      // gone meanwhile
    }
  }
  return pids
}

async function driver(mode, count) {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-worker-')))
  try {
    for (let index = 0; index < count; index++) {
      const w = new Worker(self, { workerData: { mode, root, index } })
      const messages = []
      const pending = new Promise((resolve, reject) => {
        w.on('message', (m) => {
          messages.push(m)
          if (m === 'pending') resolve()
        })
        w.once('error', reject)
        w.once('exit', () => reject(new Error(`worker ${index} exited before its call was pending`)))
      })
      await pending
      // Terminate at several points: right away, while the call is being set up, and once the
      // command runs (or the approver has been waiting a while).
      await sleep([0, 5, 50, 300][index % 4])
      await w.terminate()
      if (messages.some((m) => m !== 'pending')) throw new Error(`worker ${index} settled before it was terminated: ${messages}`)
    }
    // Past the commands' own end: a settle into a dead worker would abort the process by now.
    await sleep(Number(SLEEP) * 1000 + 700)
    const left = sleepers()
    if (mode === 'spawn' && left.length > 0) throw new Error(`commands of terminated workers still run: ${left}`)
    process.stdout.write(`ok ${mode} ${count}\n`)
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

if (!isMainThread) {
  await worker(workerData)
} else if (process.argv[2] === '--driver') {
  await driver(process.argv[3], Number(process.argv[4]))
} else {
  const { test } = await import('node:test')
  const assert = (await import('node:assert/strict')).default
  const { spawnSync } = await import('node:child_process')
  for (const mode of ['authorize', 'spawn']) {
    test(`terminating workers mid-${mode} leaves the process running, and it exits 0`, () => {
      const r = spawnSync(process.execPath, [self, '--driver', mode, '20'], { encoding: 'utf8', timeout: 120_000 })
      assert.equal(r.signal, null, `the driver died of ${r.signal}; stderr: ${r.stderr}`)
      assert.equal(r.status, 0, `stdout: ${r.stdout}\nstderr: ${r.stderr}`)
      assert.equal(r.stdout, `ok ${mode} 20\n`)
    })
  }
}
