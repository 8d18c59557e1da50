// Comment directives, blanked before a type check (worker.mjs, for TypeScript 6 and 7 alike).
//
// A directive changes what TypeScript checks: @ts-nocheck, @ts-ignore, @ts-expect-error (and @ts-check), the
// JSX pragmas (@jsx, @jsxFrag, @jsxImportSource, @jsxRuntime: another factory or import source types JSX as
// anything), in any spelling TypeScript reads (it lowercases pragma names), and triple-slash directives
// (/// <reference path=...> reads files). TypeScript honours them only inside comments, so the comments are
// the ones TypeScript's own parse sees: its tree (TypeScript 6, TSX) says where every token lies, and its
// scanner reads the trivia where the text of a directive lies (commentAround). The contents of strings, template literals, regular expressions and JSX text are tokens, never
// trivia, so they stay as written, whatever they look like. Inside each comment the first character of every
// directive (its `@`, a triple-slash's first `/`) becomes a space: the comment stays a comment, TypeScript
// reads no directive in it, and every UTF-16 offset of the code stays where it was.

// The character that starts a directive: an `@` (blanked when inside a comment), the first `/` of a triple-slash
// directive (blanked when a comment starts there). Each match is one character, so overlapping starts are found.
const DIRECTIVE = /@(?=ts-|jsx)|\/(?=\/\/\s*<)/gi;

// The comment among the tokens of [start, end) that holds `position`, as [start, end), or null; with `leading`,
// only the trivia before the first token is read.
function commentIn(ts, scanner, start, end, leading, position) {
  scanner.resetTokenState(start);
  while (scanner.getTokenEnd() < end && scanner.getTokenEnd() <= position) {
    const kind = scanner.scan();
    const comment = kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia;
    if (comment && scanner.getTokenStart() <= position && position < Math.min(scanner.getTokenEnd(), end)) {
      return [scanner.getTokenStart(), Math.min(scanner.getTokenEnd(), end)];
    }
    if (kind === ts.SyntaxKind.EndOfFileToken || (leading && !ts.isTrivia(kind))) return null;
  }
  return null;
}

// The comment of the TSX source file `source` (ts.createSourceFile) that holds `position`, as [start, end), or
// null. The node around `position` is found from the root down (a loop: no recursion depth); where `position`
// lies between that node's children, or before a token's text, the scanner reads the tokens there: punctuation
// and keywords, which need no context. A token's own text (a string, a template part, a regular expression,
// JSX text) is read by the parser in its context and is never a comment.
function commentAround(ts, source, scanner, position) {
  let node = source;
  for (;;) {
    if (node.kind === ts.SyntaxKind.JsxText) return null;
    const children = [];
    ts.forEachChild(node, (child) => {
      children.push(child);
    });
    if (children.length === 0 && ts.isTokenKind(node.kind)) {
      return commentIn(ts, scanner, node.pos, node.end, true, position);
    }
    let start = node.pos;
    let end = node.end;
    let inside = null;
    for (const child of children) {
      if (position < child.pos) {
        end = child.pos;
        break;
      }
      if (position < child.end) {
        inside = child;
        break;
      }
      start = child.end;
    }
    if (inside === null) return commentIn(ts, scanner, start, end, false, position);
    node = inside;
  }
}

// `code` with the first character of every directive in its comments replaced by a space (same length).
export function withoutDirectives(ts, code) {
  const candidates = [...code.matchAll(DIRECTIVE)];
  if (candidates.length === 0) return code;
  const source = ts.createSourceFile("directives.tsx", code, {
    languageVersion: ts.ScriptTarget.Latest,
    jsDocParsingMode: ts.JSDocParsingMode.ParseNone,
  }, false, ts.ScriptKind.TSX);
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.JSX, code);
  const characters = code.split(""); // UTF-16 code units
  let blanked = false;
  for (const { index, 0: found } of candidates) {
    const comment = commentAround(ts, source, scanner, index);
    if (comment !== null && (found === "@" || comment[0] === index)) {
      characters[index] = " ";
      blanked = true;
    }
  }
  return blanked ? characters.join("") : code;
}
