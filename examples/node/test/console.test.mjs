// The approval console in a real headless browser: Debian's chromium driven by playwright-core
// (never a downloaded browser). A tool call asks; the page shows the pending prompt from the
// shared reducers; clicking "Allow for turn" resolves it through the broker; the gate's call
// completes, the page clears the prompt and shows the timeline rows, and the next matching call
// uses the cached grant.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'

import { startConsole } from '../console.mjs'

// playwright-core is a dev dependency of the node/ package.
const require = createRequire(new URL('../../../node/package.json', import.meta.url))
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'

test('clicking "Allow for turn" in headless Chromium resolves the pending approval', { timeout: 120_000 }, async (t) => {
  if (!existsSync(CHROMIUM)) {
    assert.fail(`${CHROMIUM} is missing: scripts/test-node installs Debian's chromium`)
  }
  const { chromium } = require('playwright-core')
  const c = await startConsole()
  const profile = mkdtempSync(path.join(tmpdir(), 'turngate-chromium-'))
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  t.after(async () => {
    await browser.close()
    await c.close()
    rmSync(profile, { recursive: true, force: true })
    rmSync(c.workspace, { recursive: true, force: true })
  })

  const call = c.toolCall({ kind: 'file_write', target: 'notes.md', tool: 'write_file' })
  const page = browser.pages()[0] ?? (await browser.newPage())
  await page.goto(c.url)

  const prompt = page.locator('.prompt')
  await prompt.waitFor({ timeout: 30_000 })
  assert.match(await prompt.innerText(), /write_file wants file_write on .*notes\.md/)
  const labels = await prompt.locator('button').allInnerTexts()
  assert.deepEqual(labels, ['Allow once', 'Allow for turn', 'Deny'])
  await prompt.locator('button[data-resolution="allow_for_turn"]').click()

  const auth = await call
  assert.equal(auth.outcome, 'allowed')
  assert.equal(auth.cachedApproval, false)
  await page.locator('#no-prompts').waitFor({ timeout: 10_000 })
  await page.locator('.result[data-outcome="allowed"]').waitFor({ timeout: 10_000 })
  await page.locator('.row[data-kind="approval_resolved"]').waitFor({ timeout: 10_000 })
  const kinds = await page.locator('.row').evaluateAll((rows) => rows.map((r) => r.dataset.kind))
  assert.ok(kinds.includes('approval_requested'), kinds.join(','))
  assert.equal(c.broker.pendingRequests().length, 0)

  // The grant covers the same scope for the rest of the turn, without a prompt.
  const again = await c.toolCall({ kind: 'file_write', target: 'notes.md', tool: 'write_file' })
  assert.equal(again.outcome, 'allowed')
  assert.equal(again.cachedApproval, true)
})
