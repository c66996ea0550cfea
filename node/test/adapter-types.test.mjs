// The adapters' subpaths: `turngate/ai` and `turngate/openai-agents` load from CommonJS and ES
// modules with the same names, `require('turngate')` loads no framework, and their .d.ts
// type-check a typed use (tsc --strict, test-types/adapters.ts).

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const pkg = fileURLToPath(new URL('..', import.meta.url))
const require = createRequire(import.meta.url)

test('require("turngate") loads no framework', () => {
  const out = execFileSync(process.execPath, ['-e', `
    require(${JSON.stringify(pkg)})
    const loaded = Object.keys(require.cache).filter((f) => /node_modules[\\\\/](ai|@openai|@ai-sdk|zod)[\\\\/]/.test(f))
    process.stdout.write(JSON.stringify(loaded))
  `], { encoding: 'utf8' })
  assert.deepEqual(JSON.parse(out), [])
})

test('turngate/ai and turngate/openai-agents export the same names from require and import', async () => {
  for (const [sub, names] of [['ai', ['applyApprovalResponses', 'gatedTool', 'turngateTools']], ['openai-agents', ['gatedTool', 'reject', 'turngateTools']]]) {
    const cjs = require(`turngate/${sub}`)
    const esm = await import(`turngate/${sub}`)
    assert.deepEqual(Object.keys(cjs).sort(), names, sub)
    assert.deepEqual(Object.keys(esm).filter((n) => n !== 'default').sort(), names, sub)
    for (const n of names) assert.equal(typeof esm[n], 'function', `${sub}.${n}`)
  }
})

test('the adapters\' .d.ts type-check a typed use (tsc --strict, test-types/adapters.ts)', () => {
  const tsc = path.join(pkg, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--types', 'node', path.join(pkg, 'test-types', 'adapters.ts')]
  try {
    execFileSync(process.execPath, [tsc, ...args], { cwd: pkg, encoding: 'utf8' })
  } catch (e) {
    assert.fail(`tsc found type errors:\n${e.stdout}${e.stderr}`)
  }
})

test('the adapters\' public types use no `any`', async () => {
  const { readFileSync } = await import('node:fs')
  for (const f of ['ai.d.ts', 'openai-agents.d.ts']) {
    const text = readFileSync(path.join(pkg, 'adapters', f), 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, '')
    assert.doesNotMatch(text, /\bany\b/, f)
  }
})
