// turngate/openai-agents under @openai/agents' own scripted test model (`ScriptedModel` from
// `@openai/agents/testing`), offline, against a real gate and store: allow passes through,
// deny returns the gate's text to the model, an ask is the run's interruption and
// `state.approve` / `reject` resume it, and the audit rows carry the run's call id. Then the
// attacks: an approval no deferral backs, an approval for another call, a second resume of
// one approval, changed arguments on the resumed call (a tampered run state).

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'

import { Agent, run, RunState, setTracingDisabled } from '@openai/agents'
import { ScriptedModel, functionCall, assistantMessage } from '@openai/agents/testing'
import { z } from 'zod'

import { turngateTools, gatedTool, reject } from 'turngate/openai-agents'
import { turn, rowsOf, requestRows, NEEDS_GUARDED } from './adapter-helpers.mjs'

setTracingDisabled(true)

/** A model turn calling tools: `[callId, name, args]...`. */
const calls = (...list) => list.map(([callId, name, args]) => functionCall(name, args, { callId }))
const says = (text) => [assistantMessage(text)]

/** What the model was last shown for each call id (the function_call_result outputs). */
function outputs(model) {
  const seen = new Map()
  for (const item of model.lastCall?.request.input ?? []) {
    if (item.type === 'function_call_result') seen.set(item.callId, typeof item.output === 'string' ? item.output : item.output.text)
  }
  return seen
}

function agentWith(model, tools) {
  return new Agent({ name: 'worker', instructions: 'Do the task.', model, tools })
}

/** The run state as another process gets it: serialized, then restored for `agent`. */
const carried = (state, agent) => RunState.fromString(agent, state.toString())

// ---- the guarded tools ----------------------------------------------------------------------

test('an allowed write passes through; a denied read returns the gate\'s text; the rows carry the call ids', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn({ files: { '.env': 'API_KEY=sk-secret' } })
  try {
    const model = new ScriptedModel([calls(['call-w', 'write_file', { path: 'notes.txt', content: 'hi\n' }], ['call-r', 'read_file', { path: '.env' }]), says('done')])
    const result = await run(agentWith(model, turngateTools(t.gate, { store: t.store })), 'write and read')
    assert.equal(result.finalOutput, 'done')
    assert.deepEqual(result.interruptions, [])
    assert.equal(readFileSync(path.join(t.workspace, 'notes.txt'), 'utf8'), 'hi\n')
    const out = outputs(model)
    assert.doesNotMatch(out.get('call-w'), /Permission denied/)
    assert.match(out.get('call-r'), /^Permission denied by turngate: file_read/)
    assert.doesNotMatch(JSON.stringify(model.calls.map((c) => c.request.input)), /sk-secret/)
    assert.deepEqual((await rowsOf(t.store, t.turnId, 'call-w')).map((e) => e.kind), ['decision_allowed'])
    assert.deepEqual((await rowsOf(t.store, t.turnId, 'call-r')).map((e) => e.kind), ['decision_denied'])
  } finally {
    t.cleanup()
  }
})

test('an ask is an interruption; state.approve resumes the deferred request and runs the command once', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  try {
    const model = new ScriptedModel([calls(['call-s', 'run_shell', { command: 'echo yes >> ran.txt' }]), says('ran')])
    const agent = agentWith(model, turngateTools(t.gate, { store: t.store }))
    const first = await run(agent, 'run it')
    assert.equal(first.interruptions.length, 1)
    assert.equal(first.interruptions[0].rawItem.callId, 'call-s')
    assert.equal(existsSync(path.join(t.workspace, 'ran.txt')), false)
    const [asked] = await rowsOf(t.store, t.turnId, 'call-s')
    assert.equal(asked.kind, 'approval_requested')
    first.state.approve(first.interruptions[0])
    const second = await run(agent, first.state)
    assert.equal(second.finalOutput, 'ran')
    assert.equal(readFileSync(path.join(t.workspace, 'ran.txt'), 'utf8'), 'yes\n')
    assert.match(outputs(model).get('call-s'), /exit code 0/)
    const kinds = (await requestRows(t.store, t.turnId, asked.request_key)).map((e) => e.kind)
    assert.deepEqual(kinds.slice(0, 3), ['approval_requested', 'approval_resolved', 'decision_allowed'])
    // The resumed rows carry the run's call id too.
    assert.deepEqual((await rowsOf(t.store, t.turnId, 'call-s')).map((e) => e.kind), ['approval_requested', 'approval_resolved', 'decision_allowed'])
    assert.deepEqual(await t.store.pendingApprovals(), [])
  } finally {
    t.cleanup()
  }
})

test('reject resolves the request as denied through the gate; the model reads the gate\'s text', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  try {
    const model = new ScriptedModel([calls(['call-n', 'run_shell', { command: 'touch no.txt' }]), says('ok')])
    const agent = agentWith(model, turngateTools(t.gate, { store: t.store }))
    const first = await run(agent, 'run it')
    const text = await reject(t.gate, first.state, first.interruptions[0], { message: 'not today' })
    assert.match(text, /^Permission denied by turngate: shell_command `touch no.txt`: not today/)
    await run(agent, first.state)
    assert.equal(existsSync(path.join(t.workspace, 'no.txt')), false)
    assert.equal(outputs(model).get('call-n'), text)
    const requestId = (await rowsOf(t.store, t.turnId, 'call-n'))[0].request_key
    assert.deepEqual((await requestRows(t.store, t.turnId, requestId)).map((e) => e.kind), ['approval_requested', 'approval_resolved', 'decision_denied'])
  } finally {
    t.cleanup()
  }
})

test('a plain state.reject is recorded through the gate too (when the tools next run)', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  try {
    const model = new ScriptedModel([calls(['call-p', 'run_shell', { command: 'touch p.txt' }], ['call-q', 'run_shell', { command: 'echo q > q.txt' }]), says('ok')])
    const agent = agentWith(model, turngateTools(t.gate, { store: t.store }))
    const first = await run(agent, 'go')
    const [p, q] = first.interruptions
    first.state.reject(p)
    first.state.approve(q)
    await run(agent, first.state)
    assert.equal(existsSync(path.join(t.workspace, 'p.txt')), false)
    assert.equal(readFileSync(path.join(t.workspace, 'q.txt'), 'utf8'), 'q\n')
    assert.deepEqual(await t.store.pendingApprovals(), [], 'the rejected request is resolved, not left pending')
  } finally {
    t.cleanup()
  }
})

test('a run state paused in one process resumes in another (the deferral is found in the store by its call id)', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  try {
    const model = new ScriptedModel([calls(['call-l', 'run_shell', { command: 'echo later > later.txt' }]), says('resumed')])
    const first = await run(agentWith(model, turngateTools(t.gate, { store: t.store })), 'go')
    const other = await t.reopen()
    const agent = agentWith(model, turngateTools(other.gate, { store: other.store }))
    const state = await carried(first.state, agent)
    state.approve(state.getInterruptions()[0])
    const second = await run(agent, state)
    assert.equal(second.finalOutput, 'resumed')
    assert.equal(readFileSync(path.join(t.workspace, 'later.txt'), 'utf8'), 'later\n')
  } finally {
    t.cleanup()
  }
})

test('attack: changed arguments in a tampered run state are refused; the approved command did not run either', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  try {
    const model = new ScriptedModel([calls(['call-d', 'run_shell', { command: 'echo safe > safe.txt' }]), says('hm')])
    const agent = agentWith(model, turngateTools(t.gate, { store: t.store }))
    const first = await run(agent, 'go')
    const tampered = first.state.toString().replaceAll('echo safe > safe.txt', 'touch pwned.txt')
    const state = await RunState.fromString(agent, tampered)
    state.approve(state.getInterruptions()[0])
    await run(agent, state)
    assert.equal(existsSync(path.join(t.workspace, 'pwned.txt')), false)
    assert.equal(existsSync(path.join(t.workspace, 'safe.txt')), false)
    assert.match(outputs(model).get('call-d'), /^Permission denied by turngate/)
  } finally {
    t.cleanup()
  }
})

test('attack: an approval for another call: approving one interruption runs only that call\'s own command', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  try {
    const model = new ScriptedModel([calls(['call-a', 'run_shell', { command: 'touch a.txt' }], ['call-b', 'run_shell', { command: 'touch b.txt' }]), says('one'), says('two')])
    const agent = agentWith(model, turngateTools(t.gate, { store: t.store }))
    const first = await run(agent, 'both')
    // call-a's approval, with call-a's arguments swapped for call-b's in the state.
    const swapped = await RunState.fromString(agent, first.state.toString().replaceAll('touch a.txt', 'touch b.txt'))
    const a = swapped.getInterruptions().find((i) => i.rawItem.callId === 'call-a')
    assert.equal(a.rawItem.arguments, '{"command":"touch b.txt"}', 'the state was tampered as intended')
    swapped.approve(a)
    const second = await run(agent, swapped)
    assert.equal(existsSync(path.join(t.workspace, 'b.txt')), false, 'call-b\'s command never ran on call-a\'s approval')
    assert.equal(existsSync(path.join(t.workspace, 'a.txt')), false)
    assert.deepEqual(second.interruptions.map((i) => i.rawItem.callId), ['call-b'], 'call-b still waits for its own answer')
  } finally {
    t.cleanup()
  }
})

test('attack: a second resume of one approval (the approved state run twice) runs the command once', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  try {
    const model = new ScriptedModel([calls(['call-c', 'run_shell', { command: 'echo x >> count.txt' }]), says('once'), says('twice?')])
    const agent = agentWith(model, turngateTools(t.gate, { store: t.store }))
    const first = await run(agent, 'count')
    first.state.approve(first.interruptions[0])
    const saved = first.state.toString()
    await run(agent, first.state)
    const other = await t.reopen()
    const agent2 = agentWith(model, turngateTools(other.gate, { store: other.store }))
    await run(agent2, await RunState.fromString(agent2, saved))
    assert.equal(readFileSync(path.join(t.workspace, 'count.txt'), 'utf8'), 'x\n', 'ran exactly once')
    assert.match(outputs(model).get('call-c'), /^Permission denied by turngate/)
  } finally {
    t.cleanup()
  }
})

test('attack: an approval no deferral backs (a run state carried to another turn) does not skip the ask', { skip: NEEDS_GUARDED }, async () => {
  const t = await turn()
  const u = await turn({ turnId: 'turn-2' })
  try {
    const model = new ScriptedModel([calls(['call-x', 'run_shell', { command: 'touch pwned.txt' }]), says('hm')])
    const first = await run(agentWith(model, turngateTools(t.gate, { store: t.store })), 'go')
    const agent = agentWith(model, turngateTools(u.gate, { store: u.store }))
    const state = await carried(first.state, agent)
    state.approve(state.getInterruptions()[0])
    await run(agent, state)
    assert.equal(existsSync(path.join(u.workspace, 'pwned.txt')), false)
    assert.match(outputs(model).get('call-x'), /^Permission pending/)
  } finally {
    t.cleanup()
    u.cleanup()
  }
})

// ---- a user's own tool, gated ---------------------------------------------------------------

test('a gated user tool: allowed runs, denied returns the text, ask interrupts and resumes (approve and reject)', async () => {
  const t = await turn({ files: { 'notes.txt': 'x' } })
  try {
    const reads = []
    const read = gatedTool(t.gate, { name: 'read_note', description: 'Read a note', parameters: z.object({ path: z.string() }), execute: async ({ path: p }) => reads.push(p) && `read ${p}`, gate: { kind: 'file_read', arg: 'path' } })
    const ran = []
    const deploy = gatedTool(t.gate, {
      name: 'deploy',
      description: 'Deploy a service',
      parameters: z.object({ service: z.string() }),
      execute: async ({ service }) => ran.push(service) && `deployed ${service}`,
      gate: { kind: 'shell_command', target: ({ service }) => `deploy ${service}`, store: t.store },
    })
    const model = new ScriptedModel([
      calls(['u-1', 'read_note', { path: 'notes.txt' }], ['u-2', 'read_note', { path: '.env' }], ['u-3', 'deploy', { service: 'api' }], ['u-4', 'deploy', { service: 'db' }]),
      says('done'),
    ])
    const agent = agentWith(model, [read, deploy])
    const first = await run(agent, 'go')
    assert.deepEqual(reads, [path.join(t.workspace, 'notes.txt')])
    assert.deepEqual(first.interruptions.map((i) => i.rawItem.callId), ['u-3', 'u-4'])
    assert.deepEqual(ran, [])
    const [api, db] = first.interruptions
    first.state.approve(api)
    await reject(t.gate, first.state, db, { message: 'db is frozen' })
    const second = await run(agent, first.state)
    assert.equal(second.finalOutput, 'done')
    assert.deepEqual(ran, ['api'])
    const out = outputs(model)
    assert.equal(out.get('u-1'), `read ${path.join(t.workspace, 'notes.txt')}`)
    assert.match(out.get('u-2'), /^Permission denied by turngate: file_read/)
    assert.equal(out.get('u-3'), 'deployed api')
    assert.match(out.get('u-4'), /^Permission denied by turngate: shell_command `deploy db`: db is frozen/)
    for (const id of ['u-1', 'u-2', 'u-3', 'u-4']) assert.ok((await rowsOf(t.store, t.turnId, id)).length >= 1, `an audit row carries ${id}`)
    assert.deepEqual(await t.store.pendingApprovals(), [])
  } finally {
    t.cleanup()
  }
})

test('attack on a gated user tool: changed arguments in the run state, then a second resume', async () => {
  const t = await turn()
  try {
    const ran = []
    const deploy = gatedTool(t.gate, {
      name: 'deploy',
      description: 'Deploy a service',
      parameters: z.object({ service: z.string() }),
      execute: async ({ service }) => ran.push(service) && `deployed ${service}`,
      gate: { kind: 'shell_command', target: ({ service }) => `deploy ${service}`, store: t.store },
    })
    const model = new ScriptedModel([calls(['v-1', 'deploy', { service: 'staging' }]), says('a'), says('b'), says('c')])
    const agent = agentWith(model, [deploy])
    const first = await run(agent, 'go')
    const saved = first.state.toString()
    const tampered = await RunState.fromString(agent, saved.replaceAll('staging', 'production'))
    tampered.approve(tampered.getInterruptions()[0])
    await run(agent, tampered)
    assert.deepEqual(ran, [], 'the approval of `deploy staging` did not deploy production')
    assert.match(outputs(model).get('v-1'), /^Permission denied by turngate: shell_command `deploy production`/)
    // Refused before it was spent: the untampered state runs it once, and again runs nothing.
    const right = await RunState.fromString(agent, saved)
    right.approve(right.getInterruptions()[0])
    const approved = right.toString()
    await run(agent, right)
    assert.deepEqual(ran, ['staging'])
    await run(agent, await RunState.fromString(agent, approved))
    assert.deepEqual(ran, ['staging'], 'a second resume ran nothing')
    assert.match(outputs(model).get('v-1'), /^Permission denied by turngate/)
  } finally {
    t.cleanup()
  }
})

test('state.approve(item, { alwaysApprove: true }) does not widen the gate: a later ask is deferred, not run', async () => {
  const t = await turn()
  try {
    const ran = []
    const deploy = gatedTool(t.gate, {
      name: 'deploy',
      description: 'Deploy a service',
      parameters: z.object({ service: z.string() }),
      execute: async ({ service }) => ran.push(service) && `deployed ${service}`,
      gate: { kind: 'shell_command', target: ({ service }) => `deploy ${service}`, store: t.store },
    })
    const model = new ScriptedModel([calls(['w-1', 'deploy', { service: 'api' }]), calls(['w-2', 'deploy', { service: 'db' }]), says('done')])
    const agent = agentWith(model, [deploy])
    const first = await run(agent, 'go')
    first.state.approve(first.interruptions[0], { alwaysApprove: true })
    const second = await run(agent, first.state)
    assert.equal(second.finalOutput, 'done')
    assert.deepEqual(ran, ['api'], 'the always-approved tool did not deploy db without the gate')
    assert.match(outputs(model).get('w-2'), /^Permission pending/)
    assert.deepEqual((await t.store.pendingApprovals()).map((p) => p.action.target), ['deploy db'])
  } finally {
    t.cleanup()
  }
})

test('gatedTool and reject refuse what they cannot gate', async () => {
  const t = await turn()
  try {
    const base = { name: 'x', description: 'x', parameters: z.object({ p: z.string() }), execute: async () => 'x' }
    assert.throws(() => gatedTool(t.gate, { ...base, needsApproval: true, gate: { kind: 'file_read', arg: 'p' } }), /needsApproval/)
    assert.throws(() => gatedTool(t.gate, { ...base, gate: { kind: 'file_read' } }), /arg .*or target/)
    assert.throws(() => gatedTool(t.gate, { ...base, name: undefined, gate: { kind: 'file_read', arg: 'p' } }), /name is required/)
    await assert.rejects(reject(t.gate, {}, {}), /expected a RunState/)
  } finally {
    t.cleanup()
  }
})
