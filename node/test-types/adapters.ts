// Type-checked by test/adapter-types.test.mjs (tsc --strict): typed use of `turngate/ai` and
// `turngate/openai-agents` as a TypeScript user writes it. Never run.
import { generateText, tool as aiTool, type ModelMessage, type ToolSet } from 'ai'
import { MockLanguageModelV4 } from 'ai/test'
import { Agent, run, tool as agentsTool, type FunctionTool } from '@openai/agents'
import { z } from 'zod'
import { Approver, Gate, Store, Turn, resolve, probePlatform } from 'turngate'
import { turngateTools, gatedTool, applyApprovalResponses, type GuardedTools } from 'turngate/ai'
import * as agents from 'turngate/openai-agents'

async function main() {
  const snapshot = resolve({ mode: 'auto_accept_edits' }, { workspace_root: '/w', execution_backend: 'native', platform: probePlatform() })
  const store = await Store.open('audit.db')
  const gate = new Gate('t', snapshot, { store, approver: Approver.deferAll() })
  const oneLine = await Turn.create('/w', { store, approver: 'defer_all' })
  turngateTools(oneLine, { store }).run_shell.description

  // turngate/ai
  const tools: GuardedTools = turngateTools(gate, { store, maxBytes: 4096, shell: { timeoutMs: 1000 } })
  const some = turngateTools(gate, { tools: ['read_file', 'run_shell'] })
  some.read_file.description
  // @ts-expect-error: only the tools asked for
  some.write_file
  // @ts-expect-error: not a guarded tool
  turngateTools(gate, { tools: ['rm_rf'] })
  const deploy = gatedTool(gate, aiTool({ description: 'deploy', inputSchema: z.object({ env: z.string(), force: z.boolean() }), execute: async ({ env }) => ({ deployed: env }) }), { kind: 'shell_command', target: ({ env }) => `deploy ${env}` })
  const save = gatedTool(gate, aiTool({ description: 'save', inputSchema: z.object({ path: z.string(), text: z.string() }), execute: async ({ path }) => path.length }), { kind: 'file_write', arg: 'path' })
  // @ts-expect-error: arg must name a string property of the input
  gatedTool(gate, aiTool({ description: 'x', inputSchema: z.object({ n: z.number() }), execute: async ({ n }) => n }), { kind: 'file_write', arg: 'n' })
  // @ts-expect-error: not an action kind
  gatedTool(gate, aiTool({ description: 'x', inputSchema: z.object({ p: z.string() }), execute: async ({ p }) => p }), { kind: 'file_writ', arg: 'p' })
  const all: ToolSet = { ...tools, deploy, save }
  const model = new MockLanguageModelV4()
  let messages: ModelMessage[] = [{ role: 'user', content: 'go' }]
  const result = await generateText({ model, tools: all, messages })
  messages = await applyApprovalResponses(gate, [...messages, ...result.responseMessages], { store })

  // turngate/openai-agents
  const guarded: agents.GuardedTool[] = agents.turngateTools(gate, { store })
  const lookup = agents.gatedTool(gate, { name: 'lookup', description: 'look up a host', parameters: z.object({ host: z.string() }), execute: async ({ host }) => host.toUpperCase(), gate: { kind: 'network', arg: 'host' } })
  // @ts-expect-error: a gated tool's name is required
  agents.gatedTool(gate, { description: 'x', parameters: z.object({ host: z.string() }), execute: async () => 'x', gate: { kind: 'network', arg: 'host' } })
  // @ts-expect-error: the gate decides approval
  agents.gatedTool(gate, { name: 'x', description: 'x', parameters: z.object({ host: z.string() }), execute: async () => 'x', needsApproval: true, gate: { kind: 'network', arg: 'host' } })
  const agent = new Agent({ name: 'a', instructions: 'x', tools: [...guarded, lookup] })
  const first = await run(agent, 'go')
  for (const item of first.interruptions) {
    const text: string = await agents.reject(gate, first.state, item, { message: 'no' })
    first.state.approve(item)
    text.length
  }
  return [messages, agent, agentsTool]
}
main()
