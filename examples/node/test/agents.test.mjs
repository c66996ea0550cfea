// Runs examples/node/ai-agent.mjs and examples/node/openai-agents-agent.mjs (each framework
// driven by its own test model) and checks what each shows: an allowed write, a denied secret
// read, an approved shell command, a kernel-refused escape and the audit timeline. Each also
// runs as a program, as the README says.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const require = createRequire(new URL('../../../node/package.json', import.meta.url))
const { Gate } = require('turngate')
const skip = typeof Gate.prototype.readFile === 'function' ? false : 'this turngate build has no guarded tools (Gate.readFile ...)'

for (const [name, file] of [['ai', '../ai-agent.mjs'], ['@openai/agents', '../openai-agents-agent.mjs']]) {
  test(`the ${name} example agent: allowed write, denied secret, approved shell, kernel-refused escape, timeline`, { skip }, async () => {
    const { main } = await import(file)
    const lines = []
    const r = await main({ log: (l) => lines.push(l) })
    assert.equal(r.notes, '# Notes\n', 'the allowed write landed')
    assert.match(r.outputs['call-2'], /^Permission denied by turngate: file_read/)
    assert.doesNotMatch(JSON.stringify(r.outputs), /sk-do-not-leak/)
    assert.match(r.outputs['call-3'], /^exit code 0/)
    assert.match(r.outputs['call-3'], /hello from the sandbox/)
    assert.match(r.outputs['call-4'], /^exit code [1-9]/, 'the escape ran (approved) and failed')
    assert.match(r.outputs['call-4'], /Read-only file system|Permission denied/, 'the kernel refused it')
    assert.equal(r.escaped, false, 'nothing was written outside the workspace')
    for (const id of ['call-1', 'call-2', 'call-3', 'call-4']) {
      assert.ok(r.events.some((e) => e.item_id === id), `an audit row carries ${id}`)
    }
    assert.ok(r.events.some((e) => e.kind === 'approval_requested' && e.item_id === 'call-3'))
    assert.ok(r.timeline.length >= 4, `the timeline has rows (${r.timeline.length})`)
    assert.ok(lines.some((l) => l.startsWith('audit timeline')))
  })

  test(`the ${name} example runs as a program`, { skip }, () => {
    const out = execFileSync(process.execPath, [fileURLToPath(new URL(file, import.meta.url))], { encoding: 'utf8' })
    assert.match(out, /audit timeline:/)
    assert.match(out, /model: Wrote notes\.md/)
  })
}
