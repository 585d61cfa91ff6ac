// npm run readme: runs every sample's command in every document (README.md, CONTRIBUTING.md, docs/**/*.md) and
// writes its real output into the block under it.
//   npm run readme                      every sample (not the recorded measurements)
//   npm run readme -- --only "race bench"   the samples whose command contains the text
//   npm run readme -- --doc docs/ci.md  the samples of the documents whose path contains the text
//   npm run readme -- --recorded        the recorded measurements too (race bench: minutes; needs DATABASE_URL)
//   npm run readme -- --check           writes nothing; exit 1 when a sample drifted from the real output
// The test test/cli/readme.test.ts does what --check does. See scripts/samples.ts for the marker's options.
import fs from 'node:fs'
import path from 'node:path'
import { SCENARIOS_DOC, scenariosDoc } from './scenarios-doc.js'
import { OPTIONS_DOC, optionsDoc } from './options-doc.js'
import { TEST_MAP_DOC, testMapDoc } from './test-map.js'
import { ROOT, documents, drift, parseSamples, readDoc, render, rewrite, type Sample } from './samples.js'

async function main(): Promise<number> {
  const args = process.argv.slice(2)
  const check = args.includes('--check')
  const recorded = args.includes('--recorded')
  const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined
  const docOnly = args.includes('--doc') ? args[args.indexOf('--doc') + 1] : undefined
  // The scenario reference first: it is generated from the scenario files, not from race's output.
  const reference = await scenariosDoc()
  const referenceDrifted = fs.existsSync(SCENARIOS_DOC) ? fs.readFileSync(SCENARIOS_DOC, 'utf8') !== reference : true
  if (check && referenceDrifted) process.stderr.write('docs/scenarios.md differs from the scenario files\n')
  if (!check) fs.writeFileSync(SCENARIOS_DOC, reference)
  // The options' tables too: generated from their one declaration (scripts/options-doc.ts).
  const options = optionsDoc()
  const optionsDrifted = fs.existsSync(OPTIONS_DOC) ? fs.readFileSync(OPTIONS_DOC, 'utf8') !== options : true
  if (check && optionsDrifted) process.stderr.write('docs/options.md differs from the declared options\n')
  if (!check) fs.writeFileSync(OPTIONS_DOC, options)
  // The map from each src module to the tests that reach it (scripts/test-map.ts): read from the import lines.
  const map = testMapDoc()
  const mapDrifted = fs.existsSync(TEST_MAP_DOC) ? fs.readFileSync(TEST_MAP_DOC, 'utf8') !== map : true
  if (check && mapDrifted) process.stderr.write('docs/dev/test-map.md differs from the import lines\n')
  if (!check) fs.writeFileSync(TEST_MAP_DOC, map)
  let drifted = (check && referenceDrifted ? 1 : 0) + (check && optionsDrifted ? 1 : 0) + (check && mapDrifted ? 1 : 0)
  let total = 0
  let failed = 0
  let written = 0
  for (const doc of documents().filter((d) => (docOnly ? d.includes(docOnly) : true))) {
    const md = readDoc(doc)
    const chosen = parseSamples(md, doc).filter((s) => (only ? s.command.includes(only) : true) && (recorded || only || !('recorded' in s.options)))
    const updates = new Map<Sample, string>()
    for (const s of chosen) {
      total++
      process.stderr.write(`${doc}: ${s.command}${s.options.keys ? ` (keys ${s.options.keys[0]})` : ''}...\n`)
      let text: string
      try {
        text = await render(s)
      } catch (e) {
        // One sample that cannot run here (no PgBouncer, no MariaDB) leaves its block as it is; the rest go on.
        failed++
        process.stderr.write(`  could not run: ${(e as Error).message.split('\n')[0]}\n`)
        continue
      }
      if (check) {
        const o = { unordered: 'unordered' in s.options, anySession: 'any-session' in s.options }
        let d = drift(s.text, text, o)
        // A sample that may legitimately differ from run to run (`tries N`) is run again, up to N times in all.
        for (let i = 1; d && i < Number(s.options.tries?.[0] ?? 1); i++) d = drift(s.text, (text = await render(s)), o)
        if (d) {
          drifted++
          process.stderr.write(`  drifted at ${d}\n`)
        }
      } else updates.set(s, text)
    }
    if (!check && updates.size) {
      fs.writeFileSync(path.join(ROOT, doc), rewrite(md, updates))
      written += updates.size
    }
  }
  process.stderr.write(check ? `${total - drifted - failed} of ${total} samples as race prints them\n` : `wrote ${written} sample(s)\n`)
  if (failed) process.stderr.write(`${failed} sample(s) could not run here, left as they were\n`)
  return drifted || failed ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`readme: ${(e as Error).message}\n`)
    process.exit(2)
  },
)
