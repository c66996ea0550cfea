// The guarded tools (`Gate.readFile`, `writeFile`, `editFile`, `runShell`, `fetchUrl`), the
// one-line `Turn.create` and `Symbol.asyncDispose`. The shared behaviour is in
// tests/conformance/tools.json (run by conformance.test.mjs); these add what only a live Node
// caller shows: streamed output, AbortSignal, a real HTTP exchange to a vetted address, the
// turn's lifetime.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import net from 'node:net'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync, chmodSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

import * as turngate from '../index.mjs'

function workspace() {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-tools-')))
  const ws = path.join(root, 'ws')
  mkdirSync(ws)
  writeFileSync(path.join(ws, 'a.txt'), 'hello world\n')
  return { root, ws, cleanup: () => rmSync(root, { recursive: true, force: true }) }
}

const snapshotOf = (ws, mode = 'auto_accept_edits', ctx = {}) =>
  turngate.resolve({ mode }, { workspace_root: ws, execution_backend: 'native', platform: turngate.probePlatform(), ...ctx })

test('Turn.create builds a gate whose tools work; asyncDispose ends the turn', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    // `await using gate = ...` where the syntax is supported (Node 24); its effect here.
    const gate = await turngate.Turn.create(ws, { store: path.join(root, 'audit.db'), turnId: 't-node' })
    try {
      assert.ok(gate instanceof turngate.Gate)
      assert.equal(gate.turnId, 't-node')
      const w = await gate.writeFile('new.txt', 'made by a tool')
      assert.equal(w.outcome, 'ok', JSON.stringify(w))
      assert.equal(w.target, path.join(ws, 'new.txt'))
      const r = await gate.readFile('new.txt')
      assert.deepEqual([r.outcome, r.content], ['ok', 'made by a tool'])
      const e = await gate.editFile('a.txt', 'world', 'there')
      assert.equal(e.outcome, 'ok', JSON.stringify(e))
    } finally {
      await gate[Symbol.asyncDispose]()
    }
    assert.equal(readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'hello there\n')
    await assert.rejects(gate.readFile('a.txt'), /closed/)
  } finally {
    cleanup()
  }
})

test('Turn.create without a store uses the CLI default location; a pre-aborted signal rejects', async () => {
  const { root, ws, cleanup } = workspace()
  const before = process.env.XDG_STATE_HOME
  process.env.XDG_STATE_HOME = path.join(root, 'xdg')
  try {
    const gate = await turngate.Turn.create(ws, { turnId: 't-default', approver: 'defer_all' })
    const d = await gate.writeFile('a.txt', 'x', { itemId: 'call_1' })
    assert.ok(['ok', 'deferred'].includes(d.outcome))
    gate.close()
    const db = path.join(root, 'xdg', 'turngate', 'audit.db')
    assert.ok(existsSync(db))
    const store = await turngate.Store.open(db)
    assert.ok((await store.turns()).includes('t-default'))
    const ac = new AbortController()
    ac.abort()
    await assert.rejects(turngate.Turn.create(ws, { signal: ac.signal }), { name: 'AbortError' })
  } finally {
    if (before === undefined) delete process.env.XDG_STATE_HOME
    else process.env.XDG_STATE_HOME = before
    cleanup()
  }
})

test('writeFile takes bytes, is atomic, keeps the mode and leaves no temporary', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    chmodSync(path.join(ws, 'a.txt'), 0o640)
    const gate = new turngate.Gate('t', snapshotOf(ws), { store: await turngate.Store.open(path.join(root, 'audit.db')) })
    const w = await gate.writeFile('a.txt', new Uint8Array([0, 1, 255]))
    assert.equal(w.outcome, 'ok', JSON.stringify(w))
    assert.deepEqual([...readFileSync(path.join(ws, 'a.txt'))], [0, 1, 255])
    assert.equal(statSync(path.join(ws, 'a.txt')).mode & 0o777, 0o640)
    assert.deepEqual(readdirSync(ws), ['a.txt'])
  } finally {
    cleanup()
  }
})

test('runShell streams output to onOutput, and a missing program is exit 127', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    const gate = new turngate.Gate('t', snapshotOf(ws), { store: await turngate.Store.open(path.join(root, 'audit.db')), approver: turngate.Approver.approveAll() })
    const chunks = []
    const r = await gate.runShell("printf out; printf err >&2", { onOutput: (stream, chunk) => chunks.push([stream, Buffer.from(chunk).toString()]) })
    assert.equal(r.outcome, 'ok', JSON.stringify(r))
    assert.deepEqual([r.exitCode, r.stdout, r.stderr], [0, 'out', 'err'])
    assert.equal(chunks.filter(([s]) => s === 'stdout').map(([, c]) => c).join(''), 'out')
    assert.equal(chunks.filter(([s]) => s === 'stderr').map(([, c]) => c).join(''), 'err')
    const m = await gate.runShell('turngate-no-such-program')
    assert.equal(m.exitCode, 127)
    assert.match(m.stderr, /command not found/)
    const s = await gate.runShell('cat', { stdin: 'piped' })
    assert.equal(s.stdout, 'piped')
  } finally {
    cleanup()
  }
})

test('an AbortSignal kills a running command and rejects', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    const gate = new turngate.Gate('t', snapshotOf(ws), { store: await turngate.Store.open(path.join(root, 'audit.db')), approver: turngate.Approver.approveAll() })
    const ac = new AbortController()
    const started = Date.now()
    const run = gate.runShell('sleep 30; touch late.txt', { signal: ac.signal })
    setTimeout(() => ac.abort(), 300)
    await assert.rejects(run, { name: 'AbortError' })
    assert.ok(Date.now() - started < 10_000, 'aborted long before the command would end')
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.ok(!existsSync(path.join(ws, 'late.txt')))
  } finally {
    cleanup()
  }
})

test('a deferred command continued with approval runs once; runApproved runs one resolved in the store', async () => {
  const { root, ws, cleanup } = workspace()
  try {
    const store = await turngate.Store.open(path.join(root, 'audit.db'))
    const gate = new turngate.Gate('t', snapshotOf(ws), { store, approver: turngate.Approver.deferAll() })
    const d = await gate.runShell('touch one.txt')
    assert.equal(d.outcome, 'deferred', JSON.stringify(d))
    const ok = await gate.runShell('touch one.txt', { approval: { requestId: d.requestId, decision: true } })
    assert.equal(ok.outcome, 'ok', JSON.stringify(ok))
    const again = await gate.runShell('touch one.txt', { approval: { requestId: d.requestId, decision: 'allow_once' } })
    assert.equal(again.outcome, 'denied')
    assert.match(again.toolResult, /already_used/)
    const d2 = await gate.runShell('touch two.txt')
    await store.resolve(d2.requestId, 'allow_once', 'responder')
    const ran = await gate.runApproved(d2.requestId)
    assert.equal(ran.outcome, 'ran')
    assert.ok(existsSync(path.join(ws, 'two.txt')))
  } finally {
    cleanup()
  }
})

function server() {
  const s = http.createServer((req, res) => {
    if (req.url === '/redirect') {
      res.writeHead(302, { Location: 'http://169.254.169.254/' })
      res.end()
      return
    }
    const body = `hello ${req.headers.host} ${req.method} ${req.url}`
    res.writeHead(200, { 'Content-Length': Buffer.byteLength(body) })
    res.end(body)
  })
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(s)))
}

test('fetchUrl connects to the vetted address; a redirect is reported, not followed', async () => {
  const { root, ws, cleanup } = workspace()
  const s = await server()
  try {
    const port = s.address().port
    const gate = new turngate.Gate('t', snapshotOf(ws, 'auto_accept_edits', { allowed_domains: ['127.0.0.1'] }), {
      store: await turngate.Store.open(path.join(root, 'audit.db')),
      approver: turngate.Approver.approveAll(),
    })
    const url = `http://127.0.0.1:${port}/x?y=1`
    const r = await gate.fetchUrl(url)
    assert.equal(r.outcome, 'ok', JSON.stringify(r))
    assert.deepEqual([r.status, r.content, r.target, r.kind], [200, `hello 127.0.0.1:${port} GET /x?y=1`, url, 'network'])
    const redirect = await gate.fetchUrl(`http://127.0.0.1:${port}/redirect`)
    assert.equal(redirect.status, 302)
    assert.match(redirect.toolResult, /not followed/)
    const closed = await gate.fetchUrl('http://127.0.0.1:9/', { timeoutMs: 2000 })
    assert.equal(closed.outcome, 'failed', JSON.stringify(closed))
    const plain = new turngate.Gate('t2', snapshotOf(ws), { store: await turngate.Store.open(path.join(root, 'audit.db')), approver: turngate.Approver.approveAll() })
    const denied = await plain.fetchUrl(url)
    assert.equal(denied.outcome, 'denied', JSON.stringify(denied))
  } finally {
    s.close()
    cleanup()
  }
})

// A raw server that answers each connection with every byte it received in the 100 ms after
// the first request head: what the binding really sent, a smuggled second request included.
function echoServer() {
  const seen = []
  const s = net.createServer((sock) => {
    let raw = Buffer.alloc(0)
    let answering = false
    sock.on('data', (c) => {
      raw = Buffer.concat([raw, c])
      if (answering || !raw.includes('\r\n\r\n')) return
      answering = true
      setTimeout(() => {
        seen.push(raw.toString('latin1'))
        sock.end(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: ${raw.length}\r\n\r\n`), raw]))
      }, 100)
    })
    sock.on('error', () => {})
  })
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve({ s, seen, port: s.address().port })))
}

test('fetchUrl refuses a Host header, framing headers and line breaks before it connects', async () => {
  const { root, ws, cleanup } = workspace()
  const { s, seen, port } = await echoServer()
  try {
    const gate = new turngate.Gate('t', snapshotOf(ws, 'auto_accept_edits', { allowed_domains: ['127.0.0.1'] }), {
      store: await turngate.Store.open(path.join(root, 'audit.db')),
      approver: turngate.Approver.approveAll(),
    })
    const url = `http://127.0.0.1:${port}/x`
    for (const [headers, says] of [
      [{ Host: 'internal.example' }, /set by fetch_url itself/],
      [{ 'Transfer-Encoding': 'chunked' }, /set by fetch_url itself/],
      [{ 'X-A': '1\r\nHost: internal.example' }, /line break/],
      [{ 'X-A': ['1', '2'] }, /must be a string/],
    ]) {
      await assert.rejects(gate.fetchUrl(url, { headers }), (e) => e instanceof turngate.InvalidInputError && says.test(e.message))
    }
    await assert.rejects(gate.fetchUrl(url, { method: 'CONNECT' }), turngate.InvalidInputError)
    for (const timeoutMs of [0, -1, '500', 1.5, NaN]) {
      await assert.rejects(gate.fetchUrl(url, { timeoutMs }), (e) => e instanceof turngate.InvalidInputError && /timeoutMs must be a positive integer/.test(e.message))
    }
    // A Map would cross as {} and drop every header: refused, naming it.
    await assert.rejects(gate.fetchUrl(url, { headers: new Map([['X-A', '1']]) }), (e) => e instanceof turngate.InvalidInputError && /plain object of strings, not Map/.test(e.message))
    assert.deepEqual(seen, [])
    const ok = await gate.fetchUrl(url, { method: 'PUT', headers: { 'X-Note': 'a b' }, body: 'x' })
    const head = ok.content.split('\r\n')
    assert.equal(head[0], 'PUT /x HTTP/1.1')
    assert.ok(head.includes(`Host: 127.0.0.1:${port}`) && head.includes('X-Note: a b'), ok.content)
  } finally {
    s.close()
    cleanup()
  }
})

test('fetchUrl reads each option once: a getter cannot answer the check one way and the request another', async () => {
  const { root, ws, cleanup } = workspace()
  const { s, port } = await echoServer()
  try {
    const gate = new turngate.Gate('t', snapshotOf(ws, 'auto_accept_edits', { allowed_domains: ['127.0.0.1'] }), {
      store: await turngate.Store.open(path.join(root, 'audit.db')),
      approver: turngate.Approver.approveAll(),
    })
    const reads = { method: 0, headers: 0 }
    const opts = {
      get method() { return reads.method++ === 0 ? 'POST' : 'DELETE' },
      get headers() { return reads.headers++ === 0 ? { 'X-A': 'checked' } : { Host: 'internal.example' } },
    }
    const r = await gate.fetchUrl(`http://127.0.0.1:${port}/x`, opts)
    assert.equal(r.content.split('\r\n')[0], 'POST /x HTTP/1.1', r.content)
    assert.ok(r.content.includes('X-A: checked') && !r.content.includes('internal.example'), r.content)
    assert.deepEqual(reads, { method: 1, headers: 1 })
  } finally {
    s.close()
    cleanup()
  }
})

// The bytes after the head, and whether the head frames exactly those.
function framed(content) {
  const [head, ...rest] = content.split('\r\n\r\n')
  const body = rest.join('\r\n\r\n')
  const length = /\r\ncontent-length: (\d+)\r\n/i.exec(head + '\r\n')
  return { head, body, exact: length !== null && Number(length[1]) === Buffer.byteLength(body, 'latin1') }
}

test('fetchUrl frames the body it sends: no GET body, lying length or grown buffer carries a second request', async () => {
  const { root, ws, cleanup } = workspace()
  const { s, port } = await echoServer()
  try {
    const gate = new turngate.Gate('t', snapshotOf(ws, 'auto_accept_edits', { allowed_domains: ['127.0.0.1'] }), {
      store: await turngate.Store.open(path.join(root, 'audit.db')),
      approver: turngate.Approver.approveAll(),
    })
    const url = `http://127.0.0.1:${port}/x`
    const smuggled = 'GET /admin HTTP/1.1\r\nHost: internal.example\r\n\r\n'
    // node:http frames no body of a GET, DELETE or OPTIONS by itself: the server would read
    // this one as a second request.
    for (const method of ['GET', 'DELETE', 'OPTIONS']) {
      const r = framed((await gate.fetchUrl(url, { method, body: smuggled })).content)
      assert.ok(r.exact, `${method}: the body is not framed: ${JSON.stringify(r)}`)
      assert.equal(r.body, smuggled)
    }
    // A Buffer whose own byteLength says 5: the whole buffer is sent, and framed as such.
    const lying = Buffer.from('hello' + smuggled)
    Object.defineProperty(lying, 'byteLength', { value: 5 })
    Object.defineProperty(lying, 'length', { value: 5 })
    const l = framed((await gate.fetchUrl(url, { method: 'POST', body: lying })).content)
    assert.ok(l.exact && l.body === 'hello' + smuggled, JSON.stringify(l))
    // A length-tracking view of a resizable buffer, grown once the call has started: what is
    // sent is what it held at the call.
    const rab = new ArrayBuffer(5, { maxByteLength: 4096 })
    const view = new Uint8Array(rab)
    view.set(Buffer.from('hello'))
    const call = gate.fetchUrl(url, { method: 'POST', body: view })
    rab.resize(5 + smuggled.length)
    view.set(Buffer.from(smuggled), 5)
    const g = framed((await call).content)
    assert.ok(g.exact && g.body === 'hello', JSON.stringify(g))
  } finally {
    s.close()
    cleanup()
  }
})

test('fetchUrl stops reading at the cap, and timeoutMs bounds the whole exchange', { timeout: 60_000 }, async () => {
  const { root, ws, cleanup } = workspace()
  let sent = 0
  // One server streams without end, as fast as it may; the other drips a byte every 50 ms.
  const s = http.createServer((req, res) => {
    res.writeHead(200)
    if (req.url === '/drip') {
      const t = setInterval(() => res.write('x'), 50)
      res.on('close', () => clearInterval(t))
      return
    }
    const chunk = Buffer.alloc(64 * 1024, 'y')
    const pump = () => {
      while (res.write(chunk)) { sent += chunk.length; if (sent > (64 << 20)) return res.end() }
      res.once('drain', pump)
    }
    pump()
  })
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve))
  try {
    const port = s.address().port
    const gate = new turngate.Gate('t', snapshotOf(ws, 'auto_accept_edits', { allowed_domains: ['127.0.0.1'] }), {
      store: await turngate.Store.open(path.join(root, 'audit.db')),
      approver: turngate.Approver.approveAll(),
    })
    const big = await gate.fetchUrl(`http://127.0.0.1:${port}/big`)
    assert.equal(big.outcome, 'ok', JSON.stringify(big.toolResult))
    assert.equal(big.content.length, 1 << 20)
    assert.match(big.toolResult, /truncated/)
    // Reading stopped at the cap: the server could not push its 64 MiB through.
    assert.ok(sent < (64 << 20), `the server sent ${sent} bytes`)
    const drip = await gate.fetchUrl(`http://127.0.0.1:${port}/drip`, { timeoutMs: 500 })
    assert.equal(drip.outcome, 'failed', JSON.stringify(drip))
    assert.match(drip.toolResult, /timed out after 500 ms/)
  } finally {
    s.closeAllConnections()
    s.close()
    cleanup()
  }
})

test('the README tools example runs as shown', async () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
  const m = readme.match(/<!-- tools-example[\s\S]*?```js\n([\s\S]*?)```\s*```text\n([\s\S]*?)```/)
  assert.ok(m, 'no tools example in node/README.md')
  const dir = mkdtempSync(path.join(tmpdir(), 'turngate-readme-'))
  try {
    const file = path.join(dir, 'example.mjs')
    writeFileSync(file, m[1].replace("from 'turngate'", `from '${new URL('../index.mjs', import.meta.url).href}'`))
    const { execFileSync } = await import('node:child_process')
    const out = execFileSync(process.execPath, [file], { encoding: 'utf8' })
    assert.equal(out, m[2])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
