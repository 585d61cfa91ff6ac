// The only place colours are decided: a TTY gets them; NO_COLOR, --no-color, FORCE_COLOR=0 and pipes do not.
// The styles are race's own (the 16-colour codes chalk writes at its level 1, nested and across line breaks the
// way chalk does it), so that no command loads a colour library to print plain text.

const STYLES = {
  bold: ['\u001b[1m', '\u001b[22m'],
  dim: ['\u001b[2m', '\u001b[22m'],
  italic: ['\u001b[3m', '\u001b[23m'],
  underline: ['\u001b[4m', '\u001b[24m'],
  red: ['\u001b[31m', '\u001b[39m'],
  green: ['\u001b[32m', '\u001b[39m'],
  yellow: ['\u001b[33m', '\u001b[39m'],
  blue: ['\u001b[34m', '\u001b[39m'],
  magenta: ['\u001b[35m', '\u001b[39m'],
  cyan: ['\u001b[36m', '\u001b[39m'],
  gray: ['\u001b[90m', '\u001b[39m'],
} as const

type StyleName = keyof typeof STYLES

/** A style, called on text (several arguments are joined with spaces), and every style to add to it. */
export type Style = ((...text: unknown[]) => string) & { readonly [K in StyleName]: Style }

interface Styler {
  open: string
  close: string
  openAll: string
  closeAll: string
  parent?: Styler
}

/** Each occurrence of `find` followed by `then` (an inner style's close reopens the outer style). */
function afterEach(s: string, find: string, then: string): string {
  return s.includes(find) ? s.split(find).join(find + then) : s
}

function apply(styler: Styler | undefined, enabled: boolean, text: string): string {
  if (!enabled || !text || !styler) return text
  let s = text
  if (s.includes('\u001b')) for (let st: Styler | undefined = styler; st; st = st.parent) s = afterEach(s, st.close, st.open)
  // Closed before each line break and reopened after it (\r\n kept together), so no style bleeds past a line.
  if (s.includes('\n')) s = s.replace(/\r?\n/g, (nl) => styler.closeAll + nl + styler.openAll)
  return styler.openAll + s + styler.closeAll
}

function build(enabled: boolean, styler?: Styler): Style {
  const style = ((...text: unknown[]) => apply(styler, enabled, text.length === 1 ? '' + text[0] : text.join(' '))) as Style
  for (const name of Object.keys(STYLES) as StyleName[]) {
    Object.defineProperty(style, name, {
      get() {
        const [open, close] = STYLES[name]
        const next = build(enabled, styler ? { open, close, openAll: styler.openAll + open, closeAll: close + styler.closeAll, parent: styler } : { open, close, openAll: open, closeAll: close })
        Object.defineProperty(style, name, { value: next })
        return next
      },
      configurable: true,
    })
  }
  return style
}

export let c: Style = build(false)

export function setColor(enabled: boolean, stream: NodeJS.WriteStream = process.stdout): void {
  const env = process.env
  const off = !enabled || (env.NO_COLOR !== undefined && env.NO_COLOR !== '') || env.FORCE_COLOR === '0' || env.TERM === 'dumb'
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0'
  c = build(!off && (forced || Boolean(stream.isTTY)))
}
export function verdictColor(v: string): string {
  switch (v) {
    case 'anomaly':
    case 'VIOLATED':
    case 'DEVIATION':
      return c.red.bold(v)
    case 'unknown':
      return c.yellow.bold(v)
    case 'HELD':
    case 'MATCH':
      return c.green.bold(v)
    default:
      return c.cyan(v)
  }
}

export function outcomeColor(o: string): string {
  if (o.startsWith('committed')) return c.green(o)
  if (o.startsWith('rejected')) return c.yellow(o)
  return c.red(o)
}
