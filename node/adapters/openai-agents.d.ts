/* Types of `turngate/openai-agents`: function tools for `@openai/agents` whose approvals are the gate's. */
import type { FunctionTool, RunToolApprovalItem, ToolExecuteArgument, ToolInputParameters, ToolOptions } from '@openai/agents'
import type { ActionKind, Gate, Store } from '../index.js'

/** The guarded tools' names, as the model sees them. */
export type GuardedToolName = 'read_file' | 'write_file' | 'edit_file' | 'run_shell' | 'fetch_url'

/** Options of `turngateTools`. */
export interface GuardedToolOptions<N extends GuardedToolName = GuardedToolName> {
  /** Only these tools (default: all five, in this order). */
  tools?: readonly N[]
  /** The gate's store: lets a tool resume a run state that another process paused (the
   * deferral is found by its call id). Without it, only this process's deferrals resume. */
  store?: Store
  /** `read_file`: the most bytes read. */
  maxBytes?: number
  /** `run_shell` options. */
  shell?: { env?: Record<string, string>; timeoutMs?: number; cwd?: string }
  /** `fetch_url` options. */
  fetch?: { timeoutMs?: number; headers?: Record<string, string> }
}

/** A guarded tool: it returns the gate's text for the model. */
export type GuardedTool = FunctionTool<unknown, ToolInputParameters, string>

/**
 * The guarded tools (`gate.readFile` ...) as function tools. An ask the gate defers
 * (`Approver.deferAll()`) is the run's interruption; after `state.approve(item)` the resumed
 * run resumes exactly that request, once; `reject` denies it through the gate. The call id is
 * the audit `item_id`.
 */
export declare function turngateTools(gate: Gate, options?: GuardedToolOptions): GuardedTool[]

/** Where a gated tool's action target is: an input property (`arg`; `execute` then receives
 * the target the gate allowed in its place, the resolved absolute path for files) or a
 * function of the input (`target`; `execute` runs only when the gate allows exactly it). */
export type GateSpec<INPUT> = {
  /** The action kind of every call. */
  kind: ActionKind
  /** As `GuardedToolOptions.store`. */
  store?: Store
} & (
  | { arg: { [K in keyof INPUT]: INPUT[K] extends string ? K : never }[keyof INPUT] & string; target?: never }
  | { target: (input: INPUT) => string; arg?: never }
)

type WithoutApproval<T> = T extends unknown ? Omit<T, 'needsApproval'> : never

/** `tool()`'s options with a required `name` and the gate's `gate` spec instead of
 * `needsApproval`. */
export type GatedToolOptions<TParameters extends ToolInputParameters, Context> = WithoutApproval<ToolOptions<TParameters, Context>> & {
  name: string
  gate: GateSpec<ToolExecuteArgument<TParameters>>
}

/**
 * The user's function tool, gated: allowed calls run `execute`, denied ones return the gate's
 * text, asks are interruptions resumed with the person's answer.
 */
export declare function gatedTool<TParameters extends ToolInputParameters, Context = unknown>(gate: Gate, options: GatedToolOptions<TParameters, Context>): FunctionTool<Context, TParameters, unknown>

/** What `reject` needs of a run state. */
export interface RejectableState {
  reject(item: RunToolApprovalItem, options?: { alwaysReject?: boolean; message?: string }): void
}

/**
 * Reject an interruption through the gate: its deferred request resolves as denied (audited,
 * `options.message` as the reason), then `state.reject(item)` with the gate's text as the
 * message the model reads. Resolves to that text.
 */
export declare function reject(gate: Gate, state: RejectableState, item: RunToolApprovalItem, options?: { message?: string; store?: Store }): Promise<string>
