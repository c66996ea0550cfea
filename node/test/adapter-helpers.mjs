// Shared by the adapter tests: a real turn (workspace, store, gate deferring every ask) and
// the audit rows of a tool call.

import { mkdtempSync, realpathSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import * as turngate from 'turngate'

/** A turn under `mode` with a workspace holding `files`, a store beside (not inside) it and a
 * gate whose approver defers every ask. */
export async function turn({ mode = 'auto_accept_edits', files = {}, turnId = 'turn-1' } = {}) {
  const base = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-adapter-')))
  const workspace = path.join(base, 'ws')
  mkdirSync(workspace)
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(workspace, name)), { recursive: true })
    writeFileSync(path.join(workspace, name), text)
  }
  const snapshot = turngate.resolve({ mode, source: 'composer' }, { workspace_root: workspace, execution_backend: 'native', platform: turngate.probePlatform() })
  const storePath = path.join(base, 'audit.db')
  const store = await turngate.Store.open(storePath)
  const gate = new turngate.Gate(turnId, snapshot, { store, approver: turngate.Approver.deferAll() })
  /** Another process's view of the same turn: a new gate on the same store file. */
  const reopen = async () => {
    const s = await turngate.Store.open(storePath)
    return { store: s, gate: new turngate.Gate(turnId, snapshot, { store: s, approver: turngate.Approver.deferAll() }) }
  }
  return { base, workspace, store, gate, snapshot, turnId, reopen, cleanup: () => rmSync(base, { recursive: true, force: true }) }
}

/** The audit rows of `turnId` that name tool call `itemId`, as `[kind, ...]`. */
export async function rowsOf(store, turnId, itemId) {
  return (await store.replay(turnId)).filter((e) => e.item_id === itemId)
}

/** The rows of the approval request `requestId` (`approval_requested`, `approval_resolved`, ...). */
export async function requestRows(store, turnId, requestId) {
  return (await store.replay(turnId)).filter((e) => e.request_key === requestId)
}

/** Whether the Gate has the guarded tools (`readFile` ...); they come with the tools19 half. */
export const HAS_GUARDED_TOOLS = typeof turngate.Gate.prototype.readFile === 'function'
export const NEEDS_GUARDED = HAS_GUARDED_TOOLS ? false : 'this turngate build has no guarded tools (Gate.readFile ...)'
