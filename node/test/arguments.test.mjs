// Wrong argument types, the attacker's way: every public function, method, static and
// constructor of the package gets, in place of each string or object argument, a number,
// `undefined`, an object (for a string) or a string (for an object). Each must throw (or reject
// with) an `InvalidInputError` whose code is `ERR_TURNGATE_INVALID_INPUT`, never napi's plain
// `Error` with `StringExpected`, and never quietly run. The table must name every export and
// method, so a new one without a row fails here.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import * as turngate from '../index.mjs'

const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-node-args-')))
const platform = turngate.probePlatform()
const snapshot = () => turngate.resolve({ mode: 'supervised' }, { workspace_root: dir, execution_backend: 'native', platform })
const policy = turngate.Policy.tiered()
const network = { mode: 'enabled', allowed_domains: [], denied_domains: [], allow_localhost: false, allow_unix_sockets: false, allowed_tcp_ports: [] }
const sandbox = { mode: 'unrestricted', cwd: dir, filesystem: { entries: [] }, tmp: 'host', network, backend_requirement: 'optional', backend_preference: 'none' }
const processPolicy = { shell_enabled: true, inherit_stdin: false, inherit_session: false, env: 'filtered', max_duration_ms: 1000, denied_commands: [], allowed_command_families: [] }
const invocation = { kind: 'file_read', target: path.join(dir, 'a.txt') }
const scope = turngate.scopeFromAction('file_write', '/w/a.txt', 'write_file')
const request = (id) => ({
  id,
  turn_id: 't1',
  tool_name: 'write_file',
  action_kind: 'file_write',
  scope_hash: turngate.scopeHash(scope),
  reason: 'default',
  details: { target: '/w/a.txt' },
  visible_thread_ids: [],
  allowed_resolutions: ['allow_once', 'allow_for_turn', 'deny'],
})
const vectors = (suite) => JSON.parse(readFileSync(new URL(`../../tests/conformance/${suite}.json`, import.meta.url), 'utf8')).vectors
const reducerInput = vectors('reducer')[1].inputs[0]
const changeSet = vectors('changes_serde').find((v) => v.expect_error == null && !/\d{16}/.test(JSON.stringify(v.change_set))).change_set
const event = {
  turn_id: 't', seq: 0, kind: 'decision_allowed', profile_mode: 'full_access', profile_source: 'composer',
  action_kind: 'file_read', target: '/w/a', decision: 'allow', reason: 'default', decider: 'policy', cached_approval_used: false,
}
const store = await turngate.Store.open(path.join(dir, 'audit.db'))
const gate = () => new turngate.Gate('turn-args', snapshot(), { store, approver: turngate.Approver.denyAll() })
const broker = () => new turngate.Broker(turngate.Policy.mode('supervised'))

// [name, receiver (null: a free function or a static), the valid arguments, the indices of the
// string arguments, the indices of the object arguments, which are optional].
const S = 'string'
const O = 'object'
const cases = [
  ['version', null, [], []],
  ['schema', null, ['Policy'], [S]],
  ['schemaNames', null, [], []],
  ['probePlatform', null, [], []],
  ['resolve', null, [{ mode: 'supervised' }, { workspace_root: dir, execution_backend: 'native', platform }], [O, O]],
  ['intersect', null, () => [snapshot(), turngate.capFromParent(snapshot(), 'parent_turn')], [O, O]],
  ['capFromParent', null, () => [snapshot(), 'parent_turn'], [O, S]],
  ['ensureNativeShellAllowed', null, () => [snapshot()], [O]],
  ['renderPermissionsSection', null, () => [snapshot().permission_profile], [O]],
  ['mapCliRuntime', null, ['codex', 'supervised'], [S, S]],
  ['reduce', null, [null, reducerInput], [null, O]],
  ['reduceAll', null, [[]], [O]],
  ['scopeFromAction', null, ['file_write', '/w/a.txt', 'write_file', '/w'], [S, S, S, S]],
  ['scopeHash', null, [scope], [O]],
  ['parseChangeSet', null, [changeSet], [O]],
  ['evaluate', null, () => [snapshot(), invocation], [O, O]],
  ['checkFile', null, [sandbox, policy, 'file_read', path.join(dir, 'a')], [O, O, S, S, S]],
  ['checkNetwork', null, [network, policy, 'http://example.com/'], [O, O, S, S]],
  ['resolveAndCheckNetwork', null, [network, policy, 'http://127.0.0.1:1/'], [O, O, S, S]],
  ['planSpawn', null, [sandbox, processPolicy, policy, 'ls'], [O, O, O, S, O]],
  ['filterEnv', null, [[{ name: 'A', value: 'b' }], 'filtered', '/w'], [O, S, S, O]],
  ['parseCommandLine', null, ['ls'], [S]],

  ['new Policy', null, [], []],
  ['Policy.fromJson', null, ['{}', 'p.json'], [S, S]],
  ['Policy.fromToml', null, ['', 'p.toml'], [S, S]],
  ['Policy.fromObject', null, [{}], [O]],
  ['Policy.fromFile', null, [path.join(dir, 'p.json')], [S]],
  ['Policy.tiered', null, [{ testBinary: 'cargo' }], [O]],
  ['Policy.permissive', null, [], []],
  ['Policy.mode', null, ['supervised'], [S]],
  ['merge', () => policy, [policy], [O]],
  ['contain', () => policy, [policy], [O]],
  ['rule', () => policy, ['file_read', 'allow', 'x/**', { tool: 't', layer: 'l' }], [S, S, S, O]],
  ['layer', () => policy, ['l'], [S]],
  ['withDefault', () => policy, ['file_read', 'deny'], [S, S]],
  ['named', () => policy, ['n'], [S]],
  ['check', () => policy, ['file_read', 'a'], [S, S, S]],
  ['explain', () => policy, ['file_read', 'a'], [S, S, S]],
  ['checkBatch', () => policy, [[['file_read', 'a']]], [O]],
  ['lint', () => policy, [], []],
  ['explainInTurn', () => policy, ['file_read', 'a', null, []], [S, S, S, O]],
  ['replayEvents', () => policy, [[], {}], [O, O]],
  ['toObject', () => policy, [], []],
  ['toJson', () => policy, [], []],
  ['toToml', () => policy, [], []],
  ['toString', () => policy, [], []],

  ['Approver.fromFunction', null, [() => 'deny'], [O]],
  ['Approver.approveAll', null, [], []],
  ['Approver.denyAll', null, [], []],
  ['Approver.deferAll', null, [], []],
  ['Approver.broker', null, () => [broker(), 10], [O]],

  ['new Broker', null, [policy], [O]],
  ['subscribe', broker, [], []],
  ['open', broker, [request('apr_1'), { kind: 'file_write', target: '/w/a.txt', tool: 'write_file' }, 10], [O, O]],
  ['respond', broker, ['apr_1', 'deny'], [S, S]],
  ['pendingRequests', broker, [], []],
  ['outcome', broker, ['apr_1'], [S]],
  ['hasGrant', broker, ['t1', 'h'], [S, S]],
  ['cancelTurn', broker, ['t1'], [S]],
  ['endTurn', broker, ['t1'], [S]],
  ['close', broker, [], []],

  ['new Gate', null, () => ['turn-args', snapshot(), { store, approver: turngate.Approver.denyAll() }], [S, O, O]],
  ['snapshot', gate, [], []],
  ['evaluate', gate, [invocation], [O]],
  ['authorize', gate, [invocation], [O]],
  ['resume', gate, ['apr_x', { decision: 'deny' }], [S, O]],
  ['spawn', gate, [{ kind: 'shell_command', target: 'true' }], [O]],
  ['resumeSpawn', gate, ['apr_x', { decision: 'deny' }], [S, O]],
  ['runApproved', gate, ['apr_x'], [S]],
  ['openRead', gate, [invocation], [O]],
  ['openWrite', gate, [{ kind: 'file_write', target: path.join(dir, 'w.txt') }], [O]],
  ['resolveAndCheck', gate, ['http://127.0.0.1:1/'], [S, S]],
  ['grantForTurn', gate, ['h'], [S]],
  ['close', gate, [], []],
  ['guard', gate, [{ kind: 'file_read', arg: 0 }, () => 1], [O, O]],
  // the guarded tools (issue 19)
  ['readFile', gate, ['a.txt', {}], [S, O]],
  ['writeFile', gate, ['w2.txt', 'x', {}], [S, S, O]],
  ['editFile', gate, ['a.txt', 'x', 'y', {}], [S, S, S, O]],
  ['runShell', gate, ['true', {}], [S, O]],
  ['fetchUrl', gate, ['http://127.0.0.1:1/', {}], [S, O]],
  ['_tool', gate, ['read_file', { path: 'a.txt' }, null, null, false], [S, O]],
  ['next', () => new turngate.ToolCall(), [], []],

  ['Store.open', null, [path.join(dir, 'other.db')], [S]],
  ['append', () => store, [event], [O]],
  ['replay', () => store, [policy, {}], [null, O]],
  ['turns', () => store, [], []],
  ['pendingApprovals', () => store, [], []],
  ['approval', () => store, ['apr_x'], [S]],
  ['changeSets', () => store, [], []],
  ['changeSet', () => store, ['cs_x'], [S]],
  ['applyChangeSet', () => store, ['cs_x', {}], [S, O]],
  ['discardChangeSet', () => store, ['cs_x', {}], [S, O]],
  ['resolve', () => store, ['apr_x', 'deny', 'r'], [S, S, S]],

  ['nextNotification', () => broker().subscribe(), [], []],
  ['tryNext', () => broker().subscribe(), [], []],
  ['cancel', () => broker().subscribe(), [], []],
  ['wait', () => broker().open(request('apr_1'), { kind: 'file_write', target: '/w/a.txt' }, 10), [], []],
]

// A callable for a row: the free function, static, constructor or bound method.
function callable([name, receiver]) {
  if (receiver) {
    const r = receiver()
    return (...args) => r[name](...args)
  }
  if (name.startsWith('new ')) {
    const Class = turngate[name.slice(4)]
    return (...args) => new Class(...args)
  }
  const [owner, member] = name.includes('.') ? name.split('.') : [null, name]
  return owner ? (...args) => turngate[owner][member](...args) : (...args) => turngate[member](...args)
}

const argsOf = (row) => (typeof row[2] === 'function' ? row[2]() : row[2].slice())

/** What a call did: `{ threw }` or `{ value }`, a rejection counting as thrown. */
async function outcomeOf(fn, args) {
  try {
    return { value: await fn(...args) }
  } catch (threw) {
    return { threw }
  }
}

test('the table names every public function, static and method', () => {
  const listed = new Set(cases.map(([name, receiver]) => (receiver ? `.${name}` : name)))
  const missing = []
  for (const [name, value] of Object.entries(turngate)) {
    if (typeof value !== 'function' || /Error$/.test(name)) continue
    if (!/^[A-Z]/.test(name)) {
      if (!listed.has(name)) missing.push(name)
      continue
    }
    for (const key of Object.getOwnPropertyNames(value)) {
      if (typeof value[key] === 'function' && !listed.has(`${name}.${key}`)) missing.push(`${name}.${key}`)
    }
    for (const key of Object.getOwnPropertyNames(value.prototype)) {
      const d = Object.getOwnPropertyDescriptor(value.prototype, key)
      if (key !== 'constructor' && typeof d.value === 'function' && !listed.has(`.${key}`)) missing.push(`${name}.prototype.${key}`)
    }
  }
  assert.deepEqual(missing, [])
})

test('every valid row runs without an argument error (so the attacks below test one argument)', async () => {
  const failures = []
  for (const row of cases) {
    const { threw } = await outcomeOf(callable(row), argsOf(row))
    if (threw instanceof turngate.InvalidInputError || threw?.code === 'StringExpected') failures.push(`${row[0]}: ${threw}`)
  }
  assert.deepEqual(failures, [])
})

test('a number, undefined or the wrong shape in any argument is an InvalidInputError', async () => {
  const failures = []
  for (const row of cases) {
    const kinds = row[3]
    for (let i = 0; i < kinds.length; i++) {
      if (kinds[i] === null) continue
      const wrong = kinds[i] === S ? [5, {}, undefined] : [5, 'text', undefined]
      for (const bad of wrong) {
        const args = argsOf(row)
        // `undefined` in an optional last place is the argument left out: allowed.
        if (bad === undefined && i >= args.length) continue
        if (bad === undefined && optional(row[1] ? `.${row[0]}` : row[0], i)) continue
        while (args.length <= i) args.push(undefined)
        args[i] = bad
        const { threw } = await outcomeOf(callable(row), args)
        const label = `${row[0]} argument ${i} = ${JSON.stringify(bad) ?? 'undefined'}`
        if (!(threw instanceof turngate.InvalidInputError) || threw.code !== 'ERR_TURNGATE_INVALID_INPUT') {
          failures.push(`${label}: ${threw ? `${threw.constructor.name} ${threw.code}: ${threw.message}` : 'accepted'}`)
        }
      }
    }
  }
  assert.deepEqual(failures, [])
})

// The optional arguments, by name (`.name` for a method) and index: undefined there is valid.
const OPTIONAL = {
  resolve: [0],
  'Policy.fromJson': [1],
  'Policy.fromToml': [1],
  'Policy.tiered': [0],
  '.rule': [3],
  '.check': [2],
  '.explain': [2],
  '.explainInTurn': [2, 3],
  '.replayEvents': [1],
  scopeFromAction: [2, 3],
  checkFile: [4],
  checkNetwork: [3],
  resolveAndCheckNetwork: [3],
  planSpawn: [4],
  filterEnv: [3],
  '.resolveAndCheck': [1],
  '.replay': [1],
  '.applyChangeSet': [1],
  '.discardChangeSet': [1],
  reduceAll: [1],
  '.open': [2],
  'Approver.broker': [1],
  '.readFile': [1],
  '.writeFile': [2],
  '.editFile': [3],
  '.runShell': [1],
  '.fetchUrl': [1],
}
function optional(name, i) {
  return OPTIONAL[name]?.includes(i) ?? false
}

test.after(() => rmSync(dir, { recursive: true, force: true }))
