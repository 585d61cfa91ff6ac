// The documents' samples are race's real output: in README.md, CONTRIBUTING.md and every markdown file under
// docs/ (documents()). A sample is a marker naming the command, then a fenced block:
//
//   <!-- sample: race run broken --timeline --schedule lockstep -->
//   ```text
//   (the output, written by `npm run readme`)
//   ```
//
// Options follow the command after ` | `, each `name value`:
//   columns N        the terminal width (default 80)
//   prompt [npx]     the block starts with `$ ./bin/race ...` (the checkout's), or `$ npx race ...` (a project's)
//   head N / tail N  only the first / last N lines (a `...` line between, when both)
//   exit N           the exit code the command must end with (default 0)
//   env K=V          an environment variable (several allowed)
//   file F           show the file F the command wrote (in its working directory) instead of its stdout
//   stderr           show what the command printed on stderr instead of its stdout
//   keys K K ...     run it in a terminal (tmux), press these keys (Enter, Space, b), show the screen
//   while C          first start race command C in the background, until it prints `race locks --database-url
//                    '<url>'`; $URL in the sample's command is that URL
//   unordered        the order of table rows and timeline rows is not compared (which session's event comes
//                    first is the race's: a barrier, or two sessions woken by one deadlock check)
//   any-session      which session ended how is not compared (session names become sN): barrier runs
//   tries N          compared up to N times: a run through a pooler may or may not see an autocommit step
//                    on its backend (PgBouncer lends it a server connection only while it runs)
//   server           run against DATABASE_URL (else the embedded default); written as it ran
//   checkout         run in the checkout (for a command that names its files: examples/orders.spec), not in an
//                    empty folder
//   recorded         a measurement (race bench): not re-run by `npm run readme` unless --recorded; the test
//                    checks its format against `check C`, a quick run of the same shape
//   check C          for a recorded sample: the quick command whose table headers must match
//
// Another branch adds a sample by writing the marker and an empty block, then `npm run readme -- --only <text>`.
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const BIN = path.join(ROOT, 'bin', 'race')

export interface Sample {
  /** The document it is in, relative to the checkout (README.md, docs/ci.md). */
  doc: string
  /** The command as written, starting with `race`. */
  command: string
  options: Record<string, string[]>
  /** The block's fence language and its current text. */
  lang: string
  text: string
  /** Where the block's text starts and ends in the README. */
  start: number
  end: number
}

const MARKER = /<!-- sample: ([^\n]*?) -->\n```([a-z]*)\n([\s\S]*?)```/g

export function parseSamples(md: string, doc = 'README.md'): Sample[] {
  const out: Sample[] = []
  // A marker shown as an example, inside a ```` fence, is not a sample (blanked out, same length).
  const seen = md.replace(/````[\s\S]*?````/g, (m) => m.replace(/[^\n]/g, ' '))
  for (const m of seen.matchAll(MARKER)) {
    const [head, ...opts] = m[1].split(' | ')
    const options: Record<string, string[]> = {}
    for (const o of opts) {
      const [name, ...rest] = o.trim().split(' ')
      options[name] = [...(options[name] ?? []), rest.join(' ')]
    }
    const command = head.trim().replace(/^npx /, '')
    if (!command.startsWith('race')) throw new Error(`a sample's command starts with race: ${head}`)
    const start = m.index! + m[0].length - m[3].length - 3
    out.push({ doc, command, options, lang: m[2], text: md.slice(start, start + m[3].length), start, end: start + m[3].length })
  }
  return out
}

/** Splits a command line like a shell would (single and double quotes), without a shell. */
export function argv(line: string): string[] {
  const out: string[] = []
  let cur = ''
  let quote: string | null = null
  let any = false
  for (const ch of line) {
    if (quote) {
      if (ch === quote) quote = null
      else cur += ch
    } else if (ch === '"' || ch === "'") {
      quote = ch
      any = true
    } else if (ch === ' ') {
      if (cur || any) out.push(cur)
      cur = ''
      any = false
    } else cur += ch
  }
  if (cur || any) out.push(cur)
  return out
}

const opt = (s: Sample, name: string) => s.options[name]?.[0]

function env(s: Sample, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // The documents run ./bin/race (race then suggests `race ...`); `prompt npx` runs as npx does, which sets
  // npm_command=exec (race then suggests `npx race ...`).
  const e: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', COLUMNS: opt(s, 'columns') ?? '80' }
  delete e.npm_command
  if (opt(s, 'prompt') === 'npx') e.npm_command = 'exec'
  for (const k of ['PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD', 'GITHUB_ACTIONS', 'FORCE_COLOR']) delete e[k]
  if (!('server' in s.options)) delete e.DATABASE_URL
  else if (!e.DATABASE_URL) throw new Error(`${s.command}: this sample runs against a server: set DATABASE_URL`)
  for (const kv of s.options.env ?? []) {
    const at = kv.indexOf('=')
    e[kv.slice(0, at)] = kv.slice(at + 1)
  }
  return { ...e, ...extra }
}

function runRace(args: string[], e: NodeJS.ProcessEnv, cwd: string, timeoutMs = 300_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: e, cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** Runs a sample's command the way the README says, and returns the block's new text. */
export async function render(s: Sample): Promise<string> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'race-sample-'))
  const cwd = 'checkout' in s.options ? ROOT : scratch
  let background: ReturnType<typeof spawn> | undefined
  try {
    let command = s.command
    if (opt(s, 'while')) {
      const bg = argv(opt(s, 'while')!).slice(1)
      background = spawn(process.execPath, [BIN, ...bg], { env: env(s), cwd, stdio: ['ignore', 'ignore', 'pipe'] })
      let err = ''
      background.stderr!.on('data', (d) => (err += d))
      const t0 = Date.now()
      while (!/race locks --database-url '([^']+)'/.test(err)) {
        // (the URL of the embedded server race started, printed by --hold)
        if (Date.now() - t0 > 60_000 || background.exitCode !== null) throw new Error(`${opt(s, 'while')} never printed its URL: ${err}`)
        await sleep(50)
      }
      command = command.replace('$URL', /race locks --database-url '([^']+)'/.exec(err)![1])
    }
    const args = argv(command).slice(1)
    let out: string
    if (s.options.keys) {
      out = await inTerminal(args, s, scratch)
    } else {
      const r = await runRace(args, env(s), cwd)
      const want = Number(opt(s, 'exit') ?? 0)
      if (r.code !== want) throw new Error(`${s.command} exited ${r.code}, the sample says ${want}: ${r.stderr}${r.stdout.split('\n').filter((l) => /DEVIATION|differs|could not/.test(l)).slice(0, 8).join('\n')}`)
      out = opt(s, 'file') ? fs.readFileSync(path.join(cwd, opt(s, 'file')!), 'utf8') : 'stderr' in s.options ? r.stderr : r.stdout
    }
    let lines = out.replace(/\s+$/, '').split('\n').map((l) => l.trimEnd())
    const head = Number(opt(s, 'head') ?? 0)
    const tail = Number(opt(s, 'tail') ?? 0)
    if ((head || tail) && lines.length > head + tail) lines = [...lines.slice(0, head), ...(head && tail ? ['...'] : []), ...(tail ? lines.slice(-tail) : [])]
    // A URL printed by the embedded server carries its throwaway password: shown masked, like race masks others.
    lines = lines.map((l) => l.replace(/(postgres:\/\/[^:/@\s]+:)[^@\s]+@/g, '$1...@'))
    // The prompt line: `./bin/race ...` as the checkout runs it (the documents' convention), or `npx race ...` (`prompt npx`).
    if ('prompt' in s.options) lines.unshift(`$ ${opt(s, 'prompt') === 'npx' ? 'npx ' : './bin/'}${s.command.replace(/\$URL/, "'postgres://...'")}`)
    return lines.join('\n') + '\n'
  } finally {
    background?.kill('SIGINT')
    if (background && background.exitCode === null) await new Promise((r) => background!.on('close', r))
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

/** Runs race in a tmux pane (its own server), presses the keys, waiting for the screen to change after each. */
async function inTerminal(args: string[], s: Sample, scratch: string): Promise<string> {
  const socket = `race-readme-${process.pid}`
  const script = path.join(scratch, 'run.sh')
  const q = (x: string) => `'${x.replace(/'/g, `'\\''`)}'`
  const e = env(s)
  const keep = ['NO_COLOR', 'DATABASE_URL', 'PATH', 'HOME', 'TMPDIR']
  // tmux hands its own environment to the pane: what the sample does not want is unset there.
  const unset = 'unset DATABASE_URL PGHOST PGDATABASE PGUSER PGPORT PGPASSWORD GITHUB_ACTIONS FORCE_COLOR'
  fs.writeFileSync(script, [unset, ...keep.filter((k) => e[k]).map((k) => `export ${k}=${q(e[k]!)}`), `export COLUMNS=${q(e.COLUMNS!)}`, `${q(process.execPath)} ${q(BIN)} ${args.map(q).join(' ')}`, 'exec sleep 600'].join('\n'))
  const tmux = (...a: string[]) => execFileSync('tmux', ['-L', socket, ...a], { encoding: 'utf8' })
  const width = opt(s, 'columns') ?? '80'
  tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'race', '-x', width, '-y', '40', 'sh', script)
  const screen = () => tmux('capture-pane', '-p', '-t', 'race').replace(/\s+$/, '')
  const until = async (re: RegExp) => {
    const t0 = Date.now()
    while (!re.test(screen())) {
      if (Date.now() - t0 > 60_000) throw new Error(`${s.command}: the terminal never showed ${re}:\n${screen()}`)
      await sleep(50)
    }
  }
  try {
    await until(/next {2}step 1 of/)
    let step = 1
    for (const k of s.options.keys[0].split(' ')) {
      tmux('send-keys', '-t', 'race', k)
      if (k === 'Enter' || k === 'Space') await until(new RegExp(`next {2}step ${++step} of`))
      else await sleep(300)
    }
    return screen()
  } finally {
    tmux('kill-server')
  }
}

// ---------- comparing a sample with a fresh run ----------

/** What legitimately varies between two runs: pids, timings, versions, ports, keys, names with random parts. */
export function normalize(text: string, o: { unordered?: boolean; anySession?: boolean } = {}): string[] {
  let lines = text
    .replace(/^\$ (npx race|\.\/bin\/race)\b.*\n/, '')
    .split('\n')
    .map((l) =>
      l
        .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?/g, '<time>')
        .replace(/\b\d\d:\d\d:\d\d\b/g, '<time>')
        .replace(/postgres:\/\/\S+/g, '<url>')
        .replace(/race_[a-z0-9_-]+_[0-9a-f]{6,}/g, '<schema>')
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
        .replace(/PostgreSQL \d+(\.\d+)?/g, 'PostgreSQL <v>')
        .replace(/PgBouncer \d+(\.\d+)*/g, 'PgBouncer <v>')
        .replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:<port>')
        // Through a pooler: the backend a timeline row's step ran on, and the backends lines (`4711: begin, ...`,
        // `4711, the one s1 used: ...`)
        .replace(/^(\d+\.\d+ .*?)\b\d{3,7} (?=\S)/, '$1<pid> ')
        .replace(/\b\d{3,7}(?=:|, the one )/g, '<pid>')
        .replace(/│ \d{3,7}(, \d{3,7})+ +│/g, '│ <pid> │')
        .replace(/hostname="[^"]*"/g, 'hostname="<host>"')
        .replace(/time="[\d.]+"/g, 'time="<s>"')
        .replace(/-?\d{8,}/g, '<n>')
        .replace(/\b(pids?|backends?|for) \d{3,7}(, \d{3,7})*/g, '$1 <pids>')
        // a rate (race explore: "2.7 interleavings per second")
        .replace(/\b[\d.,]+ (interleavings|trials|runs) per second\b/g, '<rate> $1 per second')
        // race explore's jobs (--jobs: default the machine's cores)
        .replace(/\b\d+ jobs?(: [^)]* runs on one)?(?=\))/g, '<n> jobs')
        .replace(/\b\d+ jobs?\b/g, '<n> jobs')
        // the runs the reduced search made ahead on other jobs: how many depends on which job's run ends first
        .replace(/: \d+ runs made, (none wasted|\d+ of them ahead of the one-job search and not needed)(?=\))/g, ': <made>')
        .replace(/\b\d+(\.\d+)? ?(ms|s)\b/g, '<t>')
        .replace(/^\d+\.\d+ /, '<t> ')
        // pids in a table's pid column, and lists of pids ("waiting for 1234, 1235")
        .replace(/│ \d{3,7} +│/g, '│ <pid> │')
        // a cut (…) falls where the column ends, which moves with the digits of a pid
        .replace(/\S*…/g, '…')
        .replace(/ {2,}/g, ' ')
        .replace(/─+/g, '─')
        .replace(/ +$/, ''),
    )
  lines = unwrap(lines)
  if (o.anySession) lines = lines.map((l) => l.replace(/\bs\d+\b/g, 'sN'))
  if (o.unordered) {
    // Sort each run of table rows, and the timeline's rows (from its header rule to the next empty line): which
    // session's row comes first is the race's.
    const out: string[] = []
    let run: string[] = []
    let inTimeline = false
    for (const l of [...lines, '']) {
      if (l === '─') inTimeline = true
      else if (l === '') inTimeline = false
      if ((l.startsWith('│') || (inTimeline && l !== '─')) && l !== '') run.push(l)
      else {
        // A step's own "started" row shows only when another session's event came before its result: with the
        // order not compared, neither is that row.
        const done = new Set(run.map((r) => /^<t> (\S+) → /.exec(r)?.[1]).filter(Boolean))
        out.push(...run.filter((r) => !(/^<t> \S+$/.test(r) && done.has(r.slice(4)))).sort(), l)
        run = []
      }
    }
    lines = out.slice(0, -1)
  }
  return lines
}

/**
 * Where a line breaks moves with the width of a pid or a timing, so the comparison is of logical lines: a line
 * that starts with a space continues the one before it, and a table row whose first cell is empty continues the
 * row above it, cell by cell.
 */
function unwrap(lines: string[]): string[] {
  const out: string[] = []
  for (const l of lines) {
    const prev = out[out.length - 1]
    if (l.startsWith('│') && prev?.startsWith('│')) {
      const cells = l.split('│').slice(1, -1)
      const above = prev.split('│').slice(1, -1)
      if (cells.length > 1 && cells.length === above.length && cells[0].trim() === '') {
        out[out.length - 1] = '│' + above.map((a, i) => ` ${`${a.trim()} ${cells[i].trim()}`.trim()} `).join('│') + '│'
        continue
      }
    }
    if (l.startsWith(' ') && prev !== undefined && prev !== '' && !prev.startsWith('│') && !prev.startsWith('┌')) {
      out[out.length - 1] = `${prev} ${l.trim()}`
      continue
    }
    out.push(l)
  }
  return out.map((l) => l.replace(/ {2,}/g, ' '))
}

/** The first line where two normalised texts differ, or '' when they agree. */
export function drift(sample: string, fresh: string, o: { unordered?: boolean; anySession?: boolean } = {}): string {
  const a = normalize(sample, o)
  const b = normalize(fresh, o)
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return `line ${i + 1}:\n  README: ${a[i] ?? '(nothing)'}\n  race:   ${b[i] ?? '(nothing)'}`
  }
  return ''
}

/** The header rows of every table in a text (what a recorded sample's format is checked by). */
export function tableHeads(text: string): string[] {
  const lines = text.split('\n')
  return lines.filter((_, i) => i > 0 && lines[i - 1].startsWith('┌')).map((l) => l.replace(/ +/g, ' ').trim())
}

export function readme(): string {
  return fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
}

/** Every document whose samples are race's output: README.md, CONTRIBUTING.md, and every .md under docs/, relative to the checkout. */
export function documents(): string[] {
  const out = ['README.md']
  if (fs.existsSync(path.join(ROOT, 'CONTRIBUTING.md'))) out.push('CONTRIBUTING.md')
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(ROOT, rel), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.isDirectory()) walk(`${rel}/${e.name}`)
      else if (e.name.endsWith('.md')) out.push(`${rel}/${e.name}`)
    }
  }
  if (fs.existsSync(path.join(ROOT, 'docs'))) walk('docs')
  return out
}

export function readDoc(doc: string): string {
  return fs.readFileSync(path.join(ROOT, doc), 'utf8')
}

/** Every sample of every document, in document order. */
export function allSamples(): Sample[] {
  return documents().flatMap((d) => parseSamples(readDoc(d), d))
}

/** Writes new texts for some samples into the README (the rest untouched). */
export function rewrite(md: string, updates: Map<Sample, string>): string {
  let out = md
  for (const s of [...updates.keys()].sort((a, b) => b.start - a.start)) out = out.slice(0, s.start) + updates.get(s)! + out.slice(s.end)
  return out
}
