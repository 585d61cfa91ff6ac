// npm run explore:merge -- part1.json part2.json ...: joins the --json of every part of one race explore sample split
// with --shard i/n (the same scenario, --n, --seed, --sample, --depth), or of one --exhaustive search split with
// --shard i/n, into one document, as one run would have printed it (explore/merge.ts mergeShards); exit code as race
// explore's. Bad input: one line, exit 2; parts of another race's text (not only its name), racelab version or server
// version are bad input (explore/one-search.ts).
import fs from 'node:fs'
import { mergeShards } from '../src/explore/merge.js'
import type { ExploreResult } from '../src/explore/result.js'

try {
  const files = process.argv.slice(2)
  if (!files.length) throw new Error('give the --json file of every shard: npm run explore:merge -- a.json b.json')
  const parts = files.map((f) => {
    let text: string
    try {
      text = fs.readFileSync(f, 'utf8')
    } catch {
      throw new Error(`cannot read ${f}`)
    }
    try {
      return JSON.parse(text) as ExploreResult
    } catch {
      throw new Error(`${f} is not the --json of race explore`)
    }
  })
  const merged = mergeShards(parts, files)
  process.stdout.write(JSON.stringify(merged, null, 2) + '\n')
  process.exit(merged.exitCode)
} catch (e) {
  process.stderr.write(`explore-merge: ${(e as Error).message}\n`)
  process.exit(2)
}
