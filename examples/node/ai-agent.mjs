// An agent on the Vercel AI SDK (`ai`) whose tools are turngate's guarded tools
// (`turngate/ai`), driven offline by the SDK's test model (`MockLanguageModelV4`). It shows,
// in one auto_accept_edits turn:
//   - an allowed write (`write_file notes.md`),
//   - a denied secret read (`read_file .env`: the model gets the gate's text, not the secret),
//   - an approved shell command (the gate's ask is the SDK's tool-approval request; the
//     person's approval resumes exactly that request),
//   - a kernel-refused escape (an approved command that writes outside the workspace: the
//     sandbox refuses it, `Read-only file system`),
//   - the audit timeline, projected by the shared reducers (`reduceAll`).
//
//   (cd node && npm ci && npm run build:debug)
//   node examples/node/ai-agent.mjs

import { createRequire } from 'node:module'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

// The packages as node/ installs them (`turngate` is node/ itself).
const require = createRequire(new URL('../../node/package.json', import.meta.url))
const turngate = require('turngate')
const { turngateTools, applyApprovalResponses } = require('turngate/ai')
const { generateText, stepCountIs } = require('ai')
const { MockLanguageModelV4 } = require('ai/test')

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }
const toolCalls = (...list) => ({
  content: list.map(([toolCallId, toolName, input]) => ({ type: 'tool-call', toolCallId, toolName, input: JSON.stringify(input) })),
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage,
  warnings: [],
})
const text = (t) => ({ content: [{ type: 'text', text: t }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] })

/** Runs the agent; `approve(request)` plays the person (default: approve every ask). Resolves
 * to what happened, for examples/node/test/agents.test.mjs. */
export async function main({ log = console.log, approve = () => true } = {}) {
  const base = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-ai-agent-')))
  const workspace = path.join(base, 'project')
  mkdirSync(workspace)
  writeFileSync(path.join(workspace, '.env'), 'OPENAI_API_KEY=sk-do-not-leak\n')

  const turnId = 'ai-agent-turn'
  const store = await turngate.Store.open(path.join(base, 'audit.db'))
  // The one-line turn. Every ask is deferred: it becomes the framework's own pause.
  const gate = await turngate.Turn.create(workspace, { mode: 'auto_accept_edits', store, approver: 'defer_all', turnId })
  const tools = turngateTools(gate, { store })

  // What the model "says", step by step.
  const model = new MockLanguageModelV4({
    doGenerate: [
      toolCalls(['call-1', 'write_file', { path: 'notes.md', content: '# Notes\n' }], ['call-2', 'read_file', { path: '.env' }], ['call-3', 'run_shell', { command: 'echo hello from the sandbox' }]),
      toolCalls(['call-4', 'run_shell', { command: 'touch ../escaped.txt' }]),
      text('Wrote notes.md; .env is off limits; the shell ran; writing outside the project was refused.'),
    ],
  })

  let messages = [{ role: 'user', content: 'Set up notes, check the env, say hello, and try to write outside.' }]
  for (;;) {
    const result = await generateText({ model, tools, messages, stopWhen: stepCountIs(10) })
    messages = [...messages, ...result.responseMessages]
    const requests = result.content.filter((p) => p.type === 'tool-approval-request')
    if (requests.length === 0) {
      log(`model: ${result.text}`)
      break
    }
    const answers = []
    for (const r of requests) {
      const approved = await approve(r)
      log(`approval request for ${r.toolCall.toolCallId} ${r.toolCall.toolName} ${JSON.stringify(r.toolCall.input)}: ${approved ? 'approved' : 'denied'}`)
      answers.push({ type: 'tool-approval-response', approvalId: r.approvalId, approved })
    }
    // Denials are recorded through the gate (and the model reads the gate's text).
    messages = await applyApprovalResponses(gate, [...messages, { role: 'tool', content: answers }])
  }

  // What the model was shown for each call: the tool results in the conversation.
  const seen = {}
  for (const m of messages) {
    if (m.role !== 'tool') continue
    for (const p of m.content) {
      if (p.type !== 'tool-result') continue
      seen[p.toolCallId] = p.output.type === 'execution-denied' ? p.output.reason : String(p.output.value)
      log(`${p.toolCallId} ${p.toolName}: ${seen[p.toolCallId].split('\n').slice(0, 3).join(' | ')}`)
    }
  }

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
