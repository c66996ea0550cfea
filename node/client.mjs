// ESM entry of the `turngate serve` client (see client.js).
import client from './client.js'
export const { connect, RpcError } = client
