// Long-lived TSX compile checker for reward_models/react_tsx.py. It never executes the checked code:
// esbuild only parses and transforms it, TypeScript only parses and type-checks it.
//
// Protocol: newline-delimited JSON on stdin and stdout. On start the worker writes one line
//   {"ready": true, "node": str, "esbuild": str}
// then answers each request line
//   {"id": int, "code": str, "level": "syntax" | "types", "elements": bool, "max_diagnostics": int}
// with one line (answers may come out of order: syntax checks run concurrently)
//   {"id": int, "ok": bool, "total": int, "diagnostics": [Diagnostic, ...], "elements"?: [[start, end], ...]}
// or, when the checker itself fails on a request, {"id": int, "error": str}.
//
// Diagnostic: {"source": "esbuild" | "typescript", "line": int (1-based), "column": int (0-based),
//   "length": int, "message": str, "offset_utf16"?: int, "code"?: int}
//   esbuild:    column and length count UTF-8 bytes of the line; lines end at \n, \r\n, \r, U+2028, U+2029.
//   typescript: offset_utf16 and length count UTF-16 code units from the start of the code; line and
//               column are TypeScript's (UTF-16 column).
// Only the first max_diagnostics diagnostics are sent (messages cut to 500 UTF-16 units); "total" counts all.
// "elements" (when requested) lists the [start, end) UTF-16 ranges of every JSX element and fragment of
// TypeScript's error-tolerant parse of the code.
//
// Levels: "syntax" = esbuild's TSX parser (stops at its first error). "types" = the syntax level, then,
// if that passes, TypeScript's syntactic and semantic diagnostics against @types/react (see COMPILER_OPTIONS).
// Type checks that wait in the queue together run as one program of separate modules (see drainTypeQueue).
// The worker exits when stdin closes, after answering the requests in flight.
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const require = createRequire(import.meta.url);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const MAX_MESSAGE = 500;

function esbuildDiagnostic(message) {
  const location = message.location ?? { line: 1, column: 0, length: 0 };
  return {
    source: "esbuild",
    line: location.line,
    column: location.column,
    length: location.length,
    message: message.text,
  };
}

async function esbuildDiagnostics(code) {
  try {
    await esbuild.transform(code, { loader: "tsx", jsx: "automatic", logLevel: "silent", logLimit: 0 });
    return [];
  } catch (failure) {
    if (!Array.isArray(failure.errors)) throw failure;
    return failure.errors.map(esbuildDiagnostic);
  }
}

// TypeScript is loaded on first use: syntax-only workers (and one-shot runs) never pay for it.
let typescriptChecker = null;

function createTypescriptChecker() {
  const ts = require("typescript");
  // A typical Vite React-TS tsconfig without its lint-style flags (noUnused*, noFallthrough*).
  const COMPILER_OPTIONS = {
    target: ts.ScriptTarget.ES2022,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"],
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    moduleDetection: ts.ModuleDetectionKind.Force,
    jsx: ts.JsxEmit.ReactJSX,
    types: ["react"],
    strict: true,
    isolatedModules: true,
    esModuleInterop: true,
    allowSyntheticDefaultImports: true,
    skipLibCheck: true,
    noEmit: true,
  };
  // Virtual files that hold the code of one batch, one module per request, next to node_modules.
  const slot = (number) => path.join(HERE, `__checked_${number}__.tsx`);
  // Imports other than react (components, icon libraries, CSS) resolve to `any` instead of failing.
  const ambient = path.join(HERE, "__ambient__.d.ts");
  const virtual = new Map([[ambient, 'declare module "*";\n']]);
  const versions = new Map();
  const snapshots = new Map();
  let roots = [ambient];

  function readFile(file) {
    return virtual.has(file) ? virtual.get(file) : ts.sys.readFile(file);
  }
  const host = {
    getScriptFileNames: () => roots,
    getScriptVersion: (file) => String(versions.get(file) ?? 0),
    getScriptSnapshot(file) {
      if (versions.has(file)) return ts.ScriptSnapshot.fromString(virtual.get(file));
      if (!snapshots.has(file)) {
        const text = readFile(file);
        snapshots.set(file, text === undefined ? undefined : ts.ScriptSnapshot.fromString(text));
      }
      return snapshots.get(file);
    },
    getCurrentDirectory: () => HERE,
    getCompilationSettings: () => COMPILER_OPTIONS,
    getDefaultLibFileName: (options) => ts.getDefaultLibFilePath(options),
    fileExists: (file) => virtual.has(file) || ts.sys.fileExists(file),
    readFile,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
    realpath: ts.sys.realpath,
  };
  const service = ts.createLanguageService(host, ts.createDocumentRegistry());

  function toDiagnostic(diagnostic) {
    const start = diagnostic.start ?? 0;
    const { line, character } = diagnostic.file
      ? diagnostic.file.getLineAndCharacterOfPosition(start)
      : { line: 0, character: 0 };
    return {
      source: "typescript",
      line: line + 1,
      column: character,
      length: diagnostic.length ?? 0,
      offset_utf16: start,
      code: diagnostic.code,
      message: ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"),
    };
  }

  // Type-checks several codes in one program: the checker resolves React's types once per batch, which
  // is most of the cost of a check. Returns one diagnostics list per code.
  function diagnostics(codes) {
    const files = codes.map((code, number) => {
      virtual.set(slot(number), code);
      versions.set(slot(number), (versions.get(slot(number)) ?? 0) + 1);
      return slot(number);
    });
    roots = [...files, ambient];
    return files.map((file) =>
      [...service.getSyntacticDiagnostics(file), ...service.getSemanticDiagnostics(file)]
        .filter((d) => d.category === ts.DiagnosticCategory.Error)
        .map(toDiagnostic),
    );
  }

  function elements(code) {
    const source = ts.createSourceFile(slot(0), code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TSX);
    const ranges = [];
    const visit = (node) => {
      if (ts.isJsxElement(node) || ts.isJsxSelfClosingElement(node) || ts.isJsxFragment(node)) {
        ranges.push([node.getStart(source), node.end]);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    return ranges;
  }

  return { diagnostics, elements };
}

function typescript() {
  typescriptChecker ??= createTypescriptChecker();
  return typescriptChecker;
}

// Type checks waiting for the next batch. Code that can change what other modules see (global or module
// augmentations) is checked in a batch of its own.
const MAX_BATCH = 32;
const AUGMENTS = /\bdeclare\s+(global|module|namespace)\b|\/\/\/\s*<reference/;
let typeQueue = [];

function drainTypeQueue() {
  while (typeQueue.length > 0) {
    const augmenting = typeQueue.findIndex((job) => AUGMENTS.test(job.code));
    const size = augmenting === 0 ? 1 : augmenting === -1 ? typeQueue.length : augmenting;
    const batch = typeQueue.splice(0, Math.min(size, MAX_BATCH));
    try {
      const found = typescript().diagnostics(batch.map((job) => job.code));
      batch.forEach((job, number) => job.resolve(found[number]));
    } catch (failure) {
      batch.forEach((job) => job.reject(failure));
    }
  }
}

function typeDiagnostics(code) {
  return new Promise((resolve, reject) => {
    if (typeQueue.length === 0) setImmediate(drainTypeQueue);
    typeQueue.push({ code, resolve, reject });
  });
}

async function check(request) {
  if (typeof request.code !== "string") throw new Error("request.code must be a string");
  if (request.level !== "syntax" && request.level !== "types") {
    throw new Error(`unknown level ${JSON.stringify(request.level)}; allowed: "syntax", "types"`);
  }
  let diagnostics = await esbuildDiagnostics(request.code);
  if (diagnostics.length === 0 && request.level === "types") diagnostics = await typeDiagnostics(request.code);
  const limit = Number.isInteger(request.max_diagnostics) ? request.max_diagnostics : 20;
  const answer = {
    id: request.id,
    ok: diagnostics.length === 0,
    total: diagnostics.length,
    diagnostics: diagnostics.slice(0, limit).map((d) => ({ ...d, message: d.message.slice(0, MAX_MESSAGE) })),
  };
  if (request.elements) answer.elements = typescript().elements(request.code);
  return answer;
}

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function answer(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (failure) {
    send({ id: null, error: `bad request line: ${failure.message}` });
    return;
  }
  try {
    send(await check(request));
  } catch (failure) {
    send({ id: request.id ?? null, error: String(failure?.stack ?? failure).slice(0, 2000) });
  }
}

const inFlight = new Set();
const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", (line) => {
  if (!line.trim()) return;
  const task = answer(line);
  inFlight.add(task);
  task.finally(() => inFlight.delete(task));
});
input.on("close", async () => {
  await Promise.all(inFlight);
  await esbuild.stop();
  process.exit(0);
});
send({ ready: true, node: process.version, esbuild: esbuild.version });
