// npm run readme: runs every sample's command in README.md and writes its real output into the block under it.
//   npm run readme                      every sample (not the recorded measurements)
//   npm run readme -- --only "race bench"   the samples whose command contains the text
//   npm run readme -- --recorded        the recorded measurements too (race bench: minutes; needs DATABASE_URL)
//   npm run readme -- --check           writes nothing; exit 1 when a sample drifted from the real output
// The test test/cli/readme.test.ts does what --check does. See scripts/samples.ts for the marker's options.
import fs from 'node:fs'
import path from 'node:path'
import { ROOT, drift, parseSamples, readme, render, rewrite, type Sample } from './samples.js'

async function main(): Promise<number> {
  const args = process.argv.slice(2)
  const check = args.includes('--check')
  const recorded = args.includes('--recorded')
  const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined
  const md = readme()
  const chosen = parseSamples(md).filter((s) => (only ? s.command.includes(only) : true) && (recorded || only || !('recorded' in s.options)))
  const updates = new Map<Sample, string>()
  let drifted = 0
  for (const s of chosen) {
    process.stderr.write(`${s.command}${s.options.keys ? ` (keys ${s.options.keys[0]})` : ''}...\n`)
    let text = await render(s)
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
  if (!check) fs.writeFileSync(path.join(ROOT, 'README.md'), rewrite(md, updates))
  process.stderr.write(check ? `${chosen.length - drifted} of ${chosen.length} samples as race prints them\n` : `wrote ${updates.size} sample(s) into README.md\n`)
  return drifted ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`readme: ${(e as Error).message}\n`)
    process.exit(2)
  },
)
