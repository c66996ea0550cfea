// `turngate serve`'s approval links and console in a real headless browser: Debian's chromium
// driven by playwright-core (never a downloaded browser), in a phone-sized viewport.
//
// - An approval link opens a page that shows exactly the action; pressing its button (a form
//   POST) approves; the waiting authorize is allowed; a second use of the link is refused.
// - A link opened after its expiry shows "Expired" and the request resolves `expired`.
// - The console at / shows a pending prompt from the shared reducers over the WebSocket and
//   "Allow for turn" resolves it.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path from 'node:path'

import { connect } from '../../../node/client.mjs'
import { freePort, once, serveDir, turngateBin, waitFor } from '../../../node/test/serve-helpers.mjs'

const require = createRequire(new URL('../../../node/package.json', import.meta.url))
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium'
const TTL = 6

async function launch(t) {
  if (!existsSync(CHROMIUM)) assert.fail(`${CHROMIUM} is missing: scripts/test-node installs Debian's chromium`)
  const { chromium } = require('playwright-core')
  const profile = mkdtempSync(path.join(tmpdir(), 'turngate-chromium-'))
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 3,
    isMobile: true,
    hasTouch: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  })
  t.after(async () => {
    await browser.close()
    rmSync(profile, { recursive: true, force: true })
  })
  return browser
}

async function server(t) {
  const d = serveDir()
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const c = await connect({
    command: [turngateBin(), 'serve', '--state-dir', d.state, '--store', d.store, '--http', `127.0.0.1:${port}`,
      '--approval-url', base, '--approval-ttl', String(TTL)],
  })
  t.after(() => {
    c.close()
    rmSync(d.dir, { recursive: true, force: true })
  })
  await waitFor(async () => {
    try { return (await fetch(base + '/')).status === 401 } catch { return false }
  }, 'the HTTP port')
  const { turn_id } = await c.call('turn/start', { profile: { mode: 'supervised' }, workspace: d.workspace })
  return { d, c, base, turn_id }
}

test('an approval link approves on a phone-sized screen, once; an expired link resolves expired', { timeout: 120_000 }, async (t) => {
  const browser = await launch(t)
  const { c, turn_id } = await server(t)
  const page = browser.pages()[0] ?? (await browser.newPage())

  const opened = once(c, 'turn/permission/request/opened')
  const asking = c.call('turn/action/authorize', { turn_id, kind: 'shell_command', target: 'git push origin main', tool: 'bash' })
  const o = await opened
  assert.ok(o.approve_url && o.deny_url, JSON.stringify(o))

  await page.goto(o.approve_url)
  assert.equal(await page.locator('#target').innerText(), 'git push origin main')
  const button = page.locator('#decide')
  assert.equal(await button.innerText(), 'Approve once')
  // It fits the phone: no horizontal scrolling, the button is fully on screen.
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the viewport`)
  const box = await button.boundingBox()
  assert.ok(box && box.x >= 0 && box.x + box.width <= 390, JSON.stringify(box))
  // Loading the page (a GET) approved nothing.
  const { requests } = await c.call('turn/permission/requests/list', { turn_id })
  assert.equal(requests.length, 1)

  const resolved = once(c, 'turn/permission/request/resolved', (p) => p.request_id === o.request.id)
  await button.tap()
  await page.locator('#title', { hasText: 'Done' }).waitFor({ timeout: 10_000 })
  assert.equal((await resolved).resolution, 'allow_once')
  assert.equal((await asking).outcome, 'allowed')

  // The same link again: refused, whether opened or re-posted.
  const again = await page.goto(o.approve_url)
  assert.equal(again.status(), 409)
  assert.equal(await page.locator('#title').innerText(), 'Already resolved')
  const replay = await page.evaluate(async ({ url }) => {
    const u = new URL(url)
    const body = new URLSearchParams({ token: u.searchParams.get('token'), action: 'approve' })
    return (await fetch(u.pathname, { method: 'POST', body })).status
  }, { url: o.approve_url })
  assert.equal(replay, 409)

  // A link opened after its expiry: "Expired", and the request resolved `expired` (a deny).
  const opened2 = once(c, 'turn/permission/request/opened')
  const asking2 = c.call('turn/action/authorize', { turn_id, kind: 'shell_command', target: 'npm publish' })
  const o2 = await opened2
  const expired = once(c, 'turn/permission/request/resolved', (p) => p.request_id === o2.request.id)
  await new Promise((r) => setTimeout(r, (TTL + 1) * 1000))
  const late = await page.goto(o2.approve_url)
  assert.equal(late.status(), 410)
  assert.equal(await page.locator('#title').innerText(), 'Expired')
  assert.equal((await expired).resolution, 'expired')
  assert.equal((await asking2).outcome, 'denied')
})

test('the console at / shows the prompt over the WebSocket and "Allow for turn" resolves it', { timeout: 120_000 }, async (t) => {
  const browser = await launch(t)
  const { d, c, base, turn_id } = await server(t)
  const page = browser.pages()[0] ?? (await browser.newPage())
  await page.goto(`${base}/?access_token=${d.token()}`)
  await page.locator('#status', { hasText: 'connected' }).waitFor({ timeout: 10_000 })

  const asking = c.call('turn/action/authorize', { turn_id, kind: 'file_write', target: 'notes.md', tool: 'write_file' })
  const prompt = page.locator('.prompt')
  await prompt.waitFor({ timeout: 30_000 })
  assert.match(await prompt.innerText(), /write_file wants file_write on .*notes\.md/)
  assert.deepEqual(await prompt.locator('button').allInnerTexts(), ['Allow once', 'Allow for turn', 'Deny'])
  await prompt.locator('button[data-resolution="allow_for_turn"]').tap()
  const auth = await asking
  assert.equal(auth.outcome, 'allowed')
  await page.locator('#no-prompts').waitFor({ timeout: 10_000 })
  await page.locator('.row[data-kind="approval_resolved"]').waitFor({ timeout: 10_000 })
  const again = await c.call('turn/action/authorize', { turn_id, kind: 'file_write', target: 'notes.md', tool: 'write_file' })
  assert.equal(again.cached_approval, true)
  // A target with a right-to-left override is shown with it escaped, not applied.
  await c.call('turn/action/authorize', { turn_id, kind: 'file_write', target: 'evil\u202egpj.md', tool: 'write_file', wait: false })
  const evil = page.locator('.prompt')
  await evil.waitFor({ timeout: 30_000 })
  const text = await evil.innerText()
  assert.ok(text.includes('evil\\u{202e}gpj.md') && !text.includes('\u202e'), text)
  // Without the token the console and its socket are refused.
  assert.equal((await fetch(`${base}/`)).status, 401)
})
