#!/usr/bin/env node
// Per-call cost of `Policy.check` from Node, against a JavaScript no-op function call with the
// same arguments in the same run, and of the batch API per action (docs/performance.md: <= 2 µs per
// call). Build the release addon first:
//
//   (cd node && npm ci && npm run build) && node bench/node_check.mjs
//
// Each case runs N calls, REPEAT times; the median per-call time is reported, and its ratio to
// the no-op baseline taken in the same run.

import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'

const require = createRequire(import.meta.url)
const turngate = require('../node/index.js')

const N = 200_000
const REPEAT = 7

function policy100Rules() {
  let p = turngate.Policy.tiered().layer('bench')
  for (let i = 0; i < 50; i++) {
    p = p.rule('file_read', 'deny', `secret${i}/**/*.key`)
    p = p.rule('file_write', 'allow', `src/mod${i}/*.rs`)
  }
  return p
}

// A no-op the JIT cannot fold away: it returns a value derived from its arguments.
function noop(kind, target, tool) {
  return kind.length + target.length > 0 ? 'allow' : tool
}

let sink = 0
function perCallNs(fn, n = N) {
  const times = []
  for (let r = 0; r < REPEAT; r++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < n; i++) sink ^= fn().length
    times.push(Number(process.hrtime.bigint() - start) / n)
  }
  times.sort((a, b) => a - b)
  return times[Math.floor(times.length / 2)]
}

async function main() {
  const p = policy100Rules()
  const baseline = perCallNs(() => noop('file_write', 'src/mod7/lib.rs'))
  const rows = [
    ['js no-op function call (baseline)', baseline],
    ['native no-op call: turngate.version() (the crossing)', perCallNs(() => turngate.version())],
    ['check file_write src/mod7/lib.rs (allow rule)', perCallNs(() => p.check('file_write', 'src/mod7/lib.rs'))],
    ['check file_read config/.env (deny rule)', perCallNs(() => p.check('file_read', 'config/.env'))],
    ['check network api.example.com:443 (default)', perCallNs(() => p.check('network', 'api.example.com:443'))],
    ["check shell_command 'cargo test' (plain line)", perCallNs(() => p.check('shell_command', 'cargo test'))],
    ["check shell_command 'cargo test | tee log'", perCallNs(() => p.check('shell_command', 'cargo test | tee log'), 20_000)],
    ['explain file_read config/.env', perCallNs(() => p.explain('file_read', 'config/.env').effect)],
    // The same verdict (plus its null `condition`/`would`) through a JSON value, for comparison:
    // `explain` serializes its record straight into JavaScript values.
    ['explainInTurn file_read config/.env (via JSON)', perCallNs(() => p.explainInTurn('file_read', 'config/.env').effect)],
  ]
  const batch = Array.from({ length: 1000 }, (_, i) => ({ kind: 'file_write', target: `src/mod${i % 50}/lib.rs` }))
  const perBatch = perCallNs(() => p.checkBatch(batch), 200)
  rows.push(['check, one call per action (the same 1,000 actions)', perCallNs(() => {
    let last = ''
    for (const a of batch) last = p.check(a.kind, a.target)
    return last
  }, 200) / batch.length])
  rows.push(['checkBatch, per action (1,000 {kind, target} objects)', perBatch / batch.length])
  const tuples = batch.map((a) => [a.kind, a.target])
  rows.push(['checkBatch, per action (1,000 [kind, target] tuples)', perCallNs(() => p.checkBatch(tuples), 200) / tuples.length])

  console.log(`turngate ${turngate.version()} on Node ${process.version}: 100-rule policy, median of ${REPEAT} runs`)
  console.log(`${'case'.padEnd(50)} ${'ns/call'.padStart(9)} ${'x no-op'.padStart(8)}`)
  const print = ([name, ns]) => console.log(`${name.padEnd(50)} ${ns.toFixed(0).padStart(9)} ${(ns / baseline).toFixed(2).padStart(8)}`)
  rows.forEach(print)
  // The compound shell line is a tree-sitter parse in the core, not FFI cost; the budget
  // applies to the plain-line cases.
  const worst = Math.max(...rows.slice(1, 5).map(([, ns]) => ns))
  console.log(`worst check: ${worst.toFixed(0)} ns per call (budget 2000 ns): ${worst <= 2000 ? 'within' : 'OVER'} budget`)
  await gateRows(baseline, print)
  if (sink === 0.5) console.log(sink)
}

// The gate from Node: checker evaluation, and a full authorize (a Promise, and a durable SQLite
// audit row per call, so it is dominated by the store, not by the binding).
async function gateRows(baseline, print) {
  const tmp = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-bench-')))
  try {
    const ws = path.join(tmp, 'ws')
    mkdirSync(ws)
    writeFileSync(path.join(ws, 'a.txt'), 'x')
    const snap = turngate.resolve({ mode: 'supervised' }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform() })
    const store = await turngate.Store.open(path.join(tmp, 'a.db'))
    // `new Gate` runs on the event loop: what it blocks the loop for, per call (its audit
    // row is queued to the store's committer thread, not written here).
    const ctor = []
    for (let i = 0; i < 200; i++) {
      const start = process.hrtime.bigint()
      const g = new turngate.Gate(`bench-ctor-${i}`, snap, { store })
      ctor.push(Number(process.hrtime.bigint() - start))
      await g.authorize({ kind: 'file_read', target: path.join(ws, 'a.txt') })
    }
    ctor.sort((a, b) => a - b)
    print(['new Gate on the event loop, median (profile row queued, not written)', ctor[Math.floor(ctor.length / 2)]])
    const gate = new turngate.Gate('bench', snap, { store })
    const target = path.join(ws, 'a.txt')
    print(['gate.evaluate file_read (file checker)', perCallNs(() => gate.evaluate({ kind: 'file_read', target }).target, 50_000)])
    print(['gate.evaluate network https://example.com', perCallNs(() => gate.evaluate({ kind: 'network', target: 'https://example.com' }).target, 50_000)])
    // DESIGN §19 budgets the median call: each timed on its own.
    const times = []
    for (let i = 0; i < 2000; i++) {
      const start = process.hrtime.bigint()
      await gate.authorize({ kind: 'file_read', target })
      times.push(Number(process.hrtime.bigint() - start))
    }
    times.sort((a, b) => a - b)
    print(['await gate.authorize file_read (+ audit row), median call', times[Math.floor(times.length / 2)]])
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

await main()
