// Type-checked by test/dts.test.mjs (tsc --strict): the checked-in index.d.ts describes the
// package as a TypeScript user calls it. Never run.
import { Policy, Gate, Store, Approver, Broker, PolicyError, TurnGateError, PermissionDeniedError, Turn, resolve, probePlatform, planSpawn, filterEnv, type Verdict, type Effect, type ToolOutcome } from '../index.js'
async function main() {
  const p = Policy.tiered({ providerHost: 'api.example.com' })
  const e: Effect = p.check('file_read', 'x')
  const v: Verdict = p.explain('file_read', 'x')
  const snap = resolve({ mode: 'supervised' }, { workspace_root: '/w', execution_backend: 'native', platform: probePlatform() })
  const store = await Store.open('audit.db')
  const broker = new Broker(p)
  const gate = new Gate('t', snap, { store, approver: Approver.fromFunction(async (ask) => ask.verdict.effect === 'ask' ? 'approve' : { decision: 'deny', reason: 'no' }), broker })
  const a = await gate.authorize({ kind: 'file_write', target: 'a' })
  for await (const n of broker.subscribe()) { n.method }
  try { p.check('file_read', 'x') } catch (err) { if (err instanceof PolicyError) { const l: number | null = err.line } else if (err instanceof TurnGateError) { err.code } }
  // @ts-expect-error: not an action kind
  p.check('file_reed', 'x')
  // @ts-expect-error: not an effect
  p.rule('file_read', 'maybe', '**')
  const read = gate.guard({ kind: 'file_read', target: (p: string) => p }, async (p: string) => p.length)
  const n: number | string = await read('x')
  const strict = gate.guard({ kind: 'file_read', target: (p: string) => p, onDeny: 'throw' }, (p: string) => p.length)
  const m: number = await strict('x')
  try { await strict('y') } catch (err) { if (err instanceof PermissionDeniedError) { const why: string = err.reason; err.outcome } }
  // @ts-expect-error: target takes the function's arguments
  gate.guard({ kind: 'file_read', target: (p: number) => String(p) }, (p: string) => p)
  const write = gate.guard({ kind: 'file_write', arg: 0 }, (p: string, text: string) => text.length)
  const w: number | string = await write('notes.txt', 'hi')
  const save = gate.guard({ kind: 'file_write', arg: 'path' }, (req: { path: string; content: string }) => req.content)
  await save({ path: 'a', content: 'b' })
  // @ts-expect-error: arg or target, not both
  gate.guard({ kind: 'file_write', arg: 0, target: 'x' }, (p: string) => p)
  // @ts-expect-error: not a property of the first argument
  gate.guard({ kind: 'file_write', arg: 'file' }, (req: { path: string }) => req.path)
  // Results are unions on `outcome`: each case has its own fields.
  if (a.outcome === 'allowed') { const t: string = a.target } else if (a.outcome === 'deferred') { const id: unknown = a.request.id } else { const why: string = a.reason }
  const s = await gate.spawn({ kind: 'shell_command', target: 'true' })
  if (s.outcome === 'ran') { const code: number | null = s.exitCode; const out: Buffer = s.stdout } else if (s.outcome === 'deferred') { const text: string = s.toolResult } else { const why: string = s.reason }
  // @ts-expect-error: a denial has no exit code
  if (s.outcome === 'denied') s.exitCode
  await gate.resume('apr_1', { decision: 'deny', reason: 'no' })
  await gate.resumeSpawn('apr_1', { decision: 'approve', remember: [{ kind: 'file_read', effect: 'allow', pattern: '**', tool: null }] })
  // @ts-expect-error: not a decision
  await gate.resume('apr_1', { decision: 'maybe' })
  const r: boolean = broker.respond('apr_1', 'deny').applied
  // The guarded tools and the one-line turn (issue 19).
  const turn = await Turn.create('/tmp/ws', { mode: 'supervised', approver: 'defer_all', store: '/tmp/audit.db', signal: new AbortController().signal })
  const readOut: ToolOutcome = await turn.readFile('a.txt', { maxBytes: 10, itemId: 'call_1' })
  const body: string | null = readOut.content
  await turn.writeFile('a.txt', new Uint8Array([1]), { approval: { requestId: readOut.requestId ?? '', decision: 'allow_for_turn' } })
  await turn.editFile('a.txt', 'x', 'y', { approval: { requestId: 'apr_1', decision: true } })
  const sh = await turn.runShell('ls', { env: { A: 'b' }, timeoutMs: 5, stdin: 'in', cwd: 'sub', onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => chunk.length })
  const code: number | null = sh.exitCode
  const f = await turn.fetchUrl('https://example.com', { method: 'POST', headers: { a: 'b' }, body: 'x', timeoutMs: 1 })
  const status: number | null = f.status
  // @ts-expect-error: not an outcome
  if (f.outcome === 'ran') f.status
  // @ts-expect-error: not a decision name
  await turn.readFile('a', { approval: { requestId: 'x', decision: 'maybe' } })
  // The spawn plan and the filtered environment: names and values as Buffers, the timeout optional.
  const plan = planSpawn({}, {}, p, 'ls', { env: [{ name: 'A', value: Buffer.from('b') }], timeoutMs: 5 })
  const argv0: string = plan.argv[0]; const ms: number | undefined = plan.timeoutMs; const prog: string = plan.commands[0].program
  const kept: Buffer = plan.env.vars[0].name; const why: string = filterEnv([{ name: 'A', value: 'b' }], 'filtered', '/w').dropped[0].reason
  // @ts-expect-error: a variable's value is a Buffer
  const text: string = plan.env.vars[0].value
  await turn[Symbol.asyncDispose]()
  return [e, v, a.outcome, n, m, w, s.outcome, r, body, code, status]
}
main()
