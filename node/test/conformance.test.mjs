// Runs every `tests/conformance/*.json` vector file through the Node package, exactly as the
// Rust runners (core/tests/conformance_policy.rs, core/tests/snapshot_conformance.rs,
// core/tests/reduce_conformance.rs) do. Each vector is one test. A vector file whose suite
// this runner does not know fails the run unless it is listed in NOT_RUN_HERE with a reason.

import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

import * as turngate from '../index.mjs'

const CONFORMANCE = fileURLToPath(new URL('../../tests/conformance/', import.meta.url))

// Suites this runner does not run, each with the reason. Any other unknown suite on disk fails
// the run (see "every suite on disk is run").
export const NOT_RUN_HERE = {}

function files() {
  return readdirSync(CONFORMANCE)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => path.join(CONFORMANCE, f))
}

function load(file) {
  const doc = JSON.parse(readFileSync(file, 'utf8'))
  assert.equal(typeof doc, 'object', `${file}: not an object`)
  return doc
}

// ---- suite policy ---------------------------------------------------------------------------

function builtin(name) {
  if (name === 'default') return turngate.Policy.tiered()
  if (name === 'permissive') return turngate.Policy.permissive()
  return turngate.Policy.mode(name)
}

const policyOf = (v) => (typeof v === 'string' ? builtin(v) : turngate.Policy.fromObject(v))

function build(v) {
  const { builtin: b, policy } = v
  let p
  if (typeof b === 'string' && policy == null) p = builtin(b)
  else if (typeof b === 'string') p = builtin(b).merge(policyOf(policy))
  else if (b == null) p = policyOf(policy)
  else assert.fail(`bad builtin ${JSON.stringify(b)}`)
  for (const m of v.merge ?? []) p = p.merge(policyOf(m))
  for (const c of v.contain ?? []) p = p.contain(policyOf(c))
  return p
}

function runPolicy(v) {
  const policy = build(v)
  const { action } = v
  for (const k of Object.keys(action)) assert.ok(['kind', 'target', 'tool'].includes(k), `unknown action field ${k}`)
  const verdict = policy.explain(action.kind, action.target, action.tool)
  const got = { effect: verdict.effect, rule: verdict.rule?.pattern ?? null, layer: verdict.layer, reason: verdict.reason }
  // `check` is `explain(..).effect`, and so is the batch: they must never disagree.
  assert.equal(policy.check(action.kind, action.target, action.tool), verdict.effect)
  assert.deepEqual(policy.checkBatch([action]), [verdict.effect])
  assert.deepEqual(got, v.expect)
}

// ---- suite policy_serde ---------------------------------------------------------------------

function runPolicySerde(v) {
  const parse = { json: (t) => turngate.Policy.fromJson(t), toml: (t) => turngate.Policy.fromToml(t) }[v.format]
  assert.ok(parse, `bad format ${v.format}`)
  const wantPolicy = v.expect_policy
  const wantError = v.expect_error
  let p
  try {
    p = parse(v.text)
  } catch (e) {
    assert.ok(e instanceof turngate.PolicyError, `not a PolicyError: ${e}`)
    assert.equal(e.code, 'ERR_TURNGATE_POLICY')
    assert.ok(wantError != null, `unexpected error: ${e.message}`)
    assert.equal(wantPolicy, undefined)
    const got = { path: e.path, line: e.line, column: e.column }
    const expected = { path: wantError.path ?? null, line: wantError.line ?? null, column: wantError.column ?? null }
    assert.deepEqual(got, expected, e.message)
    for (const needle of wantError.contains ?? []) assert.ok(e.message.includes(needle), `message ${e.message} lacks ${needle}`)
    return
  }
  assert.equal(wantError, undefined, `expected an error ${JSON.stringify(wantError)}, got ${p.toJson()}`)
  assert.deepEqual(p.toObject(), wantPolicy)
  // Round trip through both formats and the object form.
  assert.deepEqual(turngate.Policy.fromJson(p.toJson()).toObject(), p.toObject(), 'json round trip')
  assert.deepEqual(turngate.Policy.fromToml(p.toToml()).toObject(), p.toObject(), 'toml round trip')
  assert.deepEqual(turngate.Policy.fromObject(p.toObject()).toObject(), p.toObject(), 'object round trip')
}

// ---- snapshot suites ------------------------------------------------------------------------

/** `expect` matches `actual` when every key of an expected object matches, arrays have the same
 * length and match element-wise, and scalars are equal (null matches missing). */
export function subset(expect, actual, where) {
  const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x)
  if (isObj(expect) && isObj(actual)) {
    for (const [k, ev] of Object.entries(expect)) subset(ev, actual[k] ?? null, `${where}.${k}`)
    return
  }
  if (Array.isArray(expect) && Array.isArray(actual)) {
    assert.equal(actual.length, expect.length, `${where}: expected ${expect.length} elements, got ${JSON.stringify(actual)}`)
    expect.forEach((ev, i) => subset(ev, actual[i], `${where}[${i}]`))
    return
  }
  assert.deepEqual(actual ?? null, expect, `${where}: expected ${JSON.stringify(expect)}, got ${JSON.stringify(actual)}`)
}

/** The vector with `{tmp}` replaced by a fresh temporary directory in every string, and every
 * path of its `dirs` created there (a snapshot's roots must exist). Returns the vector and a
 * function that removes the directory. */
export function materialize(v) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-vector-')))
  const out = JSON.parse(JSON.stringify(v).replaceAll('{tmp}', JSON.stringify(dir).slice(1, -1)))
  for (const d of out.dirs ?? []) mkdirSync(d, { recursive: true })
  return { vector: out, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

function capOf(v) {
  if ('cap' in v) return v.cap
  const parent = v.cap_from_parent
  if (parent == null) return null
  const snapshot = turngate.resolve(parent.selection, parent.context)
  return turngate.capFromParent(snapshot, parent.origin)
}

function shellOutcome(snapshot) {
  try {
    turngate.ensureNativeShellAllowed(snapshot)
  } catch (e) {
    if (e instanceof turngate.SandboxUnavailableError) return 'sandbox_unavailable'
    if (e instanceof turngate.SnapshotError && e.snapshotCode === 'provider_native_on_native_shell') return 'provider_native_on_native_shell'
    return 'other_error'
  }
  return 'allowed'
}

function runSnapshotResolve(v) {
  const cap = capOf(v)
  const needle = v.expect_error
  let s
  try {
    s = turngate.resolve(v.selection, v.context, cap)
  } catch (e) {
    assert.ok(e instanceof turngate.TurnGateError, `not a TurnGateError: ${e}`)
    assert.ok(needle != null, `unexpected error: ${e.message}`)
    assert.ok(e.message.includes(needle), `error ${e.message} does not name ${needle}`)
    return
  }
  assert.equal(needle, undefined, `expected an error naming ${needle}, got a snapshot ${JSON.stringify(s)}`)
  subset(v.expect ?? null, s, 'snapshot')
  assert.deepEqual(JSON.parse(JSON.stringify(s)), s, 'a snapshot round-trips through JSON')
  if ('native_shell' in v) assert.equal(shellOutcome(s), v.native_shell, 'native_shell')
}

function runSnapshotPrompt(v) {
  const s = turngate.resolve(v.selection, v.context, capOf(v))
  const got = turngate.renderPermissionsSection(s.permission_profile)
  if ('expect' in v) assert.equal(got, v.expect)
  for (const needle of v.expect_contains ?? []) {
    assert.ok(got != null, 'expected a section, got none')
    assert.ok(got.includes(needle), `section does not contain ${needle}:\n${got}`)
  }
}

function runSnapshotRuntime(v) {
  subset(v.expect, turngate.mapCliRuntime(v.runtime, v.mode), 'mapping')
}

// ---- suites reducer and scope_hash ----------------------------------------------------------

function runReducer(v) {
  for (const k of Object.keys(v)) assert.ok(['why', 'inputs', 'expected'].includes(k), `unknown vector field ${k}`)
  const got = turngate.reduceAll(v.inputs)
  assert.deepEqual(got, v.expected)
  // One input at a time from a JSON round-tripped state gives the same answer.
  let state = null
  for (const item of v.inputs) state = turngate.reduce(JSON.parse(JSON.stringify(state)), item)
  assert.deepEqual(state ?? turngate.reduceAll([]), got, 'stepwise')
}

function runScopeHash(v) {
  for (const k of Object.keys(v)) assert.ok(['why', 'action', 'cwd', 'scope', 'scope_hash'].includes(k), `unknown vector field ${k}`)
  if (v.action != null) {
    const scope = turngate.scopeFromAction(v.action.kind, v.action.target, v.action.tool, v.cwd)
    assert.deepEqual(scope, v.scope, 'normalized scope')
  }
  assert.equal(turngate.scopeHash(v.scope), v.scope_hash)
}

// ---- checker suites (as core/tests/conformance_checkers.rs) ---------------------------------

const shellSandbox = (cwd) => ({
  mode: 'unrestricted',
  cwd,
  filesystem: { entries: [] },
  tmp: 'host',
  network: { mode: 'enabled', allowed_domains: [], denied_domains: [], allow_localhost: false, allow_unix_sockets: false, allowed_tcp_ports: [] },
  backend_requirement: 'optional',
  backend_preference: 'none',
})

const SHELL_PROCESS = {
  shell_enabled: true,
  inherit_stdin: false,
  inherit_session: false,
  env: 'filtered',
  max_duration_ms: 1000,
  denied_commands: [],
  allowed_command_families: [],
}

function runCheckersNetwork(v, doc) {
  const net = { ...doc.defaults.network, ...(v.network ?? {}) }
  const policy = turngate.Policy.fromObject(v.policy ?? doc.defaults.policy)
  const { verdict } = turngate.checkNetwork(net, policy, v.target)
  assert.equal(verdict.effect, v.expect.effect, JSON.stringify(verdict))
  if ('reason' in v.expect) assert.equal(verdict.reason, v.expect.reason, JSON.stringify(verdict))
}

function runCheckersShell(v, doc) {
  const policy = turngate.Policy.fromObject(doc.policy)
  const dir = mkdtempSync(path.join(tmpdir(), 'turngate-shell-'))
  let plan
  try {
    plan = turngate.planSpawn(shellSandbox(dir), SHELL_PROCESS, policy, v.line)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const parsed = turngate.parseCommandLine(v.line)
  const { expect } = v
  assert.equal(policy.check('shell_command', v.line), expect.effect, 'explain disagrees')
  assert.equal(plan.verdict.effect, expect.effect, `plan gave ${JSON.stringify(plan.verdict)}`)
  for (const p of expect.programs_include ?? []) assert.ok(parsed.programs.includes(p), `program ${p} not reported: ${JSON.stringify(parsed)}`)
  if (expect.unresolved_include) {
    if (expect.unresolved_include.length === 0) assert.deepEqual(parsed.unresolved, [])
    for (const u of expect.unresolved_include) assert.ok(parsed.unresolved.includes(u), `unresolved ${u} not reported: ${JSON.stringify(parsed)}`)
  }
}

const text = (x) => (typeof x === 'string' ? Buffer.from(x) : Buffer.from(x.hex, 'hex'))

function runCheckersEnv(v) {
  const name = text(v.name)
  const mode = v.mode === 'all' || v.mode === 'none' ? v.mode : 'filtered'
  const env = turngate.filterEnv([{ name, value: text(v.value) }], mode, '/w')
  const kept = env.vars.some((e) => Buffer.compare(e.name, name) === 0)
  const reason = env.dropped[0]?.reason ?? null
  assert.equal(kept, v.expect.kept, `kept=${kept} reason=${reason}`)
  if ('reason' in v.expect) assert.equal(reason, v.expect.reason, `kept=${kept} reason=${reason}`)
}

// ---- suite gate (as core/tests/gate_conformance.rs) -----------------------------------------

const PLATFORM = { os: 'linux', landlock_abi: 7, seccomp: true, user_namespaces: true, seatbelt: false, restricted_token: false }

async function runGate(v) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-gate-')))
  try {
    for (const [p, content] of Object.entries(v.files ?? {})) {
      mkdirSync(path.dirname(path.join(dir, p)), { recursive: true })
      writeFileSync(path.join(dir, p), content)
    }
    for (const [link, target] of Object.entries(v.symlinks ?? {})) {
      mkdirSync(path.dirname(path.join(dir, link)), { recursive: true })
      symlinkSync(target, path.join(dir, link))
    }
    const snapshot = turngate.resolve(v.selection, { workspace_root: dir, execution_backend: 'native', platform: PLATFORM })
    const store = await turngate.Store.open(path.join(dir, 'audit.db'))
    const broker = new turngate.Broker(turngate.Policy.fromObject(snapshot.permission_profile.effective_policy))
    const gate = new turngate.Gate('turn-1', snapshot, { store, approver: turngate.Approver.broker(broker), broker })
    // The responder answers each requested approval with the step's scripted answer.
    const answers = []
    let asked = 0
    const sub = broker.subscribe()
    const responder = (async () => {
      for await (const n of sub) {
        if (n.method !== 'turn/permission/request/requested') continue
        asked++
        broker.respond(n.params.request?.id ?? n.params.id, answers.shift() ?? 'deny')
      }
    })()
    // A failed step must end the responder too, or the run would wait on it forever.
    try {
      for (const [i, step] of v.steps.entries()) {
        if (step.answer) answers.push(step.answer)
        const before = asked
        const a = await gate.authorize({ kind: step.kind, target: step.target, tool: step.tool })
        const got = {
          outcome: a.outcome,
          cached: a.outcome === 'allowed' ? a.cachedApproval : false,
          reason: a.outcome === 'allowed' ? a.verdict.reason : a.outcome === 'denied' ? (a.verdict?.reason ?? null) : undefined,
          asked: asked > before,
        }
        for (const key of ['outcome', 'cached', 'asked', 'reason']) {
          if (key in step.expect) assert.deepEqual(got[key], step.expect[key], `step ${i}: ${key} (got ${JSON.stringify(got)})`)
        }
        if ('denial_includes' in step.expect) {
          assert.ok(a.outcome === 'denied' && a.reason.includes(step.expect.denial_includes), `step ${i}: the denial does not say ${JSON.stringify(step.expect.denial_includes)}: ${JSON.stringify(a)}`)
        }
      }
    } finally {
      broker.close()
      await responder
    }
    const rows = (await store.replay('turn-1')).map((e) => [e.kind, e.decision ?? null, e.cached_approval_used])
    if (v.expect_audit) assert.deepEqual(rows, v.expect_audit, 'audit rows')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// ---- tooling suites (as core/tests/conformance_tooling.rs) ---------------------------------

function buildTooling(v) {
  let own = null
  if (v.policy != null) own = policyOf(v.policy)
  else if (v.policy_toml != null) own = turngate.Policy.fromToml(v.policy_toml)
  let p
  if (typeof v.builtin === 'string') p = own == null ? builtin(v.builtin) : builtin(v.builtin).merge(own)
  else {
    assert.ok(own != null, 'neither builtin nor policy')
    p = own
  }
  for (const c of v.contain ?? []) p = p.contain(policyOf(c))
  return p
}

function runPolicyTurn(v) {
  const { action } = v
  const got = buildTooling(v).explainInTurn(action.kind, action.target, action.tool, v.history)
  got.rule = got.rule?.pattern ?? null
  assert.deepEqual(got, v.expect)
}

function runPolicyLint(v) {
  const got = buildTooling(v).lint().map((f) => ({ code: f.code, path: f.path }))
  assert.deepEqual(got, v.expect)
}

function runReplay(v) {
  assert.deepEqual(buildTooling(v).replayEvents(v.events, v.options ?? null), v.expect)
}

// ---- suite changes_serde (as core/tests/conformance_changes.rs) -----------------------------

/** Whether `v` holds a number JavaScript cannot carry exactly (an integer beyond 2^53). */
const unsafeNumber = (v) =>
  typeof v === 'number' ? !Number.isSafeInteger(v) && Number.isInteger(v)
    : v && typeof v === 'object' ? Object.values(v).some(unsafeNumber) : false

function runChangesSerde(v) {
  if (v.expect_error == null && unsafeNumber(v.change_set)) {
    // A change set's nanosecond times exceed Number.MAX_SAFE_INTEGER: JSON.parse has already
    // rounded them, so the exact round trip cannot be checked in Node. What must hold: the
    // rounded value is refused, never taken for the recorded one.
    assert.throws(
      () => turngate.parseChangeSet(v.change_set),
      (e) => e instanceof turngate.InvalidInputError && /expected i64|expected u64/.test(e.message),
    )
    return
  }
  if (v.expect_error == null) {
    // A change set is a protocol object: it keeps its schema's snake_case names in Node too.
    assert.deepEqual(turngate.parseChangeSet(v.change_set), v.change_set)
    return
  }
  assert.throws(
    () => turngate.parseChangeSet(v.change_set),
    (e) => e instanceof turngate.InvalidInputError && e.message.includes(v.expect_error),
  )
}

// ---- suite tools (as bindings/tests/tools_conformance.rs) ------------------------------------

const camelKeys = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]))

async function toolCall(gate, step, outcomes) {
  const opts = { itemId: step.item_id }
  if (step.approval) {
    const a = step.approval
    const requestId = 'request_of' in a ? (outcomes[a.request_of].requestId ?? 'no-such-request') : a.request_id
    opts.approval = { requestId, decision: a.decision }
  }
  switch (step.tool) {
    case 'read_file': return gate.readFile(step.path, { ...opts, maxBytes: step.max_bytes })
    case 'write_file': return gate.writeFile(step.path, step.content, opts)
    case 'edit_file': return gate.editFile(step.path, step.old, step.new, opts)
    case 'run_shell': return gate.runShell(step.command, { ...opts, env: step.env, timeoutMs: step.timeout_ms, stdin: step.stdin, cwd: step.cwd })
    case 'fetch_url': return gate.fetchUrl(step.url, { ...opts, method: step.method, headers: step.headers })
    default: throw new Error(`unknown tool ${step.tool}`)
  }
}

async function runTools(v) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-tools-')))
  const state = mkdtempSync(path.join(tmpdir(), 'turngate-tools-state-'))
  try {
    for (const [p, content] of Object.entries(v.files ?? {})) {
      mkdirSync(path.dirname(path.join(dir, p)), { recursive: true })
      writeFileSync(path.join(dir, p), content)
    }
    for (const [link, target] of Object.entries(v.symlinks ?? {})) symlinkSync(target, path.join(dir, link))
    const snapshot = turngate.resolve(v.selection, { workspace_root: dir, execution_backend: 'native', platform: turngate.probePlatform() })
    const store = await turngate.Store.open(path.join(state, 'audit.db'))
    const approver = turngate.Approver[{ approve_all: 'approveAll', deny_all: 'denyAll', defer_all: 'deferAll' }[v.approver]]()
    const gates = { 'turn-1': new turngate.Gate('turn-1', snapshot, { store, approver }), 'turn-2': new turngate.Gate('turn-2', snapshot, { store, approver }) }
    const outcomes = []
    for (const [i, step] of v.steps.entries()) {
      if (step.expect_error) {
        // A call refused before it is decided: no outcome, so keep the indices with a stand-in.
        let err = null
        try { await toolCall(gates[step.turn ?? 'turn-1'], step, outcomes) } catch (e) { err = e }
        assert.ok(err, `step ${i}: expected ${JSON.stringify(step.expect_error)}, got an outcome`)
        storeError(step.expect_error, err, `step ${i}`)
        outcomes.push({})
        continue
      }
      const got = await toolCall(gates[step.turn ?? 'turn-1'], step, outcomes)
      for (const [key, want] of Object.entries(step.expect)) {
        if (key.endsWith('_includes')) {
          const field = camelKeys({ [key.slice(0, -'_includes'.length)]: 0 })
          const name = Object.keys(field)[0]
          for (const part of Array.isArray(want) ? want : [want]) assert.ok((got[name] ?? '').includes(part), `step ${i}: ${name} does not say ${JSON.stringify(part)}: ${JSON.stringify(got)}`)
        } else if (key === 'target_rel') {
          assert.equal(got.target, path.join(dir, want), `step ${i}: target`)
        } else if (key === 'has_request') {
          assert.equal(got.request !== null, want, `step ${i}: request`)
          assert.equal(got.requestId !== null, want, `step ${i}: requestId`)
        } else {
          const name = Object.keys(camelKeys({ [key]: 0 }))[0]
          assert.deepEqual(got[name], want, `step ${i}: ${name} (got ${JSON.stringify(got)})`)
        }
      }
      outcomes.push(got)
    }
    for (const [p, want] of Object.entries(v.expect_files ?? {})) {
      let content = null
      try { content = readFileSync(path.join(dir, p), 'utf8') } catch { content = null }
      assert.equal(content, want, `file ${p}`)
    }
    if (v.expect_item_ids) {
      const ids = (await store.replay('turn-1')).filter((e) => e.kind !== 'profile_selected').map((e) => e.item_id ?? null)
      assert.deepEqual(ids, v.expect_item_ids, 'audit item ids')
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
    rmSync(state, { recursive: true, force: true })
  }
}

// ---- suite store (as bindings/tests/store_conformance.rs) -----------------------------------

const STORE_ERRORS = { Approval: turngate.ApprovalError, InvalidInput: turngate.InvalidInputError, Store: turngate.StoreError }

function storeError(want, err, where) {
  assert.ok(err instanceof STORE_ERRORS[want.kind], `${where}: expected ${JSON.stringify(want)}, got ${err}`)
  for (const part of want.includes ?? []) assert.ok(err.message.includes(part), `${where}: the error does not say ${part}: ${err.message}`)
}

async function runStore(v) {
  const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-store-')))
  const state = mkdtempSync(path.join(tmpdir(), 'turngate-store-state-'))
  try {
    for (const [p, content] of Object.entries(v.files ?? {})) writeFileSync(path.join(dir, p), content)
    const file = v.store.path === ':memory:' ? ':memory:' : path.join(state, v.store.path)
    let store
    try {
      store = await turngate.Store.open(file, { durability: v.store.durability })
    } catch (err) {
      assert.ok(v.expect_open_error, `open failed: ${err}`)
      storeError(v.expect_open_error, err, 'open')
      if (v.expect_no_file) assert.equal(existsSync(path.join(state, v.expect_no_file)), false, `${v.expect_no_file} was created`)
      return
    }
    assert.equal(v.expect_open_error, undefined, `opened, expected ${JSON.stringify(v.expect_open_error)}`)
    const snapshot = turngate.resolve(v.selection, { workspace_root: dir, execution_backend: 'native', platform: turngate.probePlatform() })
    const approver = turngate.Approver[{ approve_all: 'approveAll', deny_all: 'denyAll', defer_all: 'deferAll' }[v.approver]]()
    const gates = { 'turn-1': new turngate.Gate('turn-1', snapshot, { store, approver }), 'turn-2': new turngate.Gate('turn-2', snapshot, { store, approver }) }
    const results = []
    const requestId = (step) => ('request_of' in step ? (results[step.request_of]?.request?.id ?? 'no-such-request') : step.request_id)
    const run = async (step) => {
      const gate = gates[step.turn ?? 'turn-1']
      switch (step.op) {
        case 'authorize': return gate.authorize({ kind: step.kind, target: step.target })
        case 'resolve': {
          const via = step.via === 'second_connection' ? await turngate.Store.open(file) : store
          return via.resolve(requestId(step), step.resolution, step.reason)
        }
        case 'wait': return { resolution: (await gate.waitResolved(requestId(step), step.timeout_ms ?? 5000)).resolution?.resolution ?? null }
        case 'resume': return gate.resume(requestId(step))
        case 'replay_fresh_memory': return turngate.Store.memory().replay('turn-1')
        default: throw new Error(`unknown op ${step.op}`)
      }
    }
    for (const [i, step] of v.steps.entries()) {
      const where = `step ${i} (${v.why})`
      let got
      try {
        got = await run(step)
      } catch (err) {
        assert.ok(step.expect_error, `${where}: ${err}`)
        storeError(step.expect_error, err, where)
        results.push(null)
        continue
      }
      assert.equal(step.expect_error, undefined, `${where}: expected ${JSON.stringify(step.expect_error)}, got ${JSON.stringify(got)}`)
      for (const [key, want] of Object.entries(step.expect)) {
        if (key === 'rows') assert.equal(got.length, want, `${where}: rows`)
        else if (key === 'target_rel') assert.equal(got.target, path.join(dir, want), `${where}: target`)
        else {
          const name = Object.keys(camelKeys({ [key]: 0 }))[0]
          assert.deepEqual(got[name], want, `${where}: ${name} (got ${JSON.stringify(got)})`)
        }
      }
      results.push(got)
    }
    if (v.expect_audit) assert.deepEqual((await store.replay('turn-1')).map((e) => e.kind), v.expect_audit, 'audit rows')
  } finally {
    rmSync(dir, { recursive: true, force: true })
    rmSync(state, { recursive: true, force: true })
  }
}

export const RUNNERS = {
  changes_serde: runChangesSerde,
  policy_turn: runPolicyTurn,
  policy_lint: runPolicyLint,
  replay: runReplay,
  checkers_network: runCheckersNetwork,
  checkers_shell: runCheckersShell,
  checkers_env: runCheckersEnv,
  gate: runGate,
  tools: runTools,
  store: runStore,
  policy: runPolicy,
  policy_serde: runPolicySerde,
  snapshot_resolve: runSnapshotResolve,
  snapshot_cap: runSnapshotResolve,
  snapshot_prompt: runSnapshotPrompt,
  snapshot_runtime: runSnapshotRuntime,
  reducer: runReducer,
  scope_hash: runScopeHash,
}

for (const file of files()) {
  const doc = load(file)
  const run = RUNNERS[doc.suite]
  if (!run) continue
  describe(`${path.basename(file)} (suite ${doc.suite})`, () => {
    doc.vectors.forEach((v, i) => {
      test(`[${i}] ${String(v.why ?? '').slice(0, 70)}`, async () => {
        assert.ok(String(v.why ?? '').trim(), 'vector without a why')
        if (!doc.suite.startsWith('snapshot_')) return await run(v, doc)
        const { vector, cleanup } = materialize(v)
        try {
          await run(vector, doc)
        } finally {
          cleanup()
        }
      })
    })
  })
}

test('every suite on disk is run, or listed with a reason', () => {
  const all = files()
  assert.ok(all.length > 0, `no vector files in ${CONFORMANCE}`)
  const unknown = []
  for (const file of all) {
    const doc = load(file)
    assert.equal(typeof doc.suite, 'string', `${file}: no suite`)
    assert.ok(doc.vectors?.length, `${file}: no vectors`)
    if (!(doc.suite in RUNNERS) && !(doc.suite in NOT_RUN_HERE)) unknown.push(`${path.basename(file)} (suite ${doc.suite})`)
  }
  assert.deepEqual(unknown, [], 'vector files whose suite the Node runner does not run, with no reason in NOT_RUN_HERE')
})

test('every known suite has vectors', () => {
  const present = new Set(files().map((f) => load(f).suite))
  assert.deepEqual(Object.keys(RUNNERS).filter((s) => !present.has(s)), [])
})
