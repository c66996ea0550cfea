// `turngate/ai` (ES module): the same module as the CommonJS entry (ai.js). It loads `zod`,
// never `ai`; the SDK reads schemas through their Standard Schema interface.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const adapter = require('./ai.js')

export const { turngateTools, gatedTool, applyApprovalResponses } = adapter
export default adapter
