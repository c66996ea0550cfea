// The Policy surface beyond the conformance vectors: builders, batch forms, the JavaScript-built
// explain against the addon's own object conversion, serialization round trips, checkers.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import * as turngate from '../index.mjs'
import cjs from '../index.js'

test('explain is the Verdict record: a Rule object or null, every field present', () => {
  const p = turngate.Policy.tiered().rule('file_write', 'deny', 'x/**', { tool: 'ed*', layer: 'extra' })
  assert.deepEqual(p.explain('file_write', 'x/y', 'edit'), { effect: 'deny', rule: { kind: 'file_write', effect: 'deny', pattern: 'x/**', tool: 'ed*' }, layer: 'extra', reason: 'deny_rule' })
  const odd = turngate.Policy.tiered().rule('file_write', 'deny', 'odd\u001f/**', { layer: 'l\u001f' })
  assert.deepEqual(odd.explain('file_write', 'odd\u001f/a'), { effect: 'deny', rule: { kind: 'file_write', effect: 'deny', pattern: 'odd\u001f/**', tool: null }, layer: 'l\u001f', reason: 'deny_rule' })
})

test('explain builds a fresh plain object per call from its cached shapes, in field order', () => {
  const p = turngate.Policy.tiered().rule('file_write', 'deny', 'x/**', { layer: 'extra' })
  const a = p.explain('file_write', 'x/y')
  const b = p.explain('file_write', 'x/y')
  assert.notEqual(a, b, 'no verdict object is shared between calls')
  assert.notEqual(a.rule, b.rule, 'no rule object is shared between calls')
  for (const v of [a, a.rule]) {
    assert.equal(Object.getPrototypeOf(v), Object.prototype)
    assert.equal(Object.isFrozen(v), false)
  }
  assert.deepEqual(Object.keys(a), ['effect', 'rule', 'layer', 'reason'])
  assert.deepEqual(Object.keys(a.rule), ['kind', 'effect', 'pattern', 'tool'])
  a.effect = 'allow'
  a.rule.pattern = '**'
  assert.equal(p.explain('file_write', 'x/y').effect, 'deny', 'mutating a result changes no later one')
  assert.equal(p.explain('file_write', 'x/y').rule.pattern, 'x/**')
  // The same shape with and without a rule, the values passed as arguments, never as code.
  const quote = turngate.Policy.tiered().rule('file_write', 'deny', '"); throw 1; ("/**', { layer: "'`${1}`" })
  assert.deepEqual(quote.explain('file_write', '"); throw 1; ("/a'), { effect: 'deny', rule: { kind: 'file_write', effect: 'deny', pattern: '"); throw 1; ("/**', tool: null }, layer: "'`${1}`", reason: 'deny_rule' })
  assert.deepEqual(p.explain('network', 'x:1'), { effect: 'deny', rule: null, layer: 'defaults', reason: 'default' })
})

test('checkBatch takes tuples and objects, and names a malformed action', () => {
  const p = turngate.Policy.tiered()
  assert.deepEqual(p.checkBatch([['file_read', 'config/.env'], ['file_read', 'src/a.rs', null], { kind: 'network', target: 'x:1' }]), ['deny', 'allow', 'deny'])
  assert.throws(() => p.checkBatch([['file_read']]), (e) => e instanceof turngate.InvalidInputError && /actions\[0\]/.test(e.message))
  assert.deepEqual(p.checkBatch([]), [])
  assert.throws(() => p.checkBatch([['nope', 'x']]), (e) => e instanceof turngate.InvalidInputError && /actions\[0\]\.kind/.test(e.message))
})

test('builders return new policies; serialization round-trips', () => {
  const base = new turngate.Policy()
  const p = base.layer('team').rule('network', 'allow', 'api.example.com:443').withDefault('file_write', 'deny').named('team-policy')
  assert.equal(base.check('network', 'api.example.com:443'), 'deny', 'the original is unchanged')
  assert.equal(p.check('network', 'api.example.com:443'), 'allow')
  assert.equal(p.explain('network', 'api.example.com:443').layer, 'team')
  assert.deepEqual(turngate.Policy.fromToml(p.toToml()).toObject(), p.toObject())
  assert.deepEqual(turngate.Policy.fromJson(p.toJson()).toObject(), p.toObject())
  assert.match(String(p), /^Policy\.fromJson\(/)
  const capped = turngate.Policy.permissive().contain(turngate.Policy.mode('supervised').named('cap'))
  assert.equal(capped.check('file_write', '/etc/passwd'), capped.explain('file_write', '/etc/passwd').effect)
})

test('a policy file parse error names the field, line and column', () => {
  assert.throws(
    () => turngate.Policy.fromToml('[[layers]]\nname = 3\n', 'team.toml'),
    (e) => e instanceof turngate.PolicyError && e.code === 'ERR_TURNGATE_POLICY' && e.line === 2 && typeof e.path === 'string' && /team\.toml/.test(e.message),
  )
})

test('checkers: network, shell parse, env filter over bytes', () => {
  const policy = turngate.Policy.mode('auto_accept_edits')
  const net = { mode: 'enabled', allowed_domains: [], denied_domains: [], allow_localhost: false, allow_unix_sockets: false, allowed_tcp_ports: [] }
  const r = turngate.checkNetwork(net, policy, 'http://127.0.0.1:8080/')
  assert.equal(r.verdict.effect, 'deny')
  assert.equal(r.verdict.reason, 'localhost_blocked')
  assert.deepEqual(turngate.parseCommandLine('sudo rm -rf / && echo $(id)').unresolved.length > 0, true)
  const env = turngate.filterEnv([{ name: 'LD_PRELOAD', value: '/tmp/x.so' }, { name: Buffer.from('HOME'), value: Buffer.from('/root') }], 'filtered', '/w')
  const kept = env.vars.map((v) => v.name.toString())
  assert.ok(kept.includes('HOME') && !kept.includes('LD_PRELOAD'), kept.join(','))
  assert.equal(env.dropped[0].name, 'LD_PRELOAD')
})

test('planSpawn and filterEnv: the records in field order, names and values as Buffers, an uncapped timeout absent', (t) => {
  const policy = turngate.Policy.mode('auto_accept_edits')
  const network = { mode: 'enabled', allowed_domains: [], denied_domains: [], allow_localhost: false, allow_unix_sockets: false, allowed_tcp_ports: [] }
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'turngate-plan-')))
  t.after(() => rmSync(cwd, { recursive: true, force: true }))
  const sandbox = { mode: 'unrestricted', cwd, filesystem: { entries: [] }, tmp: 'host', network, backend_requirement: 'optional', backend_preference: 'none' }
  const proc = { shell_enabled: true, inherit_stdin: false, inherit_session: false, env: 'filtered', denied_commands: [], allowed_command_families: [] }
  const raw = Buffer.from([0x4e, 0xff])
  const env = [{ name: 'LD_PRELOAD', value: '/x.so' }, { name: raw, value: Buffer.from([0xfe]) }]
  const plan = turngate.planSpawn(sandbox, proc, policy, 'ls -l | wc', { env })
  assert.deepEqual(Object.keys(plan), ['verdict', 'argv', 'cwd', 'env', 'inheritStdin', 'newSession', 'sandboxRequired', 'commands', 'unresolved'])
  assert.equal('timeoutMs' in plan, false, 'no cap, no timeoutMs')
  assert.deepEqual(Object.keys(plan.verdict), ['effect', 'rule', 'layer', 'reason'])
  assert.deepEqual(plan.argv.slice(1), ['-c', 'ls -l | wc'], 'a pipeline runs under the shell')
  assert.equal(plan.cwd, cwd)
  assert.deepEqual([plan.inheritStdin, plan.newSession, plan.sandboxRequired], [false, true, false])
  assert.deepEqual(plan.commands.map((c) => [Object.keys(c), c.program, c.args, Object.keys(c.verdict)]), [
    [['program', 'args', 'verdict'], 'ls', ['-l'], ['effect', 'rule', 'layer', 'reason']],
    [['program', 'args', 'verdict'], 'wc', [], ['effect', 'rule', 'layer', 'reason']],
  ])
  assert.deepEqual(plan.unresolved, [])
  assert.deepEqual(Object.keys(plan.env), ['vars', 'dropped'])
  for (const v of plan.env.vars) {
    assert.deepEqual(Object.keys(v), ['name', 'value'])
    assert.ok(Buffer.isBuffer(v.name) && Buffer.isBuffer(v.value), 'names and values are Buffers')
  }
  assert.deepEqual(plan.env.vars.map((v) => v.name.toString()), ['PATH', 'PWD'], 'rebuilt')
  assert.equal(plan.env.vars[1].value.toString(), cwd)
  assert.deepEqual(plan.env.dropped, [{ name: 'LD_PRELOAD', reason: 'injection' }, { name: 'N\ufffd', reason: 'invalid_encoding' }])
  assert.deepEqual(Object.keys(plan.env.dropped[0]), ['name', 'reason'])
  const capped = turngate.planSpawn(sandbox, { ...proc, max_duration_ms: 1000 }, policy, 'ls', { timeoutMs: 5000 })
  assert.deepEqual(Object.keys(capped).slice(3, 6), ['env', 'timeoutMs', 'inheritStdin'])
  assert.equal(capped.timeoutMs, 1000)
  assert.deepEqual(capped.argv, ['ls'])
  const filtered = turngate.filterEnv(env, 'filtered', cwd)
  assert.deepEqual(Object.keys(filtered), ['vars', 'dropped'])
  assert.deepEqual(filtered, plan.env, 'the plan carries the filtered environment')
  const all = turngate.filterEnv(env, 'all', '/w')
  const kept = all.vars.find((v) => v.name.equals(raw))
  assert.ok(kept && Buffer.isBuffer(kept.name) && Buffer.isBuffer(kept.value), 'a non-UTF-8 name is kept as a Buffer')
  assert.ok(kept.value.equals(Buffer.from([0xfe])), 'and its non-UTF-8 value')
  assert.deepEqual(turngate.filterEnv([], 'none', '/w').dropped, [])
})

test('the CommonJS and ESM entry points are the same module', () => {
  assert.equal(cjs.Policy, turngate.Policy)
  assert.equal(cjs.TurnGateError, turngate.TurnGateError)
  assert.equal(turngate.version(), cjs.version())
  assert.deepEqual([...turngate.ACTION_KINDS].sort(), [...new Set(turngate.ACTION_KINDS)].sort())
})

test('store.replay(policy) lists the recorded decisions a candidate flips; replay(turnId) still lists events', async () => {
  const { mkdtempSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { join } = await import('node:path')
  const store = await turngate.Store.open(join(mkdtempSync(join(tmpdir(), 'turngate-replay-')), 'audit.db'))
  const event = (target) => ({
    turn_id: 't', seq: 0, kind: 'decision_allowed', profile_mode: 'full_access', profile_source: 'composer',
    action_kind: 'file_read', target, decision: 'allow', reason: 'default', decider: 'policy', cached_approval_used: false,
  })
  await store.append(event('/w/a.rs'))
  await store.append(event('/w/b.log'))
  const candidate = turngate.Policy.mode('full_access').merge(turngate.Policy.fromObject({ layers: [{ name: 'logs', rules: [{ kind: 'file_read', effect: 'deny', pattern: '*.log' }] }] }))
  const report = await store.replay(candidate, { turn: 't' })
  assert.equal(report.decisions, 2)
  assert.deepEqual(report.flips.map((f) => [f.target, f.before, f.after, f.layer]), [['/w/b.log', 'allow', 'deny', 'logs']])
  assert.equal((await store.replay('t')).length, 2)
  assert.deepEqual(candidate.lint(), [])
})

test('classes need new; errors carry ERR_TURNGATE_* codes', () => {
  assert.throws(() => turngate.Policy(), TypeError)
  assert.throws(() => cjs.Gate('t', {}, {}), TypeError)
  assert.ok(new turngate.Policy() instanceof turngate.Policy)
  assert.ok(turngate.Policy.tiered() instanceof turngate.Policy)
  assert.throws(() => turngate.Policy.tiered().check('file_reed', 'x'), (e) => e instanceof turngate.PolicyError && e.code === 'ERR_TURNGATE_POLICY')
  assert.throws(() => turngate.Policy.tiered().explain('file_read', 'x', 3), Error)
})
