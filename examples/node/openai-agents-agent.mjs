// An agent on `@openai/agents` whose tools are turngate's guarded tools
// (`turngate/openai-agents`), driven offline by the SDK's scripted test model
// (`ScriptedModel`). It shows, in one auto_accept_edits turn:
//   - an allowed write (`write_file notes.md`),
//   - a denied secret read (`read_file .env`: the model gets the gate's text, not the secret),
//   - an approved shell command (the gate's ask is the run's interruption; `state.approve`
//     resumes exactly that deferred request),
//   - a kernel-refused escape (an approved command that writes outside the workspace: the
//     sandbox refuses it, `Read-only file system`),
//   - the audit timeline, projected by the shared reducers (`reduceAll`).
//
//   (cd node && npm ci && npm run build:debug)
//   node examples/node/openai-agents-agent.mjs

import { createRequire } from 'node:module'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// The packages as node/ installs them (`turngate` is node/ itself); all CommonJS builds, so
// the adapter's tools and the Agent are one framework instance.
const require = createRequire(new URL('../../node/package.json', import.meta.url))
const turngate = require('turngate')
const { turngateTools, reject } = require('turngate/openai-agents')
const { Agent, run, setTracingDisabled } = require('@openai/agents')
const { ScriptedModel, functionCall, assistantMessage } = require('@openai/agents/testing')

setTracingDisabled(true)

/** Runs the agent; `approve(item)` plays the person (default: approve every interruption).
 * Resolves to what happened, for examples/node/test/agents.test.mjs. */
export async function main({ log = console.log, approve = () => true } = {}) {
  const base = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-agents-agent-')))
  const workspace = path.join(base, 'project')
  mkdirSync(workspace)
  writeFileSync(path.join(workspace, '.env'), 'OPENAI_API_KEY=sk-do-not-leak\n')

  const turnId = 'agents-agent-turn'
  const store = await turngate.Store.open(path.join(base, 'audit.db'))
  // The one-line turn. Every ask is deferred: it becomes the framework's own pause.
  const gate = await turngate.Turn.create(workspace, { mode: 'auto_accept_edits', store, approver: 'defer_all', turnId })

  const model = new ScriptedModel([
    [
      functionCall('write_file', { path: 'notes.md', content: '# Notes\n' }, { callId: 'call-1' }),
      functionCall('read_file', { path: '.env' }, { callId: 'call-2' }),
      functionCall('run_shell', { command: 'echo hello from the sandbox' }, { callId: 'call-3' }),
    ],
    [functionCall('run_shell', { command: 'touch ../escaped.txt' }, { callId: 'call-4' })],
    [assistantMessage('Wrote notes.md; .env is off limits; the shell ran; writing outside the project was refused.')],
  ])
  const agent = new Agent({ name: 'worker', instructions: 'Do the task with the tools.', model, tools: turngateTools(gate, { store }) })

  let result = await run(agent, 'Set up notes, check the env, say hello, and try to write outside.')
  while (result.interruptions.length > 0) {
    for (const item of result.interruptions) {
      const approved = await approve(item)
      log(`interruption for ${item.rawItem.callId} ${item.name} ${item.arguments}: ${approved ? 'approved' : 'rejected'}`)
      if (approved) result.state.approve(item)
      else await reject(gate, result.state, item, { message: 'the person said no' })
    }
    result = await run(agent, result.state)
  }
  const seen = {}
  for (const item of result.history) {
    if (item.type !== 'function_call_result') continue
    seen[item.callId] = typeof item.output === 'string' ? item.output : item.output.text
    log(`${item.callId} ${item.name}: ${seen[item.callId].split('\n').slice(0, 3).join(' | ')}`)
  }
  log(`model: ${result.finalOutput}`)

  const events = await store.replay(turnId)
  const { timeline } = turngate.reduceAll(events.map((audit_event) => ({ audit_event })))
  await gate[Symbol.asyncDispose]()
  log('audit timeline:')
  for (const row of timeline) log(`  ${JSON.stringify(row)}`)
  return {
    workspace,
    outputs: seen,
    notes: existsSync(path.join(workspace, 'notes.md')) ? readFileSync(path.join(workspace, 'notes.md'), 'utf8') : null,
    escaped: existsSync(path.join(base, 'escaped.txt')),
    events,
    timeline,
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
