// --pooler pgbouncer / --pooled for the commands: the options (pool-options.ts) and the pooled driver, which the
// run service has (run/pooler.ts). The options and their parsing live apart, so that a run without a pooler loads
// none of the driver.
export { addPoolerOptions, parsePool, sizePool, type PoolerOptions } from './pool-options.js'
export { externalPooler, ownPooler, pooledDriver, requirePooler } from '../run/pooler.js'
