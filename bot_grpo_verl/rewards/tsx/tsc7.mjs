// The TypeScript 7 type check of worker.mjs (checker "tsc7"): TypeScript's Go port (the npm alias
// typescript-native = typescript@7, whose platform package carries the Go binary), driven through its
// in-process API (typescript/unstable/sync). It runs in worker.mjs's type-check thread and gives the same
// diagnostics as the TypeScript 6 LanguageService there (checker "tsc6"), at ~1/7 of its CPU per sample.
//
// One Go process per thread, started by the API, serves every batch: a batch is one snapshot of a virtual
// project (one module per sample), and the Go side keeps the parsed lib and React files between snapshots.
//
// A closed world. The Go process sees no real file: every file system call comes back to the callbacks
// below, which serve
//   - the virtual project under ROOT (a directory that does not exist on disk): the tsconfig, the ambient
//     `declare module "*"` and the samples of the current batch, each under a random name per batch (a
//     sample cannot name another sample's module, nor the tsconfig or the ambient file: their names carry a
//     random secret per process);
//   - a mirror of @types/react under ROOT/node_modules/@types/react, with csstype nested inside it
//     (ROOT/node_modules/@types/react/node_modules/csstype: visible to React's typings, not to a sample);
//   - TypeScript 7's lib files, in the platform package's lib folder.
// Everything else does not exist: `import x from "/etc/passwd"`, a package on disk, `typescript`, another
// sample: unresolved, so typed `any` by the ambient module, as with tsc6. (Comment directives, including
// /// <reference path=...>, are blanked before the check by the withoutDirectives option, as for tsc6.)
//
// The Go process is the thread's to lose: worker.mjs's main thread learns its pid (the `onProcess`
// callback posts it), kills it when a sample runs past its time limit or the process's resident memory
// passes its bound, and then replaces the thread. The bound is also set as GOMEMLIMIT (soft: the Go garbage
// collector works harder near it) and, where util-linux's `prlimit` exists, as a hard address-space limit.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const PACKAGE = "typescript-native";
// The virtual project's directory: no such directory exists on disk, and none is read from it.
const ROOT = "/__bot_grpo_verl_tsc7__";
// Address space the Go process may map beyond its memory bound (Go reserves ~1.3 GB when idle).
const ADDRESS_SPACE_SLACK_MB = 4096;

// TypeScript's line starts (CR, LF, CRLF, U+2028, U+2029), as ts.computeLineStarts.
function lineStarts(text) {
  const starts = [0];
  for (let position = 0; position < text.length; ) {
    const character = text.charCodeAt(position);
    position += 1;
    if (character === 13 && text.charCodeAt(position) === 10) position += 1;
    if (character === 10 || character === 13 || character === 0x2028 || character === 0x2029) starts.push(position);
  }
  return starts;
}

function lineAndColumn(starts, position) {
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (starts[middle] <= position) low = middle;
    else high = middle - 1;
  }
  return { line: low, character: position - starts[low] };
}

// ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"): the chain's messages, each on its own line,
// indented two spaces per level.
function flatten(diagnostic, indent = 0) {
  let text = indent > 0 ? `\n${"  ".repeat(indent)}${diagnostic.text}` : diagnostic.text;
  for (const next of diagnostic.messageChain ?? []) text += flatten(next, indent + 1);
  return text;
}

// The platform package's folder (the Go binary and TypeScript 7's lib files), as typescript-native finds it.
export function nativeBinaryDir(here) {
  const require = createRequire(path.join(here, "package.json"));
  const name = `@typescript/typescript-${process.platform}-${process.arch}`;
  return path.join(path.dirname(require.resolve(`${name}/package.json`)), "lib");
}

// options: {here (the worker's folder), compilerOptions (tsconfig spelling), withoutDirectives,
//           memoryMb (the Go process's memory bound), onProcess (called with each new Go process's pid)}.
export async function createNativeChecker({ here, compilerOptions, withoutDirectives, memoryMb, onProcess }) {
  const require = createRequire(path.join(here, "package.json"));
  const apiPath = path.join(path.dirname(require.resolve(`${PACKAGE}/package.json`)), "dist/api/sync/api.js");
  const { API, DiagnosticCategory } = await import(pathToFileURL(apiPath).href);
  const libDir = nativeBinaryDir(here);
  const reactTypes = path.dirname(require.resolve("@types/react/package.json"));
  const csstype = path.dirname(createRequire(path.join(reactTypes, "index.d.ts")).resolve("csstype/package.json"));
  const secret = randomBytes(12).toString("hex");
  const tsconfig = `${ROOT}/tsconfig-${secret}.json`;
  const ambient = `${ROOT}/__ambient_${secret}__.d.ts`;
  // Virtual paths -> real folders, the nested one first.
  const mirrors = [
    [`${ROOT}/node_modules/@types/react/node_modules/csstype`, csstype],
    [`${ROOT}/node_modules/@types/react`, reactTypes],
    [libDir, libDir],
  ];
  // Directories that exist because a mirror or the project lies below them.
  const ancestors = new Set(["/"]);
  for (const virtualPath of [ROOT, ...mirrors.map(([virtualPath]) => virtualPath)]) {
    for (let folder = virtualPath; folder !== "/"; folder = path.posix.dirname(folder)) ancestors.add(folder);
  }
  const virtual = new Map([[ambient, 'declare module "*";\n']]);
  const texts = new Map(); // real file -> its text (null: none), read once
  const kinds = new Map(); // real path -> "file" | "directory" | null

  function mirrored(file) {
    for (const [virtualPath, real] of mirrors) {
      if (file === virtualPath || file.startsWith(`${virtualPath}/`)) return real + file.slice(virtualPath.length);
    }
    return null;
  }
  function kind(real) {
    if (!kinds.has(real)) {
      let found = null;
      try {
        const stat = fs.statSync(real);
        found = stat.isFile() ? "file" : stat.isDirectory() ? "directory" : null;
      } catch {
        found = null;
      }
      kinds.set(real, found);
    }
    return kinds.get(real);
  }
  const fileSystem = {
    readFile(file) {
      if (virtual.has(file)) return virtual.get(file);
      const real = mirrored(file);
      if (real === null || kind(real) !== "file") return null; // null: no such file (never the real disk)
      if (!texts.has(real)) texts.set(real, fs.readFileSync(real, "utf8"));
      return texts.get(real);
    },
    fileExists(file) {
      if (virtual.has(file)) return true;
      const real = mirrored(file);
      return real !== null && kind(real) === "file";
    },
    directoryExists(folder) {
      const trimmed = folder.length > 1 ? folder.replace(/\/+$/, "") : folder;
      if (ancestors.has(trimmed)) return true;
      const real = mirrored(trimmed);
      return real !== null && kind(real) === "directory";
    },
    getAccessibleEntries() {
      return { files: [], directories: [] };
    },
    realpath(file) {
      return file;
    },
  };

  let api = null;
  let opened = false;
  let snapshot = null;
  let project = null;
  let names = [];
  let codes = new Map(); // sample file -> its code (directives blanked)

  function stop() {
    try {
      api?.close();
    } catch {
      // a Go process that died already
    }
    try {
      api?.client?.channel?.child?.kill("SIGKILL");
    } catch {
      // gone
    }
    api = null;
    opened = false;
    snapshot = null;
    project = null;
  }

  function start() {
    stop();
    process.env.GOMEMLIMIT = `${memoryMb}MiB`;
    api = new API({ cwd: ROOT, fs: fileSystem });
    const pid = api.client.channel.child.pid;
    onProcess(pid);
    try {
      execFileSync("prlimit", ["--pid", String(pid), `--as=${(memoryMb + ADDRESS_SPACE_SLACK_MB) * 2 ** 20}`], {
        stdio: "ignore",
      });
    } catch {
      // no prlimit (not Linux, or no util-linux): the main thread's resident-memory watchdog still applies
    }
  }

  // Any failure of the API (the Go process killed, out of memory, a protocol error) leaves it untrusted:
  // the next batch starts a new process.
  function guarded(work) {
    try {
      return work();
    } catch (failure) {
      stop();
      throw failure;
    }
  }

  // The codes of one batch as the modules of the project's next snapshot. Returns their files.
  function load(batch) {
    return guarded(() => {
      // A Go process that died between batches (killed, out of memory) is replaced before it fails a sample.
      const child = api?.client?.channel?.child;
      if (api === null || child.exitCode !== null || child.signalCode !== null) start();
      const deleted = names;
      for (const file of names) virtual.delete(file);
      const tag = randomBytes(12).toString("hex");
      names = batch.map((_, number) => `${ROOT}/${tag}_${number}.tsx`);
      codes = new Map();
      names.forEach((file, number) => {
        const code = withoutDirectives(batch[number]);
        virtual.set(file, code);
        codes.set(file, code);
      });
      virtual.set(tsconfig, JSON.stringify({ compilerOptions, files: [...names, ambient] }));
      const update = opened
        ? { fileChanges: { changed: [tsconfig], created: names, deleted } }
        : { openProjects: [tsconfig] };
      const previous = snapshot;
      snapshot = api.updateSnapshot(update);
      opened = true;
      previous?.dispose();
      project = snapshot.getProject(tsconfig);
      if (project === undefined) throw new Error("TypeScript 7 did not open the checked project");
      return names;
    });
  }

  function toDiagnostic(starts, diagnostic) {
    const { line, character } = lineAndColumn(starts, diagnostic.pos);
    return {
      source: "typescript",
      line: line + 1,
      column: character,
      length: diagnostic.end - diagnostic.pos,
      offset_utf16: diagnostic.pos,
      code: diagnostic.code,
      message: flatten(diagnostic),
    };
  }

  function diagnostics(file) {
    return guarded(() => {
      const program = project.program;
      const found = [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)];
      const starts = lineStarts(codes.get(file));
      return found.filter((d) => d.category === DiagnosticCategory.Error).map((d) => toDiagnostic(starts, d));
    });
  }

  return { load, diagnostics, close: stop };
}
