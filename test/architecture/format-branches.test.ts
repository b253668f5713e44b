import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = join(ROOT, 'src');
// The one place where a wire format may be branched on: each format's rules in its own module.
const FORMATS = join(SRC, 'core', 'formats');

// `format ===`, `format !==`, `.format ===`, `?.format !==` …, and the same written the other way round
// (`'messages' === format`, `=== route?.format`).
const BRANCH = [/\bformat\s*[!=]==/, /[!=]==\s*[\w$.?[\]]*?\bformat\b(?![\w$(])/];

/** The source with its comments blanked out (line breaks kept, so line numbers stay right). */
function withoutComments(source: string): string {
  const blank = (comment: string) => comment.replace(/[^\n]/g, ' ');
  return source.replace(/\/\*[\s\S]*?\*\//g, blank).replace(/^\s*\/\/.*$/gm, blank);
}

/** `path:line: code` of every branch on a wire format in the source. */
function formatBranches(path: string, source: string): string[] {
  return withoutComments(source)
    .split('\n')
    .flatMap((line, index) =>
      BRANCH.some((pattern) => pattern.test(line)) ? [`${path}:${index + 1}: ${line.trim()}`] : [],
    );
}

function sources(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return path === FORMATS ? [] : sources(path);
    return /\.[cm]?[jt]s$/.test(entry.name) ? [path] : [];
  });
}

describe('architecture: wire formats', () => {
  it('branches on a wire format only in its module under src/core/formats/ (elsewhere: WIRE_FORMATS[format].rule)', () => {
    const found = sources(SRC).flatMap((path) =>
      formatBranches(relative(ROOT, path).split(sep).join('/'), readFileSync(path, 'utf8')),
    );
    expect(found, `format branches outside src/core/formats/:\n${found.join('\n')}`).to.deep.equal([]);
  });

  it('finds a branch however it is written, and not in comments or other names', () => {
    const found = (code: string) => formatBranches('x.ts', code).length;
    expect(found("if (format === 'messages') return;")).to.equal(1);
    expect(found("if (format !== 'chat-completions') return;")).to.equal(1);
    expect(found("if (route.format==='count-tokens') return;")).to.equal(1);
    expect(found('if (a.plugin.routes[r]?.format !== b) return;')).to.equal(1);
    expect(found("if ('responses' === format) return;")).to.equal(1);
    expect(found('if (x === from.plugin.routes[route]?.format) return;')).to.equal(1);
    expect(found("// format === 'messages' in a comment\n/* and\n format !== x */")).to.equal(0);
    expect(found("if (formatted === 'x' || x === formatOf(y) || responseFormat === 'json') return;")).to.equal(0);
  });
});
