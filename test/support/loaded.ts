// For `NODE_OPTIONS=--import <this file>`: records every module the process resolves (its file: URL, one a line)
// in the file RACE_TEST_LOADED names, so that a test can say which modules a command loaded. What the bundle
// (dist/src/cli.bundle.cjs) requires at run time (a driver such as mariadb) goes through require, which no module
// hook sees: the CommonJS modules the process holds when it exits are recorded too.
import fs from 'node:fs'
import { createRequire, register } from 'node:module'
import { pathToFileURL } from 'node:url'

register('./loaded-hook.js', import.meta.url)

process.once('exit', () => {
  const log = process.env.RACE_TEST_LOADED
  if (!log) return
  const cache = createRequire(import.meta.url).cache
  const files = Object.keys(cache).filter((f) => f.startsWith('/'))
  if (files.length) fs.appendFileSync(log, files.map((f) => pathToFileURL(f).href).join('\n') + '\n')
})
