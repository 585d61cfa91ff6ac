// Where race's own files lie: SRC is the folder of its compiled modules (dist/src/), whether race runs as those
// modules or as the CLI's one file (dist/src/cli.bundle.cjs, see src/start.ts), which lies in the same folder.
import fs from 'node:fs'

export const SRC = new URL('./', import.meta.url)

/** racelab's version: package.json's, read as a file (no CommonJS loader for one field). */
export function racelabVersion(): string {
  return (JSON.parse(fs.readFileSync(new URL('../../package.json', SRC), 'utf8')) as { version: string }).version
}
