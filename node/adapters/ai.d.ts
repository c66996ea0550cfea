/* Types of `turngate/ai`: tools for the Vercel AI SDK (`ai`) whose approvals are the gate's. */
import type { ModelMessage, Tool } from 'ai'
import type { ActionKind, Gate, Store } from '../index.js'

/** The guarded tools' names, as the model sees them. */
export type GuardedToolName = 'read_file' | 'write_file' | 'edit_file' | 'run_shell' | 'fetch_url'

/** The inputs of the guarded tools. */
export interface GuardedToolInputs {
  read_file: { path: string }
  write_file: { path: string; content: string }
  edit_file: { path: string; old: string; new: string }
  run_shell: { command: string }
  fetch_url: { url: string }
}

/** The guarded tools as AI SDK tools; each returns the gate's text for the model. */
export type GuardedTools<N extends GuardedToolName = GuardedToolName> = { [K in N]: Tool<GuardedToolInputs[K], string> }

/** Options of `turngateTools`. */
export interface GuardedToolOptions<N extends GuardedToolName = GuardedToolName> {
  /** Only these tools (default: all five). */
  tools?: readonly N[]
  /** The gate's store: lets a tool resume a run that another process paused (the deferral is
   * found by its tool-call id). Without it, only this process's deferrals resume. */
  store?: Store
  /** `read_file`: the most bytes read. */
  maxBytes?: number
  /** `run_shell` options. */
  shell?: { env?: Record<string, string>; timeoutMs?: number; cwd?: string }
  /** `fetch_url` options. */
  fetch?: { timeoutMs?: number; headers?: Record<string, string> }
}

/**
 * The guarded tools (`gate.readFile` ...) as AI SDK tools. An ask the gate defers
 * (`Approver.deferAll()`) is the SDK's `tool-approval-request`; the person's
 * `tool-approval-response` resumes exactly that request, once. The tool-call id is the audit
 * `item_id`.
 */
export declare function turngateTools<N extends GuardedToolName = GuardedToolName>(gate: Gate, options?: GuardedToolOptions<N>): GuardedTools<N>

/** Where a gated tool's action target is: an input property (`arg`; the tool then runs with
 * the target the gate allowed in its place, the resolved absolute path for files) or a
 * function of the input (`target`; the tool runs only when the gate allows exactly it). */
export type GateSpec<INPUT> = {
  /** The action kind of every call. */
  kind: ActionKind
  /** The tool name the gate records (default: `kind`). */
  name?: string
  /** As `GuardedToolOptions.store`. */
  store?: Store
} & (
  | { arg: { [K in keyof INPUT]: INPUT[K] extends string ? K : never }[keyof INPUT] & string; target?: never }
  | { target: (input: INPUT) => string; arg?: never }
)

/**
 * The user's tool, gated: allowed calls run its `execute`, denied ones return the gate's text,
 * asks are the SDK's approval requests. The tool must not have its own `needsApproval`.
 */
export declare function gatedTool<INPUT, OUTPUT>(gate: Gate, tool: Tool<INPUT, OUTPUT>, spec: GateSpec<INPUT>): Tool<INPUT, OUTPUT | string>

/**
 * Record the person's denials in the last message's `tool-approval-response` parts through
 * the gate (audited) and return the messages with each such denial's `reason` replaced by the
 * gate's text for the model. Approvals are left to the tools' `execute`.
 */
export declare function applyApprovalResponses(gate: Gate, messages: ModelMessage[], options?: { store?: Store }): Promise<ModelMessage[]>
