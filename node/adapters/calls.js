'use strict'
// One framework tool call's way through a turngate gate, shared by the framework adapters
// (`turngate/ai`, `turngate/openai-agents`). A framework asks two things of each call: whether
// it needs a person before it runs (`prepare`), and, once it may, to run it (`run`); a person's
// refusal comes back separately (`deny`). Every call is keyed by the framework's tool-call id,
// which the gate records as the audit event's `item_id`.
//
// Decides nothing itself: the gate decides every call, and an ask the gate defers is the
// framework's approval request. An approval the framework reports resumes exactly the request
// the gate deferred for that tool-call id, once; a call the gate never deferred is decided by
// the gate afresh, so an approval that no deferral backs cannot skip an ask.

const { InvalidInputError, ApprovalError } = require('../index.js')

/** The same shape as the core's denial text, so a model reads every refusal alike. */
function refusalText(kind, target, reason) {
  return `Permission denied by turngate: ${kind} \`${target}\`: ${reason}. Continue with an allowed alternative.`
}

const invalid = (where, message) => new InvalidInputError(`${where}: ${message}`, 'InvalidInput')

/** The calls of one gate, across all the tools an application made for it: a deferral made by
 * one tool's `prepare` is found by the same tool's `run` in a later framework run. */
class GateCalls {
  constructor(gate, store) {
    this.gate = gate
    this.store = store ?? null
    /** tool-call id -> { requestId, tool }: deferred by this process, waiting for a person. */
    this.waiting = new Map()
    /** tool-call id -> {outcome, kind, target} decided while the framework asked whether to
     * pause (an allowed user tool's authorization, or a guarded call a grant let through). */
    this.decided = new Map()
    /** Framework answers already recorded through the gate (approval ids), so a conversation
     * seen again does not resolve them again. */
    this.settled = new Set()
  }

  /** The deferred request that backs an answer for `callId`: this process's, or the one the
   * store recorded for that item id in this turn (a run resumed by another process). */
  async requestFor(callId) {
    const mine = this.waiting.get(callId)
    if (mine) return mine.requestId
    if (!this.store) return null
    const events = await this.store.replay(this.gate.turnId)
    for (let i = events.length - 1; i >= 0; i--) {
      const e = events[i]
      if (e.kind === 'approval_requested' && e.item_id === callId && typeof e.request_key === 'string') return e.request_key
    }
    return null
  }

  /** Whether the framework must pause call `callId` for a person. `answered` says the
   * framework already holds a person's answer for it (a resumed run re-asking). */
  async prepare(callId, action, { answered = false } = {}) {
    checkCallId(callId)
    if (this.waiting.has(callId)) return true
    if (answered) {
      // Pause-and-approved as far as the framework knows; `run` resumes the request that backs
      // it, or, when none does, lets the gate decide afresh. Never a new deferral here: one
      // made now would be approved by an answer given for something else.
      return true
    }
    if (action.effect && action.effect() !== 'ask') return false
    const outcome = await action.authorize(null)
    if (outcome.outcome === 'deferred') {
      this.waiting.set(callId, { requestId: outcome.requestId, tool: action.tool })
      return true
    }
    this.decided.set(callId, { outcome, kind: action.kind, target: action.target })
    return false
  }

  /** Run call `callId` as the framework allows it now. `answer` is the person's answer the
   * framework reports for this call (`approved`, `denied`, or undefined for none). Resolves
   * to the outcome: `{outcome, toolResult, ...}`, with `value` when a user's tool ran. */
  async run(callId, action, answer) {
    checkCallId(callId)
    const early = this.decided.get(callId)
    this.decided.delete(callId)
    // Decided while the framework asked whether to pause, for this very action (a reused
    // tool-call id with other arguments is decided afresh).
    if (early && early.kind === action.kind && early.target === action.target) return action.finish(early.outcome)
    if (answer === 'denied') {
      const text = await this.deny(callId, 'the person denied the call')
      return { outcome: 'denied', toolResult: text ?? refusalText(action.kind, action.target, 'the person denied the call') }
    }
    if (answer === 'approved') {
      const requestId = await this.requestFor(callId)
      if (requestId) {
        const outcome = await action.finish(await action.authorize({ requestId, decision: 'allow_once' }))
        // Spent once it ran; a continuation refused (another action's request) stays for the
        // call it belongs to.
        if (outcome.outcome === 'ok' || outcome.outcome === 'failed') this.waiting.delete(callId)
        return outcome
      }
      // An approval no deferral of this turn backs: the gate decides the call as if new.
    } else if (this.waiting.has(callId)) {
      const { requestId } = this.waiting.get(callId)
      return {
        outcome: 'deferred',
        requestId,
        toolResult: `Permission pending: approval request ${requestId} waits for a person. The action did not run; continue without it or wait for the approval.`,
      }
    }
    return action.finish(await action.authorize(null))
  }

  /** Resolve the request deferred for `callId` as denied (the person refused it in the
   * framework); resolves to the gate's denial text, or null when no pending request backs it. */
  async deny(callId, reason) {
    const requestId = await this.requestFor(callId)
    this.waiting.delete(callId)
    if (!requestId) return null
    try {
      const denial = await this.gate.resume(requestId, { decision: 'deny', reason: reason || 'the person denied the call' })
      return denial.toolResult ?? null
    } catch {
      // Already resolved (a second answer, or another process answered first): the first
      // resolution stands and nothing runs.
      return null
    }
  }
}

function checkCallId(callId) {
  if (typeof callId !== 'string' || callId === '') throw invalid('turngate adapter', `a tool call needs the framework's tool-call id, got ${JSON.stringify(callId)}`)
}

const registry = new WeakMap()

/** The `GateCalls` of `gate` (one per gate, shared by every tool made for it). */
function callsOf(gate, store) {
  if (!gate || typeof gate.authorize !== 'function' || typeof gate.resume !== 'function') {
    throw invalid('turngate adapter', 'expected a turngate Gate')
  }
  if (store != null && typeof store.replay !== 'function') throw invalid('turngate adapter', 'options.store must be a turngate Store')
  let calls = registry.get(gate)
  if (!calls) {
    calls = new GateCalls(gate, store ?? (gate.store && typeof gate.store.replay === 'function' ? gate.store : null))
    registry.set(gate, calls)
  } else if (store != null && !calls.store) {
    calls.store = store
  }
  return calls
}

// ---- actions: what a call does, for the two kinds of tool -----------------------------------

/** The five guarded tools: `Gate.readFile` ... decide and perform in the core. */
const GUARDED = {
  read_file: {
    method: 'readFile',
    kind: 'file_read',
    description: 'Read a text file of the workspace. Relative paths are resolved against the workspace.',
    fields: { path: 'The file to read.' },
    target: (input) => input.path,
    args: (input) => [input.path],
    options: (o) => pick(o, ['maxBytes']),
  },
  write_file: {
    method: 'writeFile',
    kind: 'file_write',
    description: 'Write (create or replace) a text file of the workspace.',
    fields: { path: 'The file to write.', content: 'The whole new content.' },
    target: (input) => input.path,
    args: (input) => [input.path, input.content],
    options: () => ({}),
  },
  edit_file: {
    method: 'editFile',
    kind: 'file_write',
    description: 'Replace one exact occurrence of `old` with `new` in a text file of the workspace.',
    fields: { path: 'The file to edit.', old: 'The exact text to replace (it must occur once).', new: 'The replacement text.' },
    // The core judges an edit as a write and a read (the strictest decides).
    judged: ['file_write', 'file_read'],
    target: (input) => input.path,
    args: (input) => [input.path, input.old, input.new],
    options: () => ({}),
  },
  run_shell: {
    method: 'runShell',
    kind: 'shell_command',
    description: 'Run a shell command in the workspace, under the sandbox. Returns its exit code and output.',
    fields: { command: 'The command line.' },
    target: (input) => input.command,
    args: (input) => [input.command],
    options: (o) => pick(o, ['env', 'timeoutMs', 'cwd']),
  },
  fetch_url: {
    method: 'fetchUrl',
    kind: 'network',
    description: 'Fetch a URL (GET) and return its status and body.',
    fields: { url: 'The URL to fetch.' },
    target: (input) => input.url,
    args: (input) => [input.url],
    options: (o) => pick(o, ['timeoutMs', 'headers']),
  },
}

const RANK = { allow: 0, ask: 1, deny: 2 }
const strictest = (effects) => effects.reduce((a, b) => ((RANK[b] ?? 2) > (RANK[a] ?? 2) ? b : a))

/** `call()`, with a refused resume (an approval already spent or resolved, a request that is
 * not this call's) as a denial the model reads, not an exception that ends the run. */
async function spent(kind, target, approval, call) {
  try {
    return await call()
  } catch (error) {
    if (approval && error instanceof ApprovalError) return { outcome: 'denied', kind, target, toolResult: refusalText(kind, target, error.message) }
    throw error
  }
}

function pick(o, keys) {
  const out = {}
  for (const k of keys) if (o && o[k] !== undefined) out[k] = o[k]
  return out
}

function stringFields(where, spec, input) {
  if (input === null || typeof input !== 'object') throw invalid(where, 'the tool input must be an object')
  for (const field of Object.keys(spec.fields)) {
    if (typeof input[field] !== 'string') throw invalid(where, `\`${field}\` must be a string`)
  }
}

/** A guarded tool call: `gate[method](...args, {itemId, tool, approval, signal, ...})`. */
function guardedAction(gate, name, spec, input, callId, toolOptions, signal) {
  stringFields(name, spec, input)
  if (typeof gate[spec.method] !== 'function') {
    throw invalid(name, `this turngate Gate has no \`${spec.method}\` (the guarded tools need a newer turngate)`)
  }
  const target = spec.target(input)
  const options = spec.options(toolOptions)
  return {
    kind: spec.kind,
    target,
    tool: name,
    // Pausing is decided by the gate's own evaluation, so that allowed and denied calls run
    // (or are refused) when the framework runs the tool, not while it asks whether to pause.
    effect: () => strictest((spec.judged ?? [spec.kind]).map((kind) => gate.evaluate({ kind, target, tool: name, ...(options.cwd ? { cwd: options.cwd } : {}) }).verdict.effect)),
    authorize: (approval) =>
      spent(spec.kind, target, approval, () =>
        gate[spec.method](...spec.args(input), {
          ...options,
          itemId: callId,
          tool: name,
          // The framework's abort (a cancelled run) stops the call (`runShell` kills the command).
          ...(signal instanceof AbortSignal ? { signal } : {}),
          ...(approval ? { approval } : {}),
        }),
      ),
    finish: (outcome) => outcome,
  }
}

const FILE_KINDS = new Set(['file_read', 'file_write'])

/** How a user's own tool names its action: `{kind, arg}` (a property of the input that holds
 * the target, replaced by the allowed one before the tool runs) or `{kind, target}` (a
 * function of the input; the tool runs only when the gate allows exactly that target). */
function checkGateSpec(where, spec) {
  if (spec === null || typeof spec !== 'object') throw invalid(where, 'expected { kind, arg | target }')
  const { kind, arg, target } = spec
  if (typeof kind !== 'string') throw invalid(where, `kind must be an action kind name, not ${JSON.stringify(kind)}`)
  if (arg !== undefined && target !== undefined) throw invalid(where, 'give arg or target, not both')
  if (arg === undefined && typeof target !== 'function') throw invalid(where, 'give arg (the input property holding the target) or target (a function of the input)')
  if (arg !== undefined && (typeof arg !== 'string' || arg === '')) throw invalid(where, 'arg must be the name of an input property')
}

/** A user's tool call: authorized (or resumed) by the gate, then `execute(input)` with the
 * allowed target in place. */
function userAction(gate, store, name, spec, input, callId, execute) {
  if (input === null || typeof input !== 'object') throw invalid(name, 'the tool input must be an object')
  const raw = spec.arg !== undefined ? input[spec.arg] : spec.target(input)
  if (typeof raw !== 'string') throw invalid(name, `the target (${spec.arg ?? 'target(input)'}) must be a string`)
  const { kind } = spec
  const refused = (reason) => ({ outcome: 'denied', toolResult: refusalText(kind, raw, reason) })
  return {
    kind,
    target: raw,
    tool: name,
    authorize: async (approval) => {
      if (approval && store) {
        // A request made for another action is refused before it is resumed (and spent).
        const stored = await store.approval(approval.requestId)
        const own = gate.evaluate({ kind, target: raw, tool: name }).target
        if (stored && stored.action && (stored.action.kind !== kind || (stored.action.target !== raw && stored.action.target !== own))) {
          return refused(`approval request ${approval.requestId} is for ${stored.action.kind} \`${stored.action.target}\`, not this call`)
        }
      }
      const a = await spent(kind, raw, approval, () =>
        approval ? gate.resume(approval.requestId, { decision: 'approve' }) : gate.authorize({ kind, target: raw, tool: name, itemId: callId }),
      )
      if (a.outcome === 'deferred') return { outcome: 'deferred', requestId: a.request.id, request: a.request, toolResult: a.toolResult }
      if (a.outcome !== 'allowed') return { outcome: 'denied', toolResult: a.toolResult }
      if (a.kind !== kind) return refused(`the approved action is a ${a.kind}, not a ${kind}`)
      if (approval) {
        // A resumed request runs only for the call it was made for: the same target as this
        // call resolves to now.
        const own = gate.evaluate({ kind, target: raw, tool: name }).target
        if (a.target !== own) return refused(`approval request ${approval.requestId} was for \`${a.target}\`, not this call's target`)
      }
      return { outcome: 'allowed', allowed: a }
    },
    finish: async (outcome) => {
      if (outcome.outcome !== 'allowed') return outcome
      const allowed = outcome.allowed.target
      let runInput = input
      if (spec.arg !== undefined) {
        runInput = { ...input, [spec.arg]: allowed }
      } else if (allowed !== raw) {
        const exact = FILE_KINDS.has(kind) ? 'an absolute path with no symlink, `.` or `..`' : 'exactly the allowed target'
        return refused(`the gate allows \`${allowed}\`; give ${exact}, or use arg`)
      }
      return { outcome: 'ok', value: await execute(runInput) }
    },
  }
}

module.exports = { GateCalls, callsOf, GUARDED, guardedAction, userAction, checkGateSpec, refusalText, invalid }
