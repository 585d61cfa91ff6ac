// Part of `npm run build`: writes dist/scenarios/index.json, the summaries of the built-in scenarios that
// race list, show, run and help read instead of loading every scenario module (see src/registry.ts).
import { INDEX_FILE, indexState, rebuildIndex } from '../src/registry.js'

const { scenarios, written } = await rebuildIndex()
if (!written) {
  process.stderr.write(`scenario-index: could not write ${INDEX_FILE}\n`)
  process.exit(1)
}
const state = await indexState()
if (!state.fresh) {
  process.stderr.write(`scenario-index: ${INDEX_FILE} is not fresh right after writing it (${state.why})\n`)
  process.exit(1)
}
process.stdout.write(`scenario-index: ${scenarios.length} scenarios in ${INDEX_FILE}\n`)
