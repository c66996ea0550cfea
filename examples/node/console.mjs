// An approval console: a local HTTP server (Node's own `http`) in front of one agent turn.
//
// The turn runs under a supervised snapshot; its gate asks through a broker. The page shows
// the timeline rows and the pending approval prompts exactly as the shared reducers
// (`turngate.reduce`) project the turn's audit events and the broker's notifications, with
// Allow once / Allow for turn / Deny buttons that answer through `broker.respond`. Nothing here
// decides anything: the gate, the broker and the reducers do.
//
//   node examples/node/console.mjs            # serves http://127.0.0.1:8765
//   POST /api/tool {kind, target, tool?}      # the "agent" makes a tool call through the gate

import http from 'node:http'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const turngate = require('../../node/index.js')

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>turngate approvals</title>
<style>
 body { font: 14px system-ui, sans-serif; margin: 2rem; max-width: 60rem }
 .prompt { border: 1px solid #c80; padding: .6rem; margin: .4rem 0; border-radius: 6px }
 .row { padding: .2rem 0; border-bottom: 1px solid #eee }
 .result { color: #555 }
 button { margin-right: .4rem }
</style></head>
<body>
<h1>Turn <span id="turn"></span></h1>
<h2>Pending approvals</h2><div id="prompts"><p id="no-prompts">None.</p></div>
<h2>Timeline</h2><div id="timeline"></div>
<h2>Tool results</h2><div id="results"></div>
<script>
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c])
const LABELS = { allow_once: 'Allow once', allow_for_turn: 'Allow for turn', deny: 'Deny' }
async function respond(id, resolution) {
  await fetch('/api/respond', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id, resolution }) })
  refresh()
}
async function refresh() {
  const s = await (await fetch('/api/state')).json()
  document.getElementById('turn').textContent = s.turnId
  const prompts = s.state.prompts.map((p) =>
    '<div class="prompt" data-request-id="' + esc(p.id) + '"><b>' + esc(p.tool_name) + '</b> wants <code>' +
    esc(p.action_kind) + '</code> on <code>' + esc(p.details.target ?? '') + '</code> (' + esc(p.reason) + ')<br>' +
    p.allowed_resolutions.filter((r) => LABELS[r]).map((r) =>
      '<button data-resolution="' + r + '" onclick="respond(\\'' + esc(p.id) + '\\', \\'' + r + '\\')">' + LABELS[r] + '</button>').join('') +
    '</div>').join('')
  document.getElementById('prompts').innerHTML = prompts || '<p id="no-prompts">None.</p>'
  document.getElementById('timeline').innerHTML = s.state.timeline.map((r) =>
    '<div class="row" data-kind="' + esc(r.kind) + '">' + esc(r.seq) + '. ' + esc(r.title) + (r.cached_approval_used ? ' (cached approval)' : '') + '</div>').join('')
  document.getElementById('results').innerHTML = s.results.map((r) =>
    '<div class="result" data-outcome="' + esc(r.outcome) + '">' + esc(r.target) + ': ' + esc(r.outcome) + '</div>').join('')
}
refresh()
setInterval(refresh, 250)
</script></body></html>`

/** Starts the console on `port` (0: any free port) over a fresh workspace; resolves to
 * `{ url, server, broker, gate, toolCall, close }`. */
export async function startConsole({ port = 0, host = '127.0.0.1' } = {}) {
  const workspace = realpathSync(mkdtempSync(path.join(tmpdir(), 'turngate-console-')))
  writeFileSync(path.join(workspace, 'notes.md'), '# notes\n')
  const turnId = 'turn-1'
  const snapshot = turngate.resolve(
    { mode: 'supervised', source: 'composer' },
    { workspace_root: workspace, execution_backend: 'native', platform: turngate.probePlatform() },
  )
  const store = await turngate.Store.open(path.join(workspace, 'audit.db'))
  const broker = new turngate.Broker(turngate.Policy.fromObject(snapshot.permission_profile.effective_policy))
  const gate = new turngate.Gate(turnId, snapshot, { store, approver: turngate.Approver.broker(broker), broker })

  // The client core: every audit event and notification, folded by the shared reducers.
  let state = null
  let lastSeq = 0
  const results = []
  const notifications = broker.subscribe()
  const follow = (async () => {
    for await (const n of notifications) state = turngate.reduce(state, { notification: n })
  })()
  async function current() {
    for (const event of await store.replay(turnId)) {
      if (event.seq > lastSeq) {
        state = turngate.reduce(state, { audit_event: event })
        lastSeq = event.seq
      }
    }
    return state ?? turngate.reduceAll([])
  }

  /** The agent's side: one tool call through the gate. */
  async function toolCall(invocation) {
    const a = await gate.authorize(invocation)
    results.push({ target: invocation.target, outcome: a.outcome })
    return a
  }

  const json = (res, code, body) => {
    res.writeHead(code, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  const body = async (req) => {
    let text = ''
    for await (const chunk of req) text += chunk
    return JSON.parse(text || '{}')
  }
  const server = http.createServer(async (req, res) => {
    try {
      if (req.method === 'GET' && req.url === '/') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        res.end(PAGE)
      } else if (req.method === 'GET' && req.url === '/api/state') {
        json(res, 200, { turnId, state: await current(), results })
      } else if (req.method === 'POST' && req.url === '/api/respond') {
        const { id, resolution } = await body(req)
        json(res, 200, broker.respond(id, resolution))
      } else if (req.method === 'POST' && req.url === '/api/tool') {
        toolCall(await body(req)).catch(() => {})
        json(res, 202, { accepted: true })
      } else {
        json(res, 404, { error: 'not found' })
      }
    } catch (e) {
      json(res, e instanceof turngate.TurnGateError ? 400 : 500, { error: e.message, code: e.code })
    }
  })
  await new Promise((resolve) => server.listen(port, host, resolve))
  const { port: bound } = server.address()
  return {
    url: `http://${host}:${bound}/`,
    workspace,
    server,
    broker,
    gate,
    toolCall,
    async close() {
      broker.close()
      await follow
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const c = await startConsole({ port: Number(process.env.PORT ?? 8765) })
  console.log(`approval console on ${c.url} (workspace ${c.workspace})`)
  // A first tool call that asks, so the page has something to approve.
  c.toolCall({ kind: 'file_write', target: 'notes.md', tool: 'write_file' })
}
