'use strict'
// `turngate/ai`: tools for the Vercel AI SDK (`ai`) whose approvals are the gate's.
//
// Each tool's `needsApproval` asks the gate: an ask the gate defers (`Approver.deferAll()`)
// becomes the SDK's `tool-approval-request`, and the run stops there. When the person's
// `tool-approval-response` comes back in the messages, `execute` resumes exactly that deferred
// request (`approval: {requestId, decision}`), once. Allowed calls run in `execute`; denied
// ones return the gate's text to the model. The SDK's tool-call id is the audit `item_id`.
//
// The SDK answers a denial itself (an `execution-denied` result) without calling the tool:
// `applyApprovalResponses(gate, messages)` records such denials through the gate (and gives
// the model the gate's wording); the tools also do it for the messages they see.
//
// Loads `zod` (a peer of `ai`), never `ai` itself: a tool is a plain object to the SDK.

const { z } = require('zod')

const { callsOf, GUARDED, guardedAction, userAction, checkGateSpec, invalid } = require('./calls.js')

/** The person's answer for `toolCallId` in the last message (where the SDK reads approval
 * responses from): `approved`, `denied`, or undefined. */
function answerFor(messages, toolCallId) {
  const responses = lastResponses(messages)
  if (responses.length === 0) return undefined
  const requests = approvalRequests(messages)
  let answer
  for (const r of responses) {
    if (requests.get(r.approvalId) === toolCallId) answer = r.approved === true ? 'approved' : 'denied'
  }
  return answer
}

function lastResponses(messages) {
  if (!Array.isArray(messages) || messages.length === 0) return []
  const last = messages[messages.length - 1]
  if (!last || last.role !== 'tool' || !Array.isArray(last.content)) return []
  return last.content.filter((p) => p && p.type === 'tool-approval-response' && typeof p.approvalId === 'string')
}

/** approvalId -> toolCallId, from the assistant messages' `tool-approval-request` parts. */
function approvalRequests(messages) {
  const map = new Map()
  for (const m of messages) {
    if (!m || m.role !== 'assistant' || !Array.isArray(m.content)) continue
    for (const p of m.content) {
      if (p && p.type === 'tool-approval-request' && typeof p.approvalId === 'string' && typeof p.toolCallId === 'string') {
        map.set(p.approvalId, p.toolCallId)
      }
    }
  }
  return map
}

/**
 * Record every denial in the last message's `tool-approval-response` parts through the gate
 * (the deferred request of that tool call resolves as denied, audited), and return the
 * messages with each such denial's `reason` replaced by the gate's text for the model. Call it
 * on the messages of a resumed conversation before `generateText`/`streamText`; answers for
 * calls the gate never deferred are left as they are. Approvals are not touched: the tool's
 * `execute` resumes them.
 */
async function applyApprovalResponses(gate, messages, options = {}) {
  const calls = callsOf(gate, options.store)
  const responses = lastResponses(messages)
  if (responses.length === 0) return messages
  const requests = approvalRequests(messages)
  const reasons = new Map()
  for (const r of responses) {
    if (r.approved === true || calls.settled.has(r.approvalId)) continue
    const toolCallId = requests.get(r.approvalId)
    if (!toolCallId) continue
    calls.settled.add(r.approvalId)
    const text = await calls.deny(toolCallId, typeof r.reason === 'string' && r.reason ? r.reason : 'the person denied the call')
    if (text) reasons.set(r.approvalId, text)
  }
  if (reasons.size === 0) return messages
  const last = messages[messages.length - 1]
  const content = last.content.map((p) =>
    p && p.type === 'tool-approval-response' && reasons.has(p.approvalId) ? { ...p, reason: reasons.get(p.approvalId) } : p,
  )
  return [...messages.slice(0, -1), { ...last, content }]
}

const SCHEMAS = Object.fromEntries(
  Object.entries(GUARDED).map(([name, spec]) => [
    name,
    z.strictObject(Object.fromEntries(Object.entries(spec.fields).map(([field, about]) => [field, z.string().describe(about)]))),
  ]),
)

/**
 * The guarded tools as AI SDK tools: `{ read_file, write_file, edit_file, run_shell,
 * fetch_url }` (or those named in `options.tools`). Each runs `gate.readFile` ... with the
 * tool-call id as `itemId`. `options`: `store` (the gate's store, to resume a run another
 * process paused), `maxBytes` (read_file), `shell: {env, timeoutMs, cwd}`,
 * `fetch: {timeoutMs, headers}`.
 */
function turngateTools(gate, options = {}) {
  if (options === null || typeof options !== 'object') throw invalid('turngateTools', 'options must be an object')
  const calls = callsOf(gate, options.store)
  const names = options.tools ?? Object.keys(GUARDED)
  const tools = {}
  for (const name of names) {
    const spec = GUARDED[name]
    if (!spec) throw invalid('turngateTools', `no guarded tool named ${JSON.stringify(name)} (${Object.keys(GUARDED).join(', ')})`)
    const toolOptions = name === 'run_shell' ? options.shell : name === 'fetch_url' ? options.fetch : options
    const action = (input, toolCallId, signal) => guardedAction(gate, name, spec, input, toolCallId, toolOptions, signal)
    tools[name] = {
      description: spec.description,
      inputSchema: SCHEMAS[name],
      needsApproval: (input, { toolCallId, messages }) => needsApproval(calls, action, input, toolCallId, messages),
      execute: async (input, { toolCallId, messages, abortSignal }) => {
        const outcome = await calls.run(toolCallId, action(input, toolCallId, abortSignal), answerFor(messages, toolCallId))
        return outcome.toolResult
      },
    }
  }
  return tools
}

async function needsApproval(calls, action, input, toolCallId, messages) {
  await applyApprovalResponses(calls.gate, messages)
  return calls.prepare(toolCallId, action(input, toolCallId), { answered: answerFor(messages, toolCallId) !== undefined })
}

/**
 * The user's own AI SDK tool `tool`, gated: each call is authorized as `gate.kind` on the
 * target `gate.arg` names (an input property, which `execute` then receives as the target the
 * gate allowed: the resolved absolute path for files) or `gate.target(input)` returns (then
 * the call runs only when the gate allows exactly that target). Allowed: the tool's `execute`
 * runs and its result goes to the model; denied: the gate's text; ask: the SDK's approval
 * request, resumed with the person's answer. `name` is the tool name the gate records
 * (default `gate.kind`); `store` as for `turngateTools`.
 */
function gatedTool(gate, tool, spec) {
  checkGateSpec('gatedTool', spec)
  if (!tool || typeof tool !== 'object' || typeof tool.execute !== 'function') throw invalid('gatedTool', 'expected an AI SDK tool with an execute function')
  if (tool.needsApproval !== undefined) throw invalid('gatedTool', 'the tool already has needsApproval; the gate decides approval for a gated tool')
  const calls = callsOf(gate, spec.store)
  const name = spec.name ?? spec.kind
  const run = tool.execute
  const action = (input, toolCallId, options) => userAction(gate, calls.store, name, spec, input, toolCallId, (i) => run(i, options))
  return {
    ...tool,
    needsApproval: (input, { toolCallId, messages }) => needsApproval(calls, (i, id) => action(i, id, { toolCallId, messages }), input, toolCallId, messages),
    execute: async (input, options) => {
      const outcome = await calls.run(options.toolCallId, action(input, options.toolCallId, options), answerFor(options.messages, options.toolCallId))
      return outcome.outcome === 'ok' ? outcome.value : outcome.toolResult
    },
  }
}

module.exports = { turngateTools, gatedTool, applyApprovalResponses }
