import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';
import { MODEL_ROUTES } from '../../src/core/route-table.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TABLE = 'src/core/route-table.ts';

function sourceFiles(directory: string): string[] {
  return readdirSync(join(ROOT, directory), { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The non-empty string and template literal texts of a source file, by line (comments are not literals). */
function literals(text: string): { line: number; text: string }[] {
  const found: { line: number; text: string }[] = [];
  const source = ts.createSourceFile('file.ts', text, ts.ScriptTarget.ES2022);
  const visit = (node: ts.Node): void => {
    if (
      ts.isStringLiteralLike(node) ||
      ts.isTemplateHead(node) ||
      ts.isTemplateMiddle(node) ||
      ts.isTemplateTail(node)
    ) {
      found.push({ line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1, text: node.text });
    }
    node.forEachChild(visit);
  };
  visit(source);
  return found.filter((literal) => literal.text !== '');
}

/**
 * Literals naming a model route's path (`/v1/chat/completions`, or a prefix a path is built from, like `/v1/messages`).
 */
function modelPathLiterals(files: string[]): string[] {
  const paths = MODEL_ROUTES.map((route) => route.path);
  return files.flatMap((file) =>
    literals(readFileSync(join(ROOT, file), 'utf8'))
      .filter(({ text }) =>
        paths.some((path) => text === path || text.startsWith(`${path}/`) || text.startsWith(`${path}?`)),
      )
      .map(({ line, text }) => `${relative(ROOT, join(ROOT, file))}:${line}: '${text}'`),
  );
}

describe('architecture: model-route paths live in the route table', () => {
  it('finds no model-route path literal in src/ or tools/ outside the route table', () => {
    const files = [...sourceFiles('src'), ...sourceFiles('tools')].filter((file) => file !== TABLE);
    expect(files.length).to.be.greaterThan(50);
    expect(modelPathLiterals(files)).to.deep.equal([]);
  });

  it('finds such a literal, and not one in a comment', () => {
    const table = modelPathLiterals([TABLE]);
    expect(table.length).to.be.greaterThan(3);
    expect(literals("// see '/v1/chat'\nconst path = `/v1/messages/${id}`;\nconst other = 'x';")).to.deep.equal([
      { line: 2, text: '/v1/messages/' },
      { line: 3, text: 'x' },
    ]);
  });
});
