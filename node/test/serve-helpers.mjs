// Shared by the tests that drive a real `turngate serve`: where the CLI binary is, and a
// server on a temporary state dir.
import { existsSync, mkdtempSync, mkdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import net from 'node:net'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

/** The `turngate` CLI (scripts/test-node builds it): TURNGATE_BIN, else the cargo target dir. */
export function turngateBin() {
  const candidates = [
    process.env.TURNGATE_BIN,
    process.env.CARGO_TARGET_DIR && path.join(process.env.CARGO_TARGET_DIR, 'debug/turngate'),
    path.join(root, 'target/debug/turngate'),
  ].filter(Boolean)
  const found = candidates.find((p) => existsSync(p))
  if (!found) throw new Error(`no turngate binary (tried ${candidates.join(', ')}): cargo build -p turngate-cli`)
  return found
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** A fresh dir with a workspace, a state dir, a store and a socket path. */
export function serveDir() {
  const dir = mkdtempSync(path.join(tmpdir(), 'turngate-serve-'))
  const workspace = path.join(dir, 'ws')
  mkdirSync(workspace)
  return {
    dir,
    workspace,
    state: path.join(dir, 'state'),
    store: path.join(dir, 'audit.db'),
    socket: path.join(dir, 'serve.sock'),
    token: () => readFileSync(path.join(dir, 'state/token'), 'utf8').trim(),
  }
}

export async function waitFor(check, what, ms = 20_000) {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await check()) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`timed out waiting for ${what}`)
}

export function once(client, method, pred = () => true) {
  return new Promise((resolve) => {
    const f = (params) => {
      if (pred(params)) {
        client.off(method, f)
        resolve(params)
      }
    }
    client.on(method, f)
  })
}
