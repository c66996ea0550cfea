'use strict'
// `turngate/openai-agents`: function tools for `@openai/agents` whose approvals are the gate's.
//
// Each tool's `needsApproval` asks the gate: an ask the gate defers (`Approver.deferAll()`)
// becomes the run's interruption (a `RunToolApprovalItem`). After `state.approve(item)` the
// resumed run's `execute` resumes exactly that deferred request (`approval: {requestId,
// decision}`), once; `reject(gate, state, item)` resolves it as denied through the gate and
// gives the model the gate's text. Allowed calls run in `execute`; denied ones return the
// gate's text to the model. The run's tool-call id (`callId`) is the audit `item_id`.

const { callsOf, GUARDED, guardedAction, userAction, checkGateSpec, invalid } = require('./calls.js')

/** The adapter over `@openai/agents`'s `tool` and `zod`'s `z`, as the caller loaded them (the
 * CommonJS entry requires them, the ES module imports them: one framework instance either way). */
function create(agentsTool, z) {
  /** The answer the run state holds for a call: `approved`, `denied`, or undefined. */
  function answerOf(runContext, toolName, callId) {
    if (!runContext || typeof runContext.isToolApproved !== 'function' || typeof callId !== 'string') return undefined
    const approved = runContext.isToolApproved({ toolName, callId })
    return approved === true ? 'approved' : approved === false ? 'denied' : undefined
  }

  /** Denials the person gave with `state.reject` directly (not through `reject` below): each
   * resolves its deferred request as denied, so the audit shows it. */
  async function settle(calls, runContext) {
    for (const [callId, { tool }] of [...calls.waiting]) {
      if (answerOf(runContext, tool, callId) === 'denied') {
        await calls.deny(callId, runContext.getRejectionMessage?.(tool, callId) || 'the person rejected the call')
      }
    }
  }

  function callIdOf(details) {
    return details && details.toolCall && typeof details.toolCall.callId === 'string' ? details.toolCall.callId : undefined
  }

  const SCHEMAS = Object.fromEntries(
    Object.entries(GUARDED).map(([name, spec]) => [
      name,
      z.object(Object.fromEntries(Object.entries(spec.fields).map(([field, about]) => [field, z.string().describe(about)]))),
    ]),
  )

  function gatedFunctionTool(calls, name, description, parameters, action, result, extra = {}) {
    return agentsTool({
      ...extra,
      name,
      description,
      parameters,
      needsApproval: async (runContext, input, callId) => {
        await settle(calls, runContext)
        return calls.prepare(callId, action(input, callId, runContext), { answered: answerOf(runContext, name, callId) !== undefined })
      },
      execute: async (input, runContext, details) => {
        const callId = callIdOf(details)
        await settle(calls, runContext)
        const outcome = await calls.run(callId, action(input, callId, runContext, details), answerOf(runContext, name, callId))
        return result(outcome)
      },
    })
  }

  /**
   * The guarded tools as `@openai/agents` function tools: `read_file`, `write_file`,
   * `edit_file`, `run_shell`, `fetch_url` (or those named in `options.tools`), in that order.
   * Each runs `gate.readFile` ... with the call id as `itemId`. `options`: `store` (the gate's
   * store, to resume a run state another process paused), `maxBytes` (read_file),
   * `shell: {env, timeoutMs, cwd}`, `fetch: {timeoutMs, headers}`.
   */
  function turngateTools(gate, options = {}) {
    if (options === null || typeof options !== 'object') throw invalid('turngateTools', 'options must be an object')
    const calls = callsOf(gate, options.store)
    const names = options.tools ?? Object.keys(GUARDED)
    return names.map((name) => {
      const spec = GUARDED[name]
      if (!spec) throw invalid('turngateTools', `no guarded tool named ${JSON.stringify(name)} (${Object.keys(GUARDED).join(', ')})`)
      const toolOptions = name === 'run_shell' ? options.shell : name === 'fetch_url' ? options.fetch : options
      const action = (input, callId, runContext, details) => guardedAction(gate, name, spec, input, callId, toolOptions, details && details.signal)
      return gatedFunctionTool(calls, name, spec.description, SCHEMAS[name], action, (outcome) => outcome.toolResult)
    })
  }

  /**
   * A function tool of the user's, gated: `options` are `tool()`'s (`name`, `description`,
   * `parameters`, `execute`, ...) plus `gate: {kind, arg | target, store?}`. Each call is
   * authorized as `gate.kind` on the target `gate.arg` names (an input property, which
   * `execute` then receives as the target the gate allowed: the resolved absolute path for
   * files) or `gate.target(input)` returns (then the call runs only when the gate allows exactly
   * that target). Allowed: `execute` runs; denied: the gate's text; ask: an interruption,
   * resumed with the person's answer.
   */
  function gatedTool(gate, options) {
    if (!options || typeof options !== 'object' || typeof options.execute !== 'function') throw invalid('gatedTool', 'expected tool() options with an execute function')
    const { gate: spec, execute, needsApproval, ...rest } = options
    checkGateSpec('gatedTool', spec)
    if (needsApproval !== undefined) throw invalid('gatedTool', 'needsApproval is the gate\'s for a gated tool')
    if (typeof rest.name !== 'string' || rest.name === '') throw invalid('gatedTool', 'options.name is required (the tool name the gate and the run state record)')
    const calls = callsOf(gate, spec.store)
    const action = (input, callId, runContext, details) => userAction(gate, calls.store, rest.name, spec, input, callId, (i) => execute(i, runContext, details))
    return gatedFunctionTool(calls, rest.name, rest.description, rest.parameters, action, (outcome) => (outcome.outcome === 'ok' ? outcome.value : outcome.toolResult), rest)
  }

  /**
   * Reject an interruption through the gate: the deferred request of `item`'s call resolves as
   * denied (audited, with `options.message` as the reason), then `state.reject(item)` with the
   * gate's text as the message the model reads. Resolves to that text. `options.store` as for
   * `turngateTools`.
   */
  async function reject(gate, state, item, options = {}) {
    if (!state || typeof state.reject !== 'function') throw invalid('reject', 'expected a RunState')
    const callId = item && item.rawItem && item.rawItem.callId
    if (typeof callId !== 'string') throw invalid('reject', 'expected a tool approval item of a function call')
    const calls = callsOf(gate, options.store)
    const reason = typeof options.message === 'string' && options.message ? options.message : 'the person rejected the call'
    const text = (await calls.deny(callId, reason)) ?? reason
    state.reject(item, { message: text })
    return text
  }

  return { turngateTools, gatedTool, reject }
}

module.exports = { create }
