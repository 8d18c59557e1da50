// Comment directives, blanked before a type check (worker.mjs, for TypeScript 6 and 7 alike).
//
// A directive changes what TypeScript checks: @ts-nocheck, @ts-ignore, @ts-expect-error (and @ts-check), the
// JSX pragmas (@jsx, @jsxFrag, @jsxImportSource, @jsxRuntime: another factory or import source types JSX as
// anything), in any spelling TypeScript reads (it lowercases pragma names), and triple-slash directives
// (/// <reference path=...> reads files). TypeScript honours them only inside comments, so the comments are
// the ones TypeScript's own parse sees: its tree (TypeScript 6, TSX) says where every token lies, and its
// scanner reads the trivia before each token and between the tokens that are no node (punctuation,
// keywords). The contents of strings, template literals, regular expressions and JSX text are tokens, never
// trivia, so they stay as written, whatever they look like. Inside each comment the first character of every
// directive (its `@`, a triple-slash's first `/`) becomes a space: the comment stays a comment, TypeScript
// reads no directive in it, and every UTF-16 offset of the code stays where it was.

// Where a directive starts inside a comment's text (the character blanked).
const DIRECTIVE = /@(?=ts-|jsx)|^\/(?=\/\/\s*<)/gi;
// Code without this is code without a directive: nothing to parse.
const MAY_HOLD_DIRECTIVE = /@(?:ts-|jsx)|\/\/\/\s*</i;

// The [start, end) UTF-16 ranges of the comments of a TSX source file `source` (ts.createSourceFile), in no
// particular order. Walks the tree with an explicit stack (no recursion depth).
export function commentRanges(ts, source) {
  const text = source.text;
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.JSX, text);
  const ranges = [];
  // The comments among the tokens of [start, end); with `leading`, only those before the first token.
  const scan = (start, end, leading) => {
    scanner.resetTokenState(start);
    while (scanner.getTokenEnd() < end) {
      const kind = scanner.scan();
      if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia) {
        ranges.push([scanner.getTokenStart(), Math.min(scanner.getTokenEnd(), end)]);
      } else if (kind === ts.SyntaxKind.EndOfFileToken || (leading && !ts.isTrivia(kind))) {
        return;
      }
    }
  };
  const stack = [source];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node.kind === ts.SyntaxKind.JsxText) continue; // text: no trivia before it, none inside
    const children = [];
    ts.forEachChild(node, (child) => {
      children.push(child);
    });
    if (children.length === 0 && ts.isTokenKind(node.kind)) {
      // One token (an identifier, a literal, a template part): only the trivia before it; its own text is
      // read in the parser's context (a regular expression, a template's continuation), not the scanner's.
      scan(node.pos, node.end, true);
      continue;
    }
    let start = node.pos;
    for (const child of children) {
      scan(start, child.pos, false);
      start = child.end;
    }
    scan(start, node.end, false);
    for (const child of children) stack.push(child);
  }
  return ranges;
}

// `code` with the first character of every directive in its comments replaced by a space (same length).
export function withoutDirectives(ts, code) {
  if (!MAY_HOLD_DIRECTIVE.test(code)) return code;
  const source = ts.createSourceFile("directives.tsx", code, {
    languageVersion: ts.ScriptTarget.Latest,
    jsDocParsingMode: ts.JSDocParsingMode.ParseNone,
  }, false, ts.ScriptKind.TSX);
  const blanked = new Set();
  for (const [start, end] of commentRanges(ts, source)) {
    for (const match of code.slice(start, end).matchAll(DIRECTIVE)) blanked.add(start + match.index);
  }
  if (blanked.size === 0) return code;
  const characters = code.split(""); // UTF-16 code units
  for (const position of blanked) characters[position] = " ";
  return characters.join("");
}
