// Each option of `race explore` and explore() declared once, as data (the form is run/options.ts's): commander's
// options, explore()'s type and unknown-option check, and docs/options.md's table all come from EXPLORE_OPTIONS.
import {
  CONNECT_TIMEOUT,
  DATABASE_URL,
  JSON_OUT,
  NO_CACHE,
  NO_COLOR,
  oracleOption,
  PARAMS,
  PG,
  RUN_TIMEOUT,
  STEP_TIMEOUT,
  type ApiOptions,
  type Options,
} from '../run/options.js'
import { DEFAULT_DEPTH, DEFAULT_MAX, DEFAULT_SAMPLE, DEFAULT_SHRINK, MAX_JOBS } from './request.js'

const FILES = 'a file the command writes; explore() resolves to the result'
const CI = 'for CI; a test runner reports the result itself'

/** race explore's own options, in the order its help lists them (the scenario's flags, then the target's, follow). */
export const EXPLORE_OWN = [
  { flag: '--n <n>', name: 'n', kind: 'whole', help: 'number of sessions; default per scenario, usually 2', defaultNote: "the scenario's (an application race: 2)" },
  { flag: '--exhaustive', name: 'exhaustive', kind: 'switch', help: 'run every order of the steps (the exact enumeration), whatever --max says; default: the reduced search' },
  { flag: '--reduce', name: 'reduce', kind: 'switch', help: "application races in one process (the race module's sharedState, a race object): the reduced search (their default: every interleaving). It assumes the sessions share no state outside the database (a module-level variable, an in-process cache or lock); a race module loaded from its file runs each session in a worker of its own and is reduced by default" },
  { flag: '--max <count>', name: 'max', kind: 'whole', min: 1, max: Number.MAX_SAFE_INTEGER, help: "a reduced search of declared steps past this many runs (orders left) is followed by a seeded random sample; an application race's search stops after this many runs", default: String(DEFAULT_MAX) },
  { flag: '--sample <k>', name: 'sample', kind: 'whole', min: 1, max: 1_000_000, help: `run K random interleavings instead of searching (default ${DEFAULT_SAMPLE} after a reduced search past --max)` },
  { flag: '--accept-sample <p>', name: 'acceptSample', kind: 'probability', help: 'expect held: a sample that found no violation passes (exit 0) when it states a probability of at least P (0 < P < 1) of finding one of its --depth; without it a sample, like a search --max cut short, is not known to hold (exit 3)' },
  { flag: '--seed <s>', name: 'seed', kind: 'whole', min: 0, max: 2 ** 32 - 1, help: "the sample's seed (default a random one, printed: the same seed draws the same sample)" },
  { flag: '--preemptions <k>', name: 'preemptions', kind: 'whole', min: 0, max: 1000, help: 'run every order with at most K preemptions (leaving a session that could go on), fewest first, instead of the reduced search' },
  { flag: '--shard <i/n>', name: 'shard', kind: 'shard', help: "run part i of n of the reduced search, of a sample (--sample K; the same --seed in every part) or of an --exhaustive search: mergeShards, or npm run explore:merge, joins the parts' --json (a part of the reduced search runs on one job)" },
  { flag: '--jobs <n>', name: 'jobs', kind: 'whole', min: 1, max: MAX_JOBS, help: "runs at once, each in its own schema with its own connections (default the machine's cores); the reduced search's other jobs run ahead of it and it takes their runs in its own order (the --jobs 1 result, the runs not needed said); --preemptions and application races run on one, but for the reduced search of sessions isolated in workers (the default)", defaultNote: "the machine's cores" },
  { flag: '--depth <d>', name: 'depth', kind: 'whole', min: 1, max: 10, help: "a sample's PCT depth: the report states the least probability that a violation needing d steps in a given order would have been found (default 3: at most 2 preemptions)", defaultNote: String(DEFAULT_DEPTH) },
  { flag: '--shrink <runs>', name: 'shrink', kind: 'whole', min: 0, max: 100_000, help: 'runs spent at most on shrinking a sampled violation to a minimal one (0: none)', default: String(DEFAULT_SHRINK) },
  { flag: '--expect <held|violated>', name: 'expect', kind: 'choice', choices: ['held', 'violated'], help: "held: exit 1 when any interleaving violates; violated: exit 1 when none does (default: the spec's expect line, or the scenario's documentation)" },
  { flag: '--all', name: 'all', kind: 'switch', help: 'list every interleaving of each group (default: the first 3, fewest switches first)', cliOnly: "explore()'s result holds every interleaving (every)" },
  { flag: '--save <file>', name: 'save', kind: 'text', help: 'write the shortest violating interleaving (else the shortest failure) as a counterexample file (race replay runs it again; docs/counterexamples.md)', cliOnly: FILES },
  { flag: '--inject <faults>', name: 'inject', kind: 'text', help: 'application races: also explore the server failing a query, e.g. 40001@commit,40P01@2,lost@3 (each at most once per interleaving)', cliOnly: 'not in explore() yet' },
  { flag: '--html <file>', name: 'html', kind: 'text', help: 'also write the search as one self-contained HTML page: the outcome groups, the shortest violating interleaving as lanes, its replay', cliOnly: FILES },
  { flag: '--junit <file>', name: 'junit', kind: 'text', help: 'also write a JUnit XML file: one testcase, a <failure> when the search deviates', cliOnly: CI },
  { flag: '--github', name: 'github', kind: 'switch', help: 'print a GitHub Actions ::error annotation (on the race file) when the search deviates or is undecided', cliOnly: CI },
  oracleOption('interleaving'),
] as const satisfies Options

/** Every option of race explore and explore(), in help order (the scenario's own flags go between EXPLORE_OWN and these). */
export const EXPLORE_OPTIONS = [
  ...EXPLORE_OWN,
  PARAMS,
  DATABASE_URL,
  // explore() named its bounds connectTimeoutMs...: those names still work (deprecated), in milliseconds.
  { ...CONNECT_TIMEOUT, alias: 'connectTimeoutMs' },
  { ...STEP_TIMEOUT, alias: 'stepTimeoutMs' },
  { ...RUN_TIMEOUT, alias: 'runTimeoutMs' },
  NO_CACHE,
  PG,
  JSON_OUT,
  NO_COLOR,
  { name: 'name', kind: 'text', help: 'how the replay command in the result names the scenario; default its id, or its file', apiOnly: 'the command line names it as typed' },
  { name: 'onProgress', kind: 'progress', help: 'called after each run: runs so far (shrinking too), different violating interleavings, the runs planned (exactly: a sample; at most: a search; null while shrinking)', apiOnly: 'the command draws a progress line' },
] as const satisfies Options

/** explore()'s options, as declared. */
export type ExploreApiOptions = ApiOptions<typeof EXPLORE_OPTIONS>
