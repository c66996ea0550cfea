// `turngate/openai-agents` (ES module): the adapter of agents-tools.js over the ES module build
// of `@openai/agents`, so that its tools are the same framework instance as the caller's Agent.
import { createRequire } from 'node:module'
import { tool } from '@openai/agents'
import { z } from 'zod'

const require = createRequire(import.meta.url)
const adapter = require('./agents-tools.js').create(tool, z)

export const { turngateTools, gatedTool, reject } = adapter
export default adapter
