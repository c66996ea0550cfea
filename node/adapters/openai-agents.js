'use strict'
// `turngate/openai-agents` (CommonJS): the adapter of agents-tools.js over the CommonJS build
// of `@openai/agents`.
const { tool } = require('@openai/agents')
const { z } = require('zod')

module.exports = require('./agents-tools.js').create(tool, z)
