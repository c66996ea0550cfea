// ESM entry point of `turngate`: the same module as the CommonJS entry (index.js).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const turngate = require('./index.js')

export const {
  ACTION_KINDS,
  TurnGateError,
  PolicyError,
  SnapshotError,
  StoreError,
  SandboxUnavailableError,
  ApprovalError,
  RunError,
  Approver,
  Broker,
  Gate,
  PendingApproval,
  Store,
  Subscription,
  checkFile,
  checkNetwork,
  evaluate,
  filterEnv,
  parseCommandLine,
  planSpawn,
  resolveAndCheckNetwork,
  InvalidInputError,
  PermissionDeniedError,
  Policy,
  capFromParent,
  ensureNativeShellAllowed,
  intersect,
  mapCliRuntime,
  probePlatform,
  reduce,
  reduceAll,
  renderPermissionsSection,
  resolve,
  schema,
  schemaNames,
  scopeFromAction,
  scopeHash,
  version,
  __napiBindingTarget,
} = turngate
export default turngate
