// For `NODE_OPTIONS=--import <this file>`: records every module the process resolves (its file: URL, one a line)
// in the file RACE_TEST_LOADED names, so that a test can say which modules a command loaded.
import { register } from 'node:module'

register('./loaded-hook.js', import.meta.url)
