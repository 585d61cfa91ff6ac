// The spec file format: PostgreSQL's isolation-test format (the grammar of src/test/isolation as of
// PostgreSQL 14-18: setup blocks, one teardown, sessions with setup/steps/teardown, permutation lines whose
// steps may carry blocker markers `(*)`, `(other)`, `(other notices N)`), plus race's three lines:
// `invariant "description" { sql }`, `expect held|violated`, `prevented by SQLSTATE, ...` (the errors by which
// the server keeps the invariant, docs/verdicts.md), and `session NAME*` (a template that --n replicates).
// Pure: text in, a Spec out, or a SpecError naming file:line:column and what was expected.
//
// Text is handled as bytes (latin1 strings hold one byte per character), so SQL reaches the server and the
// transcript exactly as written, whatever its encoding.
import { UsageError } from '../errors.js'

/** Bad spec file: `file:line:column: what was expected`, exit 2. */
export class SpecError extends UsageError {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly column: number,
    readonly what: string,
  ) {
    super(`${file}:${line}:${column}: ${what}`)
  }
}

export interface Pos {
  line: number
  column: number
}

export interface SpecStep {
  name: string
  sql: string
  /** Index of its session in Spec.sessions. */
  session: number
  pos: Pos
}

export interface SpecSession {
  name: string
  /** `session s*`: a template, replicated as s1..sN by --n. */
  template: boolean
  setup?: string
  teardown?: string
  steps: SpecStep[]
  pos: Pos
}

export type Blocker = { kind: 'once' } | { kind: 'step'; step: string; pos: Pos } | { kind: 'notices'; step: string; count: number; pos: Pos }

export interface PermutationStep {
  name: string
  blockers: Blocker[]
  pos: Pos
}

export interface Permutation {
  steps: PermutationStep[]
  pos: Pos
}

export interface SpecInvariant {
  description: string
  sql: string
  pos: Pos
}

export interface Spec {
  file: string
  /** Setup blocks (run in order on the control connection before each permutation), with where each starts. */
  setup: { sql: string; pos: Pos }[]
  teardown?: { sql: string; pos: Pos }
  sessions: SpecSession[]
  permutations: Permutation[]
  invariants: SpecInvariant[]
  expect?: { value: 'held' | 'violated'; pos: Pos }
  /**
   * `prevented by 23505, 23P01`: the SQLSTATEs by which the server keeps the invariant. Without it an integrity
   * error (class 23) is no prevention: a session failing with one leaves the trial undecided (docs/verdicts.md).
   */
  prevented?: { codes: string[]; pos: Pos }
  /**
   * `every session completes`: a session that fails (with any error, a prevention's too) makes the trial a failure,
   * whatever the invariant says (docs/verdicts.md). Read as words, not keywords: `every` stays a name elsewhere.
   */
  complete?: { pos: Pos }
  /** Step names defined but used in no permutation line (isolationtester warns about them on stderr). */
  unused: string[]
}

type TokKind = 'kw' | 'ident' | 'sql' | 'int' | 'punct' | 'eof'
interface Tok {
  kind: TokKind
  text: string
  pos: Pos
  /** An identifier written in double quotes (never a keyword). */
  quoted?: boolean
}

const KEYWORDS = new Set(['notices', 'permutation', 'session', 'setup', 'step', 'teardown', 'invariant', 'expect', 'prevented'])
const IDENT_START = /[A-Za-z\x80-\xff_]/
const IDENT_CONT = /[A-Za-z\x80-\xff_0-9$]/

function describe(t: Tok): string {
  switch (t.kind) {
    case 'eof':
      return 'the end of the file'
    case 'sql':
      return 'a { ... } block'
    case 'kw':
      return `'${t.text}'`
    case 'int':
      return `the number ${t.text}`
    case 'punct':
      return `'${t.text}'`
    default:
      return t.quoted ? `"${t.text}"` : `'${t.text}'`
  }
}

/** The scanner: tokens as isolationtester's flex scanner makes them (SQL blocks end at the first `}`). */
function scan(text: string, file: string): Tok[] {
  const toks: Tok[] = []
  let i = 0
  let line = 1
  let lineStart = 0
  const pos = (at: number): Pos => ({ line, column: at - lineStart + 1 })
  const fail = (at: Pos, what: string): never => {
    throw new SpecError(file, at.line, at.column, what)
  }
  while (i < text.length) {
    const ch = text[i]
    if (ch === '\n') {
      i++
      line++
      lineStart = i
      continue
    }
    if (ch === ' ' || ch === '\t' || ch === '\r' || ch === '\f') {
      i++
      continue
    }
    if (ch === '#') {
      while (i < text.length && text[i] !== '\n' && text[i] !== '\r') i++
      continue
    }
    if (IDENT_START.test(ch)) {
      const start = i
      const at = pos(i)
      while (i < text.length && IDENT_CONT.test(text[i])) i++
      const word = text.slice(start, i)
      toks.push({ kind: KEYWORDS.has(word) ? 'kw' : 'ident', text: word, pos: at })
      continue
    }
    if (ch === '"') {
      const at = pos(i)
      let out = ''
      i++
      for (;;) {
        if (i >= text.length) fail(at, 'unterminated quoted identifier: expected a closing "')
        if (text[i] === '\n') fail(pos(i), 'unexpected newline in quoted identifier: expected a closing " on the same line')
        if (text[i] === '"' && text[i + 1] === '"') {
          out += '"'
          i += 2
          continue
        }
        if (text[i] === '"') {
          i++
          break
        }
        out += text[i++]
      }
      toks.push({ kind: 'ident', text: out, pos: at, quoted: true })
      continue
    }
    if (ch === '{') {
      const at = pos(i)
      i++
      while (i < text.length && ' \t\r\f'.includes(text[i])) i++
      const start = i
      let end = -1
      while (i < text.length) {
        if (text[i] === '}') {
          end = i
          break
        }
        if (text[i] === '\n') {
          line++
          lineStart = i + 1
        }
        i++
      }
      if (end < 0) fail(at, 'unterminated sql block: expected a closing }')
      // A block whose } was forgotten runs on to the next block's }: a line of it that starts as the spec's own words
      // do (session s2, step b {, permutation) says where it should have closed. Reported where it opens.
      const runOn = /^(?:session\s+\S+\s*$|step\s+\S+\s*\{|permutation\b|(?:setup|teardown)\s*\{)/m.exec(text.slice(start, end))
      if (runOn) {
        const before = text.slice(0, start + runOn.index).split('\n').length
        fail(at, `this sql block is not closed before line ${before} (${JSON.stringify(runOn[0].trim())}): add its } there`)
      }
      let stop = end
      while (stop > start && ' \t\r\f'.includes(text[stop - 1])) stop--
      toks.push({ kind: 'sql', text: text.slice(start, stop), pos: at })
      i = end + 1
      continue
    }
    if (/[0-9]/.test(ch)) {
      const at = pos(i)
      const start = i
      while (i < text.length && /[0-9]/.test(text[i])) i++
      toks.push({ kind: 'int', text: text.slice(start, i), pos: at })
      continue
    }
    if (',()*'.includes(ch)) {
      toks.push({ kind: 'punct', text: ch, pos: pos(i) })
      i++
      continue
    }
    fail(pos(i), `unexpected character "${ch}": expected setup, teardown, session, step, permutation, invariant, expect, a name or a { ... } block`)
  }
  toks.push({ kind: 'eof', text: '', pos: pos(i) })
  return toks
}

/** Parses a spec (file is only for messages). */
export function parseSpec(text: string, file = 'spec'): Spec {
  const toks = scan(text, file)
  let k = 0
  const peek = () => toks[k]
  const next = () => toks[k++]
  const fail = (t: Tok, what: string): never => {
    throw new SpecError(file, t.pos.line, t.pos.column, `expected ${what}, got ${describe(t)}`)
  }
  const isKw = (t: Tok, w: string) => t.kind === 'kw' && t.text === w
  const sqlBlock = (after: string): Tok => {
    const t = next()
    if (t.kind !== 'sql') fail(t, `a { ... } block after '${after}'`)
    return t
  }
  const name = (what: string): Tok => {
    const t = next()
    if (t.kind !== 'ident') fail(t, what)
    return t
  }

  // A SQLSTATE is five digits or upper-case letters; the scanner splits 23P01 into the number 23 and the name P01,
  // so a code is the tokens that touch each other on one line.
  const isCodeStart = (t: Tok) => t.kind === 'int' || (t.kind === 'ident' && !t.quoted)
  const sqlstate = (): string => {
    const first = next()
    if (!isCodeStart(first) && !(first.kind === 'ident' && first.quoted)) fail(first, `a SQLSTATE after 'prevented by', e.g. 23505`)
    let text = first.text
    let end = first.pos.column + first.text.length
    while (!first.quoted && isCodeStart(peek()) && peek().pos.line === first.pos.line && peek().pos.column === end) {
      const t = next()
      text += t.text
      end = t.pos.column + t.text.length
    }
    if (!/^[0-9A-Z]{5}$/.test(text)) throw new SpecError(file, first.pos.line, first.pos.column, `'${text}' is not a SQLSTATE: prevented by takes five-character codes such as 23505 or 23P01`)
    return text
  }

  const spec: Spec = { file, setup: [], sessions: [], permutations: [], invariants: [], unused: [] }
  // race's own lines may stand wherever a setup, teardown or permutation line may.
  const raceLine = (): boolean => {
    const t = peek()
    if (isKw(t, 'invariant')) {
      next()
      const d = next()
      if (d.kind !== 'ident' || !d.quoted) fail(d, `a "quoted description" after 'invariant'`)
      const body = sqlBlock('invariant "..."')
      spec.invariants.push({ description: d.text, sql: body.text, pos: t.pos })
      return true
    }
    if (isKw(t, 'expect')) {
      next()
      const v = next()
      if (v.kind !== 'ident' || (v.text !== 'held' && v.text !== 'violated')) fail(v, `held or violated after 'expect'`)
      if (spec.expect) throw new SpecError(file, t.pos.line, t.pos.column, `a second expect line: the first is at line ${spec.expect.pos.line}; a spec expects one outcome`)
      spec.expect = { value: v.text as 'held' | 'violated', pos: t.pos }
      return true
    }
    // every session completes: three words (only `session` is a keyword), so a step may still be called every.
    if (t.kind === 'ident' && !t.quoted && t.text === 'every' && isKw(toks[k + 1], 'session')) {
      next()
      next()
      const w = next()
      if (w.kind !== 'ident' || w.quoted || w.text !== 'completes') fail(w, `'completes' after 'every session' (every session completes)`)
      if (spec.complete) throw new SpecError(file, t.pos.line, t.pos.column, `a second every session completes line: the first is at line ${spec.complete.pos.line}`)
      spec.complete = { pos: t.pos }
      return true
    }
    if (isKw(t, 'prevented')) {
      next()
      const by = next()
      if (by.kind !== 'ident' || by.quoted || by.text !== 'by') fail(by, `'by' after 'prevented' (prevented by 23505, 23P01)`)
      if (spec.prevented) throw new SpecError(file, t.pos.line, t.pos.column, `a second prevented by line: the first is at line ${spec.prevented.pos.line}; name every code in one line`)
      const codes: string[] = []
      for (;;) {
        const c = sqlstate()
        if (!codes.includes(c)) codes.push(c)
        if (peek().kind === 'punct' && peek().text === ',') next()
        else if (!isCodeStart(peek())) break
      }
      spec.prevented = { codes, pos: t.pos }
      return true
    }
    return false
  }

  // setup_list opt_teardown (race lines anywhere among them)
  for (;;) {
    if (raceLine()) continue
    const t = peek()
    if (isKw(t, 'setup')) {
      if (spec.teardown) fail(t, `'session' (setup blocks come before the teardown block)`)
      next()
      spec.setup.push({ sql: sqlBlock('setup').text, pos: t.pos })
      continue
    }
    if (isKw(t, 'teardown')) {
      if (spec.teardown) fail(t, `'session' (a spec has one teardown block)`)
      next()
      spec.teardown = { sql: sqlBlock('teardown').text, pos: t.pos }
      continue
    }
    break
  }
  // session_list
  if (!isKw(peek(), 'session')) fail(peek(), spec.setup.length || spec.teardown ? `'session' (a spec needs at least one session)` : `setup, teardown or 'session'`)
  while (isKw(peek(), 'session')) {
    const st = next()
    const n = name(`a session name after 'session'`)
    let template = false
    if (peek().kind === 'punct' && peek().text === '*') {
      next()
      template = true
    }
    const session: SpecSession = { name: n.text, template, steps: [], pos: n.pos }
    const index = spec.sessions.length
    if (isKw(peek(), 'setup')) {
      next()
      session.setup = sqlBlock('setup').text
    }
    if (!isKw(peek(), 'step')) fail(peek(), `'step' (session ${n.text} needs at least one step)`)
    while (isKw(peek(), 'step')) {
      next()
      const sn = name(`a step name after 'step'`)
      const body = sqlBlock(`step ${sn.text}`)
      session.steps.push({ name: sn.text, sql: body.text, session: index, pos: sn.pos })
    }
    if (isKw(peek(), 'teardown')) {
      next()
      session.teardown = sqlBlock('teardown').text
    }
    void st
    spec.sessions.push(session)
    while (raceLine()) {
      /* race lines between sessions */
    }
  }
  // opt_permutation_list
  for (;;) {
    if (raceLine()) continue
    const t = peek()
    if (t.kind === 'eof') break
    if (!isKw(t, 'permutation')) fail(t, `'permutation', 'session', invariant, expect, prevented by, every session completes or the end of the file`)
    next()
    const perm: Permutation = { steps: [], pos: t.pos }
    while (peek().kind === 'ident' && !(peek().text === 'every' && !peek().quoted && isKw(toks[k + 1], 'session'))) {
      const s = next()
      const ps: PermutationStep = { name: s.text, blockers: [], pos: s.pos }
      if (peek().kind === 'punct' && peek().text === '(') {
        next()
        for (;;) {
          const b = next()
          if (b.kind === 'punct' && b.text === '*') ps.blockers.push({ kind: 'once' })
          else if (b.kind === 'ident') {
            if (isKw(peek(), 'notices')) {
              next()
              const c = next()
              if (c.kind !== 'int') fail(c, `a number after '${b.text} notices'`)
              ps.blockers.push({ kind: 'notices', step: b.text, count: Number(c.text), pos: b.pos })
            } else ps.blockers.push({ kind: 'step', step: b.text, pos: b.pos })
          } else fail(b, `a step name or * in the marker of ${s.text}`)
          const sep = next()
          if (sep.kind === 'punct' && sep.text === ')') break
          if (!(sep.kind === 'punct' && sep.text === ',')) fail(sep, `',' or ')' in the marker of ${s.text}`)
        }
      }
      perm.steps.push(ps)
    }
    if (!perm.steps.length) fail(peek(), `a step name after 'permutation'`)
    spec.permutations.push(perm)
  }
  check(spec)
  return spec
}

/** What isolationtester's check_testspec refuses, and race's own rules for templates; fills `unused`. */
function check(spec: Spec): void {
  const at = (p: Pos, what: string) => new SpecError(spec.file, p.line, p.column, what)
  const sessions = new Map<string, SpecSession>()
  for (const s of spec.sessions) {
    const prior = sessions.get(s.name)
    if (prior) throw at(s.pos, `duplicate session name ${s.name} (the first is at line ${prior.pos.line}): give each session its own name`)
    sessions.set(s.name, s)
  }
  const steps = new Map<string, SpecStep>()
  for (const s of spec.sessions) {
    for (const st of s.steps) {
      const prior = steps.get(st.name)
      if (prior) throw at(st.pos, `duplicate step name ${st.name} (the first is at line ${prior.pos.line}): step names are unique across sessions`)
      steps.set(st.name, st)
    }
  }
  const used = new Set<string>()
  for (const p of spec.permutations) {
    for (const ps of p.steps) {
      const st = steps.get(ps.name)
      if (!st) throw at(ps.pos, `undefined step ${ps.name} in permutation: the steps are ${[...steps.keys()].join(' ')}`)
      const session = spec.sessions[st.session]
      if (session.template) {
        throw at(ps.pos, `step ${ps.name} belongs to template session ${session.name}*, which --n replicates: a permutation names only steps of concrete sessions`)
      }
      used.add(ps.name)
      for (const b of ps.blockers) {
        if (b.kind === 'once') continue
        const other = p.steps.find((x) => x.name === b.step)
        if (!other) throw at(b.pos, `undefined blocking step ${b.step} in the marker of ${ps.name}: name a step of this permutation`)
        if (steps.get(b.step)!.session === st.session) throw at(b.pos, `step ${ps.name} cannot block on ${b.step}, a step of its own session`)
      }
    }
  }
  if (spec.permutations.length) {
    spec.unused = [...steps.keys()].sort(cmpBytes).filter((n) => !used.has(n))
  }
}

/** strcmp order (bytes), as isolationtester sorts step names. */
export function cmpBytes(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** The spec with template sessions replicated n times: `s*` becomes s1..sN, each step `x` of it `x_1..x_N`... */
export function expandTemplates(spec: Spec, n: number): Spec {
  if (!spec.sessions.some((s) => s.template)) return spec
  const sessions: SpecSession[] = []
  const taken = new Set(spec.sessions.filter((s) => !s.template).map((s) => s.name))
  for (const s of spec.sessions) {
    if (!s.template) {
      sessions.push({ ...s, steps: s.steps.map((st) => ({ ...st, session: sessions.length })) })
      continue
    }
    for (let i = 1; i <= n; i++) {
      const name = `${s.name}${i}`
      if (taken.has(name)) throw new SpecError(spec.file, s.pos.line, s.pos.column, `template ${s.name}* makes session ${name}, which the spec already has: rename one of them`)
      taken.add(name)
      const index = sessions.length
      sessions.push({ ...s, name, template: false, steps: s.steps.map((st) => ({ ...st, name: `${name}.${st.name}`, session: index })) })
    }
  }
  return { ...spec, sessions }
}

/** The templates' names and whether the spec has any. */
export function hasTemplate(spec: Spec): boolean {
  return spec.sessions.some((s) => s.template)
}
