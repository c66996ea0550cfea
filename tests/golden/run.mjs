// The golden calls through the Node binding: one JSON line per call (tests/golden/README.md).
// Node's records are camelCase; the canonical form (scripts/test-golden) snake_cases keys.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'

const turngate = createRequire(import.meta.url)('../../node/index.js')

const ERRORS = {
  PolicyError: 'Policy',
  SnapshotError: 'Snapshot',
  StoreError: 'Store',
  SandboxUnavailableError: 'SandboxUnavailable',
  ApprovalError: 'Approval',
  RunError: 'Run',
  ChangesError: 'Changes',
  InvalidInputError: 'InvalidInput',
}

const subst = (v, ws) =>
  typeof v === 'string' ? v.replaceAll('$WS', ws)
    : Array.isArray(v) ? v.map((x) => subst(x, ws))
      : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, subst(x, ws)])) : v

const camel = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), v]))

function policy(spec) {
  if ('tiered' in spec) return turngate.Policy.tiered()
  if ('mode' in spec) return turngate.Policy.mode(spec.mode)
  return turngate.Policy.fromObject(spec.json)
}

async function gate(a, tmp, i, asks) {
  const answers = { approve: { decision: 'approve' }, deny: { decision: 'deny', reason: 'the golden approver said no' }, defer: { decision: 'defer' } }
  const approver = turngate.Approver.fromFunction(async (ask) => { asks.push(ask); return answers[a.approver] })
  const snapshot = turngate.resolve(a.selection, a.context)
  const store = await turngate.Store.open(path.join(tmp, `${i}.db`))
  return new turngate.Gate('golden', snapshot, { store, approver })
}

async function run(call, a, tmp, i) {
  switch (call) {
    case 'policy.check': return policy(a.policy).check(a.kind, a.target, a.tool)
    case 'policy.explain': return policy(a.policy).explain(a.kind, a.target, a.tool)
    case 'policy.check_batch': return policy(a.policy).checkBatch(a.actions)
    case 'snapshot.resolve': return turngate.resolve(a.selection, a.context)
    case 'command.parse': return turngate.parseCommandLine(a.line)
    case 'env.filter': return turngate.filterEnv(a.vars, a.mode, a.cwd, a.untrusted_path_roots)
    case 'gate.evaluate': return (await gate(a, tmp, i, [])).evaluate(camel(a.invocation))
    case 'gate.authorize': {
      const asks = []
      const g = await gate(a, tmp, i, asks)
      return { authorization: await g.authorize(camel(a.invocation)), asks }
    }
    case 'reduce_all': return turngate.reduceAll(a.inputs)
    case 'scope.from_action': return turngate.scopeFromAction(a.kind, a.target, a.tool, a.cwd)
    case 'scope.hash': return turngate.scopeHash(a.scope)
    case 'changes.parse': return turngate.parseChangeSet(a.change_set)
    case 'changes.show': return (await turngate.Store.open(`${tmp}/${i}.db`)).changeSet(a.id)
    default: throw new Error(`unknown call ${call}`)
  }
}

// A Buffer (its toJSON form) as the list of its bytes: the serde form of bytes in JSON.
const bytes = (_, v) => (v && v.type === 'Buffer' && Array.isArray(v.data) ? v.data : v)

const doc = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const { GOLDEN_WS: ws, GOLDEN_TMP: tmp } = process.env
for (const [i, c] of doc.calls.entries()) {
  let out
  try {
    out = { result: await run(c.call, subst(c.args, ws), tmp, i) }
  } catch (e) {
    if (!(e instanceof turngate.TurnGateError)) throw e
    out = { error: { type: ERRORS[e.constructor.name], message: e.message } }
  }
  console.log(JSON.stringify({ name: c.name, ...out }, bytes))
}
