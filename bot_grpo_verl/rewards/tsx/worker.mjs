// Long-lived TSX compile checker for bot_grpo_verl/rewards/react_tsx.py. It never executes the checked code:
// esbuild only parses and transforms it, TypeScript only parses and type-checks it.
//
// Protocol: newline-delimited JSON on stdin and stdout. On start the worker writes one line
//   {"ready": true, "node": str, "esbuild": str}
// then answers each request line
//   {"id": int, "code": str, "level": "syntax" | "types", "elements": bool, "max_diagnostics": int,
//    "type_timeout"?: float (seconds one type check may take, default 60), "outline"?: bool,
//    "checker"?: "tsc7" | "tsc6" (which TypeScript type-checks, default "tsc7")}
// with one line (answers may come out of order: syntax checks run concurrently)
//   {"id": int, "ok": bool, "total": int, "diagnostics": [Diagnostic, ...], "elements"?: [[start, end], ...]}
// or, when the checker itself fails on that request, {"id": int, "error": str}.
//
// Diagnostic: {"source": "esbuild" | "typescript", "line": int (1-based), "column": int (0-based),
//   "length": int, "message": str, "offset_utf16"?: int, "code"?: int}
//   esbuild:    column and length count UTF-8 bytes of the line; lines end at \n, \r\n, \r, U+2028, U+2029.
//   typescript: offset_utf16 and length count UTF-16 code units from the start of the code; line and
//               column are TypeScript's (UTF-16 column).
// Only the first max_diagnostics diagnostics are sent (messages cut to 500 UTF-16 units); "total" counts all.
// "outline" (requested, and the code passes): the component's exports, props and JSX tags (see outline());
// null when TypeScript's parse fails on it. "elements" (requested, and the code fails) lists the [start, end) UTF-16 ranges of every JSX element and
// fragment of TypeScript's error-tolerant parse, parents before their children; null when that parse
// itself fails (nesting too deep for the thread's stack).
//
// Levels: "syntax" = esbuild's TSX parser (stops at its first error). "types" = the syntax level, then,
// if that passes, TypeScript's syntactic and semantic diagnostics against @types/react (see TSCONFIG).
//
// Checkers: "tsc7" = TypeScript 7 (the Go port, one Go process per type-check thread, see tsc7.mjs; same
// diagnostics at ~1/7 of the CPU); "tsc6" = TypeScript 6's LanguageService in the thread itself. Each has its
// own thread and queue. TypeScript 6 also parses for "elements", "outline" and the checks below in both.
//
// Isolation: TypeScript runs in one worker thread (THREAD_LIMITS: a small stack, so deep nesting fails
// fast, and a heap cap that ends the thread instead of the process). With tsc7 the check runs in the
// thread's Go process: code nested deeper than MAX_NESTING (TypeScript 6's parse) is refused without a
// check, the Go process is killed with its thread on every loss below, and it has a memory bound of its own
// (TSC7_MEMORY_MB: a resident-memory watchdog here, GOMEMLIMIT and an address-space limit there). Type checks that wait together run
// there as one program of separate modules, one request after the other (see runTypeBatch). Only the
// request that fails gets an error answer; the rest of its batch gets real answers:
//   - its check throws (e.g. a stack overflow): the requests after it are checked in a fresh program;
//   - the program of the batch cannot be built: each request is checked in a program of its own;
//   - its check runs past its type_timeout, or the thread dies (heap cap), or (tsc7) its Go process passes
//     its memory bound: the thread (and its Go process) is replaced and the requests after it are checked
//     on the new one;
//   - (tsc7) its Go process dies: the requests after it are checked in a new Go process.
// Element ranges are computed there too, and only for code that fails; when TypeScript cannot parse
// the code for them, "elements" is null (the client then uses lines), not an error.
// The worker exits when stdin closes, after answering the requests in flight.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { withoutDirectives } from "./directives.mjs";

const require = createRequire(import.meta.url);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const MAX_MESSAGE = 500;
const MAX_BATCH = 32;
// For clients that send no type_timeout (react_tsx.py sends timeout / 3).
const DEFAULT_TYPE_TIMEOUT = 60;
// setTimeout's largest delay; a longer one would fire at once.
const MAX_TIMER_MS = 2 ** 31 - 1;
// TypeScript recurses once per nesting level, and its checker is superlinear on some nestings long
// before a larger stack runs out (1,000 nested array literals: 1 ms to overflow a 1 MB stack, 14 s of
// checking with 2 MB, 26 s with 4 MB). A 1 MB stack, about the main thread's, makes nesting past ~1,000
// levels fail within milliseconds; real components nest a few dozen. The heap cap (a normal batch needs
// a few hundred MB) ends a runaway check without taking the process down.
const THREAD_LIMITS = { stackSizeMb: 1, maxOldGenerationSizeMb: 2048 };
// Loading TypeScript and React's types (outside every request's time limit).
const THREAD_START_MS = 120_000;
const CHECKERS = ["tsc7", "tsc6"];
const DEFAULT_CHECKER = "tsc7";
// TypeScript 7 spends minutes on some deep nestings that overflow TypeScript 6's stack within milliseconds
// (950 nested array literals; 200 take 10 s, 300 take 100 s): code whose syntax tree (TypeScript 6's parse)
// nests deeper than this, or that TypeScript 6 cannot parse, gets an error answer without a check (the
// time limit bounds the rest). Real components nest a few dozen levels (the benchmark's: 17); 200 nested
// JSX elements are 207 levels of the tree, 950 nested arrays 953.
const MAX_NESTING = 500;
// The Go process's memory bound, MB (the TypeScript 6 thread's heap cap is 2048 MB).
const TSC7_MEMORY_MB = Number(process.env.BOT_GRPO_VERL_TSC7_MEMORY_MB || 2048);
// How often the main thread reads the Go process's resident memory while it checks.
const MEMORY_POLL_MS = 50;
// How long a tsc7 thread may take to answer once its Go process is killed (it was waiting for that process).
const KILL_GRACE_MS = 5_000;
// Both checkers type-check the code with its comment directives (@ts-ignore, @ts-nocheck, JSX pragmas, /// <reference>)
// blanked, offsets kept: withoutDirectives (directives.mjs) reads the comments from TypeScript's parse.
// The only modules a checked sample may resolve: React's typings. Every other import (a package, ./Card, an
// absolute path, another sample's virtual file) stays unresolved and is typed `any` by the ambient
// `declare module "*"`, whatever exists on disk.
const TYPED_MODULES = /^react(-dom)?(\/[\w./-]*)?$/;

// A typical Vite React-TS tsconfig without its lint-style flags (noUnused*, noFallthrough*), in tsconfig
// spelling: TypeScript 7 reads it as its project's tsconfig, TypeScript 6 converts it.
const TSCONFIG = {
  target: "ES2022",
  lib: ["ES2022", "DOM", "DOM.Iterable"],
  module: "ESNext",
  moduleResolution: "bundler",
  moduleDetection: "force",
  jsx: "react-jsx",
  types: ["react"],
  strict: true,
  isolatedModules: true,
  esModuleInterop: true,
  allowSyntheticDefaultImports: true,
  skipLibCheck: true,
  noEmit: true,
};

function createTypescriptChecker() {
  const ts = require("typescript");
  const converted = ts.convertCompilerOptionsFromJson(TSCONFIG, HERE);
  if (converted.errors.length > 0) throw new Error(`bad TSCONFIG: ${converted.errors[0].messageText}`);
  const COMPILER_OPTIONS = converted.options;
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
  // A closed world for the samples: they resolve React's typings and nothing else (TYPED_MODULES);
  // the typings' own imports resolve as usual, inside node_modules.
  function resolveModuleNameLiterals(literals, containingFile, redirected, options) {
    const sample = virtual.has(containingFile);
    return literals.map((literal) =>
      sample && !TYPED_MODULES.test(literal.text)
        ? { resolvedModule: undefined }
        : ts.resolveModuleName(literal.text, containingFile, options, host, undefined, redirected),
    );
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
    resolveModuleNameLiterals,
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

  // Makes the typed codes the modules of one program and builds it (parses them): the checker then
  // resolves React's types once for the batch, which is most of the cost of a check. Returns the files.
  function load(codes) {
    const files = codes.map((code, number) => {
      virtual.set(slot(number), withoutDirectives(ts, code));
      versions.set(slot(number), (versions.get(slot(number)) ?? 0) + 1);
      return slot(number);
    });
    roots = [...files, ambient];
    service.getProgram();
    return files;
  }

  function diagnostics(file) {
    return [...service.getSyntacticDiagnostics(file), ...service.getSemanticDiagnostics(file)]
      .filter((d) => d.category === ts.DiagnosticCategory.Error)
      .map(toDiagnostic);
  }

  // JSX element and fragment ranges in pre-order, walked with an explicit stack (no recursion depth).
  function elements(code) {
    const source = ts.createSourceFile(slot(0), code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TSX);
    const ranges = [];
    const stack = [source];
    while (stack.length > 0) {
      const node = stack.pop();
      if (ts.isJsxElement(node) || ts.isJsxSelfClosingElement(node) || ts.isJsxFragment(node)) {
        ranges.push([node.getStart(source), node.end]);
      }
      const children = [];
      ts.forEachChild(node, (child) => {
        children.push(child);
      });
      for (let number = children.length - 1; number >= 0; number -= 1) stack.push(children[number]);
    }
    return ranges;
  }

  // Whether code could change what other modules of its program see: a global augmentation, a module
  // augmentation (`declare module "react"`) or a UMD global, found in TypeScript's parse (any comment or
  // spacing); code that TypeScript cannot parse counts as augmenting, so it is checked alone.
  function augments(code) {
    try {
      const source = ts.createSourceFile(slot(0), code, ts.ScriptTarget.Latest, false, ts.ScriptKind.TSX);
      return source.statements.some(
        (statement) =>
          ts.isNamespaceExportDeclaration(statement) ||
          (ts.isModuleDeclaration(statement) &&
            (ts.isStringLiteral(statement.name) || (statement.flags & ts.NodeFlags.GlobalAugmentation) !== 0)),
      );
    } catch {
      return true;
    }
  }

  // What a component expression or declaration comes to: a function, an arrow, a class, through identifiers bound
  // in the module, memo() / forwardRef() calls and type assertions (null when it is none of those).
  function resolveComponent(node, bindings, depth = 0) {
    while (node && depth < 20) {
      depth += 1;
      if (ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) || ts.isClassLike(node)) return node;
      if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression(node) || ts.isTypeAssertionExpression(node) || ts.isNonNullExpression(node)) {
        node = node.expression;
      } else if (ts.isIdentifier(node)) {
        node = bindings.get(node.text);
      } else if (ts.isCallExpression(node) && node.arguments.length > 0 && /^(memo|forwardRef)$/.test(calleeName(node.expression))) {
        node = node.arguments[0];
      } else {
        return null;
      }
    }
    return null;
  }

  // The name a default export's expression gives its component: the identifier it wraps (`memo(SongItems)`,
  // `SongItems as any`) or the name of the function or class it is (`memo(function SongItems() {...})`).
  function wrappedName(node) {
    for (let depth = 0; node && depth < 20; depth += 1) {
      if (ts.isIdentifier(node)) return node.text;
      if ((ts.isFunctionExpression(node) || ts.isClassExpression(node)) && node.name) return node.name.text;
      if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression(node) || ts.isTypeAssertionExpression(node) || ts.isNonNullExpression(node)) node = node.expression;
      else if (ts.isCallExpression(node) && node.arguments.length > 0 && /^(memo|forwardRef)$/.test(calleeName(node.expression))) node = node.arguments[0];
      else return null;
    }
    return null;
  }

  function calleeName(expression) {
    if (ts.isIdentifier(expression)) return expression.text;
    if (ts.isPropertyAccessExpression(expression)) return expression.name.text;
    return "";
  }

  // The props a component takes: the names its first parameter destructures, the fields it reads from that parameter
  // (`props.items`, `props["items"]`, `const { items } = props`); for a class, the fields it reads from
  // `this.props`. `params`: the parameter list's range (the class name's, the export's for no function).
  function componentProps(source, component, anchor) {
    const props = new Set();
    const readsOf = (scope, isProps) => {
      const stack = [scope];
      while (stack.length > 0) {
        const node = stack.pop();
        if (ts.isPropertyAccessExpression(node) && isProps(node.expression)) props.add(node.name.text);
        else if (ts.isElementAccessExpression(node) && isProps(node.expression) && ts.isStringLiteralLike(node.argumentExpression)) props.add(node.argumentExpression.text);
        else if (ts.isVariableDeclaration(node) && node.initializer && isProps(node.initializer) && ts.isObjectBindingPattern(node.name)) destructured(node.name);
        ts.forEachChild(node, (child) => {
          stack.push(child);
        });
      }
    };
    const destructured = (pattern) => {
      for (const element of pattern.elements) {
        const key = element.propertyName ?? element.name;
        if (!element.dotDotDotToken && (ts.isIdentifier(key) || ts.isStringLiteralLike(key))) props.add(key.text);
      }
    };
    if (component && ts.isClassLike(component)) {
      const isThisProps = (node) => ts.isPropertyAccessExpression(node) && node.expression.kind === ts.SyntaxKind.ThisKeyword && node.name.text === "props";
      readsOf(component, isThisProps);
      const name = component.name ?? anchor;
      return { props: [...props], params: [name.getStart(source), name.end] };
    }
    const first = component && component.parameters ? component.parameters[0] : undefined;
    if (first && ts.isObjectBindingPattern(first.name)) destructured(first.name);
    else if (first && ts.isIdentifier(first.name) && component.body) {
      const parameter = first.name.text;
      readsOf(component.body, (node) => ts.isIdentifier(node) && node.text === parameter);
    }
    const params = component && component.parameters ? [component.parameters.pos, component.parameters.end] : [anchor.getStart(source), anchor.end];
    return { props: [...props], params };
  }

  // The component's outline, for requirement checks (UTF-16 offsets): exported names, the default export's
  // name, each export's props (see componentProps) and where its parameter list is, and every JSX tag (name, the
  // opening tag's name range, the closing tag's if any). An export is followed through the module's own bindings:
  // `export { Impl as Name }`, `export default Name`, a const bound to an arrow or function expression, a class,
  // and the wrappers memo(), forwardRef() (also React.memo, React.forwardRef) and type assertions.
  function outline(code) {
    const source = ts.createSourceFile(slot(0), code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TSX);
    const exported = (node) => (ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export) !== 0;
    const isDefault = (node) => (ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Default) !== 0;
    const bindings = new Map(); // the module's top-level names: the node that gives each its value
    for (const statement of source.statements) {
      if ((ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) && statement.name) {
        bindings.set(statement.name.text, statement);
      } else if (ts.isVariableStatement(statement)) {
        for (const declaration of statement.declarationList.declarations) {
          if (ts.isIdentifier(declaration.name) && declaration.initializer) bindings.set(declaration.name.text, declaration.initializer);
        }
      }
    }
    const exports = [];
    const functions = {};
    let defaultName = null;
    const describe = (name, node, anchor) => {
      functions[name] = componentProps(source, resolveComponent(node, bindings), anchor);
    };
    for (const statement of source.statements) {
      if ((ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement)) && exported(statement)) {
        const name = statement.name ? statement.name.text : "default";
        exports.push(name);
        if (isDefault(statement)) defaultName = name;
        describe(name, statement, statement.name ?? statement);
      } else if (ts.isVariableStatement(statement) && exported(statement)) {
        for (const declaration of statement.declarationList.declarations) {
          if (!ts.isIdentifier(declaration.name)) continue;
          exports.push(declaration.name.text);
          describe(declaration.name.text, declaration.initializer, declaration.name);
        }
      } else if (ts.isExportAssignment(statement) && !statement.isExportEquals) {
        const expression = statement.expression;
        defaultName = wrappedName(expression) ?? "default";
        describe(defaultName, expression, expression);
      } else if (ts.isExportDeclaration(statement) && !statement.moduleSpecifier && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
        for (const element of statement.exportClause.elements) {
          const local = element.propertyName ?? element.name;
          const name = element.name.text === "default" ? local.text : element.name.text;
          if (element.name.text === "default") defaultName = name;
          else exports.push(name);
          describe(name, local, local);
        }
      }
    }
    const tags = [];
    const stack = [source];
    while (stack.length > 0) {
      const node = stack.pop();
      if (ts.isJsxElement(node)) {
        const open = node.openingElement.tagName;
        const close = node.closingElement.tagName;
        tags.push({ name: open.getText(source), open: [open.getStart(source), open.end], close: [close.getStart(source), close.end] });
      } else if (ts.isJsxSelfClosingElement(node)) {
        tags.push({ name: node.tagName.getText(source), open: [node.tagName.getStart(source), node.tagName.end] });
      }
      ts.forEachChild(node, (child) => {
        stack.push(child);
      });
    }
    tags.sort((a, b) => a.open[0] - b.open[0]);
    return { exports, default: defaultName, functions, tags };
  }

  // Whether code nests deeper than MAX_NESTING in TypeScript's parse (walked with an explicit stack), or
  // cannot be parsed at all (a parse that overflows the thread's stack).
  function tooDeep(code) {
    let source;
    try {
      source = ts.createSourceFile(slot(0), code, ts.ScriptTarget.Latest, false, ts.ScriptKind.TSX);
    } catch {
      return true;
    }
    const stack = [[source, 0]];
    while (stack.length > 0) {
      const [node, depth] = stack.pop();
      if (depth > MAX_NESTING) return true;
      ts.forEachChild(node, (child) => {
        stack.push([child, depth + 1]);
      });
    }
    return false;
  }

  return { load, diagnostics, elements, augments, outline, tooDeep };
}

// ---------------------------------------------------------------------------------------------------
// The TypeScript thread. It receives batches of jobs {code, types, elements} and posts one message
// {index, answer} per job, in order: answer = {diagnostics?: [...], elements?: [...] | null} or {error}.

function describe(failure) {
  return String(failure?.stack ?? failure).slice(0, 2000);
}

function outlineOrNull(checker, code) {
  try {
    return checker.outline(code);
  } catch {
    return null;
  }
}

function elementsOrNull(checker, code) {
  try {
    return checker.elements(code);
  } catch {
    return null;
  }
}

function answerJob(checker, job, file) {
  const answer = job.types ? { diagnostics: checker.diagnostics(file) } : {};
  const failing = !job.types || answer.diagnostics.length > 0;
  if (job.outline && !(job.types && failing)) answer.outline = outlineOrNull(checker, job.code);
  return job.elements && failing ? { ...answer, elements: elementsOrNull(checker, job.code) } : answer;
}

function post(job, answer) {
  parentPort.postMessage({ index: job.index, answer });
}

// Answers jobs (each {index, code, types, elements}) in order: code that augments what other modules see
// (checker.augments) in a program of its own, the jobs between such code together.
function answerJobs(checker, jobs) {
  const refused = checker.refuses ? jobs.findIndex((job) => job.types && checker.refuses(job.code)) : -1;
  if (refused !== -1) {
    answerJobs(checker, jobs.slice(0, refused));
    post(jobs[refused], { error: `TypeScript 7 does not check code nested deeper than ${MAX_NESTING} levels` });
    return answerJobs(checker, jobs.slice(refused + 1));
  }
  const alone = jobs.findIndex((job) => job.types && checker.augments(job.code));
  if (alone === -1) return answerTogether(checker, jobs);
  answerTogether(checker, jobs.slice(0, alone));
  answerTogether(checker, [jobs[alone]]);
  answerJobs(checker, jobs.slice(alone + 1));
}

// Answers jobs from one program. A program that cannot be built (a parse that overflows) is retried one
// job at a time; a job whose check throws gets {error}, and the jobs after it get a fresh program (the
// checker's state after a throw is not trusted).
function answerTogether(checker, jobs) {
  if (jobs.length === 0) return;
  const typed = jobs.filter((job) => job.types);
  let files;
  let unbuilt = null;
  try {
    files = new Map(checker.load(typed.map((job) => job.code)).map((file, number) => [typed[number], file]));
  } catch (failure) {
    if (jobs.length > 1) return jobs.forEach((job) => answerJobs(checker, [job]));
    unbuilt = failure;
  }
  for (const [position, job] of jobs.entries()) {
    let answer;
    try {
      if (unbuilt !== null) throw unbuilt;
      answer = answerJob(checker, job, files.get(job));
    } catch (failure) {
      post(job, { error: `TypeScript failed on this code: ${describe(failure)}` });
      return answerJobs(checker, jobs.slice(position + 1));
    }
    post(job, answer);
  }
}

// The tsc7 checker: TypeScript 7 checks (tsc7.mjs), TypeScript 6 parses (elements, outline, augments, and
// refuses code nested too deep for TypeScript 7's time).
async function createTsc7Checker() {
  const parser = createTypescriptChecker();
  const { createNativeChecker } = await import("./tsc7.mjs");
  const native = await createNativeChecker({
    here: HERE,
    compilerOptions: TSCONFIG,
    withoutDirectives: (code) => withoutDirectives(require("typescript"), code),
    memoryMb: TSC7_MEMORY_MB,
    onProcess: (pid) => parentPort.postMessage({ process: pid }),
  });
  return { ...parser, load: native.load, diagnostics: native.diagnostics, refuses: parser.tooDeep };
}

async function runTypeThread() {
  const checker = workerData.checker === "tsc7" ? await createTsc7Checker() : createTypescriptChecker();
  checker.diagnostics(checker.load(["export const Warm = () => <div />;"])[0]);
  parentPort.on("message", (jobs) => answerJobs(checker, jobs.map((job, index) => ({ ...job, index }))));
  parentPort.postMessage("ready");
}

// ---------------------------------------------------------------------------------------------------
// The main thread's handle on the TypeScript thread.

// The Go processes of live tsc7 threads, killed if this process exits first.
const goProcesses = new Set();
process.on("exit", () => goProcesses.forEach(killProcess));

function killProcess(pid) {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

// Resident memory of a process in MB (null where /proc cannot tell).
function residentMb(pid) {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}

class TypeThread {
  constructor(checker) {
    this.worker = new Worker(new URL(import.meta.url), { resourceLimits: THREAD_LIMITS, workerData: { checker } });
    this.goProcess = null; // the tsc7 thread's Go process
    this.killing = null; // {index, reason}: the job whose Go process was killed, until the thread answers it
    this.watchdog = null;
    this.lost = null; // why the thread is gone, once it is
    this.batch = null; // {jobs, answered, done} while a batch runs
    this.timer = null;
    this.ready = new Promise((resolve) => {
      this.started = resolve;
    });
    this.arm(THREAD_START_MS, "start");
    this.worker.on("message", (message) => this.receive(message));
    this.worker.on("error", (failure) => this.fail(`the type-check thread failed: ${describe(failure)}`));
    this.worker.on("exit", (code) => this.fail(`the type-check thread exited (code ${code})`));
  }

  arm(limitMs, what) {
    clearTimeout(this.timer);
    const fail = () => this.fail(`the type-check thread did not ${what} within ${limitMs / 1000} s`);
    this.timer = setTimeout(fail, Math.min(limitMs, MAX_TIMER_MS));
  }

  armFor(job) {
    clearTimeout(this.timer);
    const reason = `the type-check thread did not finish one sample's type check within ${job.limitMs / 1000} s`;
    this.timer = setTimeout(() => this.stopCheck(reason), Math.min(job.limitMs, MAX_TIMER_MS));
  }

  // Ends the check in progress. A tsc7 thread's Go process is killed: the thread, which was waiting for it,
  // answers that job (the answer becomes {error: reason}) and goes on with a new Go process; it keeps its
  // thread, which reaps the killed process. The thread is given up instead when there is no Go process to
  // kill (tsc6, or a check that hangs in JavaScript), or when it does not answer within KILL_GRACE_MS.
  stopCheck(reason) {
    if (this.goProcess === null || this.killing !== null || this.batch === null) return this.fail(reason);
    this.killing = { index: this.batch.answered, reason };
    killProcess(this.goProcess);
    goProcesses.delete(this.goProcess);
    this.goProcess = null;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fail(reason), KILL_GRACE_MS);
  }

  receive(message) {
    if (this.lost !== null) return; // a message that was on its way when the thread was given up
    if (message?.process !== undefined) {
      if (this.goProcess !== null) goProcesses.delete(this.goProcess);
      this.goProcess = message.process;
      goProcesses.add(this.goProcess);
      return;
    }
    if (message === "ready") {
      clearTimeout(this.timer);
      this.started(true);
      return;
    }
    const batch = this.batch;
    let answer = message.answer;
    if (this.killing !== null && this.killing.index === message.index) {
      answer = { error: this.killing.reason };
      this.killing = null;
    }
    batch.jobs[message.index].resolve(answer);
    batch.answered += 1;
    if (batch.answered < batch.jobs.length) this.armFor(batch.jobs[batch.answered]);
    else this.finish(null);
  }

  finish(lost) {
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    const batch = this.batch;
    this.batch = null;
    batch?.done(lost);
  }

  fail(reason) {
    if (this.lost !== null) return;
    this.lost = reason;
    // The Go process first: a thread blocked reading from it cannot be terminated until that read returns.
    if (this.goProcess !== null) {
      killProcess(this.goProcess);
      goProcesses.delete(this.goProcess);
      this.goProcess = null;
    }
    this.killing = null;
    this.worker.terminate();
    this.started(reason);
    this.finish(this.batch && { index: this.batch.answered, reason });
  }

  watchMemory() {
    const resident = this.goProcess === null ? null : residentMb(this.goProcess);
    if (resident !== null && resident > TSC7_MEMORY_MB) {
      this.stopCheck(`the TypeScript 7 process passed its memory bound (${Math.round(resident)} MB > ${TSC7_MEMORY_MB} MB)`);
    }
  }

  // Checks jobs in order, resolving each job with its answer as it arrives; each may take its own
  // limitMs, counted from the previous answer. Resolves to null when every job was answered, else to
  // {index, reason}: the job in progress when the thread was lost, and why.
  check(jobs) {
    return new Promise((done) => {
      this.batch = { jobs, answered: 0, done };
      this.armFor(jobs[0]);
      this.watchdog = setInterval(() => this.watchMemory(), MEMORY_POLL_MS);
      this.worker.postMessage(jobs.map(({ code, types, elements, outline }) => ({ code, types, elements, outline })));
    });
  }
}

const typeThreads = new Map(); // checker -> its TypeThread

function currentTypeThread(checker) {
  const thread = typeThreads.get(checker);
  if (thread !== undefined && thread.lost === null) return thread;
  typeThreads.set(checker, new TypeThread(checker));
  return typeThreads.get(checker);
}

// Resolves every job of a batch: the job in progress when a thread is lost gets {error}, the jobs
// after it go to a fresh thread. A thread that cannot start fails every job, without retries.
async function runTypeBatch(checker, jobs) {
  let waiting = jobs;
  while (waiting.length > 0) {
    const thread = currentTypeThread(checker);
    const started = await thread.ready;
    if (started !== true) return waiting.forEach((job) => job.resolve({ error: started }));
    const lost = await thread.check(waiting);
    if (lost === null) return;
    waiting[lost.index].resolve({ error: lost.reason });
    waiting = waiting.slice(lost.index + 1);
  }
}

// Jobs waiting for each checker's TypeScript thread; those that queue while it works form its next batch.
const typeQueues = new Map(CHECKERS.map((checker) => [checker, { jobs: [], draining: false }]));

async function drainTypeQueue(checker) {
  const queue = typeQueues.get(checker);
  queue.draining = true;
  try {
    while (queue.jobs.length > 0) await runTypeBatch(checker, queue.jobs.splice(0, MAX_BATCH));
  } finally {
    queue.draining = false;
  }
}

function typeThreadJob(checker, job) {
  return new Promise((resolve) => {
    const queue = typeQueues.get(checker);
    queue.jobs.push({ ...job, resolve });
    if (!queue.draining) drainTypeQueue(checker);
  });
}

// ---------------------------------------------------------------------------------------------------
// Requests

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

// The output is thrown away; minified printing keeps it linear in the code's size. Unminified, esbuild
// indents every nesting level (a 40 kB block nest prints over 500 MB, more than a string can hold: the
// process dies) and its readable renamer takes minutes on a few thousand nested functions. Neither
// option changes the diagnostics (same errors on 300 mutated components).
const ESBUILD_OPTIONS = {
  loader: "tsx",
  jsx: "automatic",
  logLevel: "silent",
  logLimit: 0,
  minifyWhitespace: true,
  minifyIdentifiers: true,
};

async function esbuildDiagnostics(esbuild, code) {
  try {
    await esbuild.transform(code, ESBUILD_OPTIONS);
    return [];
  } catch (failure) {
    if (!Array.isArray(failure.errors)) throw failure;
    return failure.errors.map(esbuildDiagnostic);
  }
}

function validate(request) {
  if (typeof request.code !== "string") throw new Error("request.code must be a string");
  if (request.level !== "syntax" && request.level !== "types") {
    throw new Error(`unknown level ${JSON.stringify(request.level)}; allowed: "syntax", "types"`);
  }
  const limit = request.max_diagnostics ?? 20;
  if (!(Number.isInteger(limit) && limit > 0)) {
    throw new Error(`max_diagnostics must be a positive integer, got ${JSON.stringify(limit)}`);
  }
  if (request.checker !== undefined && !CHECKERS.includes(request.checker)) {
    throw new Error(`unknown checker ${JSON.stringify(request.checker)}; allowed: "tsc7", "tsc6"`);
  }
  const timeout = request.type_timeout ?? DEFAULT_TYPE_TIMEOUT;
  if (!(typeof timeout === "number" && timeout > 0 && Number.isFinite(timeout))) {
    throw new Error(`type_timeout must be a positive number of seconds, got ${JSON.stringify(timeout)}`);
  }
}

async function check(esbuild, request) {
  validate(request);
  const syntax = await esbuildDiagnostics(esbuild, request.code);
  const types = syntax.length === 0 && request.level === "types";
  const elements = Boolean(request.elements) && (types || syntax.length > 0);
  const outline = Boolean(request.outline) && syntax.length === 0;
  let found = { diagnostics: syntax };
  if (types || elements || outline) {
    const limitMs = (request.type_timeout ?? DEFAULT_TYPE_TIMEOUT) * 1000;
    const checker = request.checker ?? DEFAULT_CHECKER;
    const typed = await typeThreadJob(checker, { code: request.code, types, elements, outline, limitMs });
    if (types && typed.error !== undefined) throw new Error(typed.error);
    // Element ranges only refine the error regions: without them the client uses lines.
    found = types ? typed : { diagnostics: syntax, elements: typed.elements ?? null, outline: typed.outline ?? null };
  }
  const limit = request.max_diagnostics ?? 20;
  const answer = {
    id: request.id,
    ok: found.diagnostics.length === 0,
    total: found.diagnostics.length,
    diagnostics: found.diagnostics.slice(0, limit).map((d) => ({ ...d, message: d.message.slice(0, MAX_MESSAGE) })),
  };
  if (elements) answer.elements = found.elements ?? null;
  if (outline && answer.ok) answer.outline = found.outline ?? null;
  return answer;
}

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function answer(esbuild, line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (failure) {
    send({ id: null, error: `bad request line: ${failure.message}` });
    return;
  }
  try {
    send(await check(esbuild, request));
  } catch (failure) {
    send({ id: request?.id ?? null, error: describe(failure) });
  }
}

async function serve() {
  // A missing package is a broken installation: fail at start, not on every request.
  require.resolve("typescript");
  require.resolve("typescript-native/package.json");
  require.resolve("@types/react/package.json");
  const esbuild = await import("esbuild");
  const inFlight = new Set();
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  input.on("line", (line) => {
    if (!line.trim()) return;
    const task = answer(esbuild, line);
    inFlight.add(task);
    task.finally(() => inFlight.delete(task));
  });
  input.on("close", async () => {
    await Promise.all(inFlight);
    await esbuild.stop();
    process.exit(0);
  });
  send({ ready: true, node: process.version, esbuild: esbuild.version });
}

if (isMainThread) await serve();
else runTypeThread();
