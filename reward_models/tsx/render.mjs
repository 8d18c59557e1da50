// Long-lived React render checker for reward_models/react_render.py. Model-written code runs only inside a
// headless Chromium page: never in this Node process (esbuild only bundles it) and never in Python.
//
// Protocol: newline-delimited JSON on stdin and stdout, like worker.mjs. On start the worker writes one line
//   {"ready": true, "browser": str, "network": [str, ...] (the interfaces with an address it sees)}
// then, for each request line
//   {"id": int, "code": str, "export"?: str, "timeout_ms": int, "screenshot"?: bool}
// writes {"id": int, "started": true} when a page starts it (its timeout_ms counts from there), then answers it
// with one line
//   {"id": int, "status": "renders" | "blank" | "runtime_error" | "timeout" | "bundle_error",
//    "elements": int, "text_chars": int, "text": str (first 2,000 characters of the visible text),
//    "tags": [str, ...] (the distinct tag names rendered), "exception"?: {"message": str, "offset_utf16"?: int},
//    "screenshot"?: str (base64 PNG)}
// or {"id": int, "error": str} when the checker itself fails on that request (the browser died, a protocol
// error): the machinery's failure, never the sample's status. A renderer that crashes fails only its request
// ("runtime_error", "the page crashed": only that request's component ran in it).
//
// The component: the module's default export, else the export named "export", else its first exported
// function. It is rendered with React 19 (react-dom/client) into an empty page, every prop it reads an empty
// array (its empty state); the result is read after the
// render and its effects settle. "renders": it put at least one element or visible character on the page and
// raised no error; "blank": nothing visible (null, an empty fragment, empty elements); "runtime_error": a
// throw while rendering or in an effect, an unhandled rejection or an error event (the first one is reported,
// its position in the code mapped back through the bundle's source map); "timeout": the page did not finish
// within timeout_ms from its start on a page, screenshot and removal included (an endless loop, a render storm),
// after which its renderer is killed.
//
// Isolation (see docs/bad-input.md): this process and its browser have no network at all: the launcher
// (reward_models/node_worker.py) starts it in a network namespace of its own whose only interface, loopback, is
// down, and the ready line says which interfaces it sees (none), which the launcher checks. Chromium's flags
// (CHROMIUM_FLAGS: WebRTC without UDP, no host name resolves, a proxy that goes nowhere) and the request rules
// below are a second layer. Nothing here needs a socket: Playwright drives Chromium over a pipe.
// One browser and a pool of warm host pages, each in an incognito context of its own (its own renderer
// processes), taken by the requests first come, first served. A host never runs model code: each component gets a sandboxed iframe
// (scripts only: no popups, dialogs, navigation of the host or forms) whose document the host writes
// (srcdoc: no request), on an opaque origin of its own: it can reach no other frame's objects and has no
// storage or cookies, for which the harness gives it empty in-memory ones. Every network request is refused
// but the host's document; a frame that navigates away is reported. A host whose component timed out or failed
// is closed (its renderer ends, also one stuck in an endless loop) and replaced, and a browser that dies is
// started again. Chromium runs with its own sandbox off (--no-sandbox: this worker runs as root in CI); the page
// has no file access (no file:// URLs are served) and no network. The result comes from a harness that runs
// before the component and keeps the DOM's built-ins it reads, and reaches the host with a nonce the component
// cannot read.
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { networkInterfaces } from "node:os";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const HERE = path.dirname(fileURLToPath(import.meta.url));
// Hosts are subdomains of one reserved domain (RFC 2606; nothing is ever resolved or fetched: every request is
// answered or refused by the worker).
const DOMAIN = "render.example.com";
const MAX_TEXT = 2000;
const CHROMIUM_FLAGS = [
  "--headless=new",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-extensions",
  "--disable-dev-shm-usage",
  "--site-per-process",
  // A second layer (the first: this worker's network namespace, see the header): WebRTC sends no UDP except
  // through a proxy, no host name resolves, and whatever would open a connection goes to a proxy on a closed port
  // of the loopback (which, in the namespace, is down).
  "--webrtc-ip-handling-policy=disable_non_proxied_udp",
  "--host-resolver-rules=MAP * ~NOTFOUND",
  "--proxy-server=socks5://127.0.0.1:1",
  "--proxy-bypass-list=<-loopback>",
];
// Chromium gives each sandboxed frame of an opaque origin a renderer process of its own by default, which costs
// more CPU than the render (a process per component); the frames share their host's renderer instead, as frames
// of one site do. Playwright sets --disable-features itself, and Chromium keeps the last one: see launch().
const DISABLED_FEATURES = ["IsolateSandboxedIframes"];

const esbuild = require("esbuild");
const { chromium } = require("playwright-core");
const { SourceMapConsumer } = require("source-map-js");

// React and ReactDOM, bundled once; each component is bundled alone with `react` mapped onto them.
const VENDOR = esbuild.buildSync({
  stdin: {
    contents:
      "import * as React from 'react'; import * as JSXRuntime from 'react/jsx-runtime';" +
      "import * as ReactDOM from 'react-dom'; import * as ReactDOMClient from 'react-dom/client';" +
      "window.__vendor = { React, JSXRuntime, ReactDOM, ReactDOMClient };",
    resolveDir: HERE,
    loader: "js",
  },
  bundle: true,
  write: false,
  format: "iife",
  minify: true,
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "silent",
}).outputFiles[0].text;

const VENDOR_MODULES = {
  react: "window.__vendor.React",
  "react/jsx-runtime": "window.__vendor.JSXRuntime",
  "react/jsx-dev-runtime": "window.__vendor.JSXRuntime",
  "react-dom": "window.__vendor.ReactDOM",
  "react-dom/client": "window.__vendor.ReactDOMClient",
};

// Imports other than React (icon libraries, ./Card, CSS) become a stub whose every export is a component
// that renders its children, as the type check types them `any`.
// (esbuild's interop builds the import's namespace on the prototype of module.exports, so that is a proxy too.)
const STUB = `const Stub = (props) => (props && props.children) ?? null;
const named = (key) => typeof key === "string" && key !== "then" && key !== "constructor";
const any = new Proxy({}, { get: (target, key) => (named(key) ? Stub : undefined) });
module.exports = new Proxy({}, { getPrototypeOf: () => any, get: (target, key) => (key === "__esModule" ? true : named(key) ? Stub : undefined) });`;

const ENTRY = `import * as Module from "component";
const { ReactDOMClient, ReactDOM, JSXRuntime } = window.__vendor;
const exported = Object.entries(Module);
const Component = Module.default ?? Module[window.__exportName] ??
  exported.map(([, value]) => value).find((value) => typeof value === "function");
const report = window.__report;
if (typeof Component !== "function" && !(Component && typeof Component === "object" && Component.$$typeof)) {
  report({ message: "the module exports no component" });
} else {
  const root = ReactDOMClient.createRoot(document.getElementById("root"), { onUncaughtError: report, onCaughtError: report });
  // Props the request did not give: every prop the component reads is an empty array, which renders nothing,
  // maps to nothing and has a length of 0 (the component's empty state) instead of crashing on undefined.
  const props = new Proxy({}, { get: (target, key) => (typeof key === "string" && key !== "then" ? [] : undefined) });
  const isClass = typeof Component === "function" && Component.prototype && Component.prototype.isReactComponent;
  const Harness = typeof Component === "function" && !isClass ? () => Component(props) : () => JSXRuntime.jsx(Component, {});
  try {
    ReactDOM.flushSync(() => root.render(JSXRuntime.jsx(Harness, {})));
  } catch (error) {
    report(error);
  }
}`;

// Text that stays one script element's: a closing tag inside strings is escaped.
function scriptText(js) {
  return js.replace(/<\/(script)/gi, "<\\/$1");
}

function plugin(code) {
  return {
    name: "sample",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.path === "component") return { path: "component", namespace: "sample" };
        if (args.path in VENDOR_MODULES) return { path: args.path, namespace: "vendor" };
        return { path: args.path, namespace: "stub" };
      });
      build.onLoad({ filter: /.*/, namespace: "sample" }, () => ({ contents: code, loader: "tsx", resolveDir: HERE }));
      build.onLoad({ filter: /.*/, namespace: "vendor" }, (args) => ({
        contents: `module.exports = ${VENDOR_MODULES[args.path]};`,
        loader: "js",
      }));
      build.onLoad({ filter: /.*/, namespace: "stub" }, () => ({ contents: STUB, loader: "js" }));
    },
  };
}

async function bundle(code) {
  const result = await esbuild.build({
    stdin: { contents: ENTRY, loader: "js", resolveDir: HERE },
    bundle: true,
    write: false,
    format: "iife",
    sourcemap: "external",
    outfile: "bundle.js",
    jsx: "automatic",
    target: "es2022",
    plugins: [plugin(code)],
    logLevel: "silent",
  });
  const map = result.outputFiles.find((file) => file.path.endsWith(".map")).text;
  const js = result.outputFiles.find((file) => file.path.endsWith(".js")).text;
  return { js, map: new SourceMapConsumer(JSON.parse(map)) };
}

// The offset in the response's code of the first bundle.js frame of a stack, through the source map.
function codeOffset(stack, map, code) {
  const frame = /bundle\.js:(\d+):(\d+)/.exec(stack || "");
  if (!frame) return undefined;
  const original = map.originalPositionFor({ line: Number(frame[1]), column: Number(frame[2]) - 1 });
  if (!original.source || !original.source.includes("component") || original.line == null) return undefined;
  let offset = 0;
  for (let line = 1; line < original.line; line += 1) {
    const next = code.indexOf("\n", offset);
    if (next < 0) return undefined;
    offset = next + 1;
  }
  return offset + original.column;
}

// The host page: mounts one component's frame at a time (a frame costing about a third of the CPU of navigating
// the page itself), its document the component's with React put in (held once, as a string, never run by the
// host), and takes one report from that frame's window with that frame's nonce.
const HOST_PAGE = `<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<style>html, body { margin: 0; height: 100%; } iframe { position: fixed; inset: 0; width: 100%; height: 100%; border: 0; }</style>
<script>
const VENDOR = ${scriptText(JSON.stringify(scriptText(VENDOR)))};
let pending = null;
window.mount = (page, nonce) => new Promise((done) => {
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  const onMessage = (event) => {
    if (event.source === frame.contentWindow && event.data && event.data.nonce === nonce) pending(event.data.result);
  };
  pending = (result) => { removeEventListener("message", onMessage); pending = null; done(result); };
  addEventListener("message", onMessage);
  frame.srcdoc = page[0] + VENDOR + page[1];
  document.body.appendChild(frame);
});
window.unmount = () => {
  if (pending) pending(null);
  document.querySelectorAll("iframe").forEach((frame) => frame.remove());
};
</script></head><body></body></html>`;

// The component's document: the harness first (it keeps what it needs from the page's built-ins before any
// model code can replace them, gives the frame empty in-memory storage and cookies, and removes itself), then
// React (put in by the host), then the bundle, then the report after three tasks (passive effects, updates they
// schedule and zero timeouts run in between; nothing waits for a paint).
const FRAME_PAGE = (nonce, exportName, js) => [`<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<script>(() => {
  document.currentScript.remove();
  const apply = Reflect.apply, parentWindow = window.parent, post = window.postMessage;
  const push = Array.prototype.push, later = window.setTimeout;
  let firstError = null; // a variable, not an array: a setter on Array.prototype could swallow what is pushed
  const all = Element.prototype.querySelectorAll, byId = Document.prototype.getElementById;
  const count = Object.getOwnPropertyDescriptor(NodeList.prototype, "length").get, item = NodeList.prototype.item;
  const tagName = Object.getOwnPropertyDescriptor(Element.prototype, "tagName").get;
  const innerText = Object.getOwnPropertyDescriptor(HTMLElement.prototype, "innerText").get;
  const report = (error) => { if (firstError === null) firstError = { message: String(error.message), stack: String(error.stack || "") }; };
  Object.defineProperty(window, "__report", { value: (error) => report({ message: error && error.message ? error.message : error, stack: error && error.stack }) });
  Object.defineProperty(window, "__exportName", { value: ${JSON.stringify(exportName || "")} });
  const memoryStorage = () => {
    const items = new Map();
    return Object.freeze({
      get length() { return items.size; },
      key: (index) => [...items.keys()][index] ?? null,
      getItem: (key) => (items.has(String(key)) ? items.get(String(key)) : null),
      setItem: (key, value) => { items.set(String(key), String(value)); },
      removeItem: (key) => { items.delete(String(key)); },
      clear: () => items.clear(),
    });
  };
  const cookies = new Map();
  Object.defineProperty(window, "localStorage", { value: memoryStorage() });
  Object.defineProperty(window, "sessionStorage", { value: memoryStorage() });
  Object.defineProperty(document, "cookie", {
    get: () => [...cookies].map(([key, value]) => key + "=" + value).join("; "),
    set: (line) => { const [pair] = String(line).split(";"), at = pair.indexOf("="); if (at > 0) cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim()); },
  });
  addEventListener("error", (event) => report({ message: event.message, stack: event.error && event.error.stack ? event.error.stack : "bundle.js:" + event.lineno + ":" + event.colno }), true);
  addEventListener("unhandledrejection", (event) => report({ message: "unhandled rejection: " + String(event.reason && event.reason.message || event.reason), stack: event.reason && event.reason.stack }), true);
  addEventListener("DOMContentLoaded", () => apply(later, window, [() => apply(later, window, [() => apply(later, window, [() => {
    const root = apply(byId, document, ["root"]);
    const elements = root ? apply(all, root, ["*"]) : null;
    const size = elements ? apply(count, elements, []) : 0;
    const tags = [];
    for (let index = 0; index < size; index += 1) apply(push, tags, [apply(tagName, apply(item, elements, [index]), [])]);
    const result = { elements: size, text: root ? apply(innerText, root, []) : "", tags, errors: firstError ? [firstError] : [] };
    apply(post, parentWindow, [{ nonce: ${JSON.stringify(nonce)}, result }, "*"]);
  }, 0])])]));
})();</script>
</head><body><div id="root"></div><script>`, `</script><script>${scriptText(js)}
//# sourceURL=bundle.js</script></body></html>`];

const EXECUTABLE = process.env.BOT_GRPO_CHROMIUM || "/usr/bin/chromium";
let launchOptions = null;

// Playwright passes a --disable-features of its own and Chromium keeps only the last one given, so a first launch
// reads Playwright's list from the browser's command line (which --enable-automation lets it read), and every
// launch passes that list with ours added.
async function launch() {
  if (launchOptions === null) {
    const probe = await chromium.launch({ executablePath: EXECUTABLE, args: [...CHROMIUM_FLAGS, "--enable-automation"] });
    try {
      const session = await probe.newBrowserCDPSession();
      const { arguments: argv } = await session.send("Browser.getBrowserCommandLine");
      const playwrights = argv.filter((argument) => argument.startsWith("--disable-features="));
      if (playwrights.length > 1) throw new Error(`Playwright passed ${playwrights.length} --disable-features, expected at most one`);
      const features = [...playwrights.map((argument) => argument.slice("--disable-features=".length)), ...DISABLED_FEATURES];
      const args = [...CHROMIUM_FLAGS, `--disable-features=${features.join(",")}`];
      launchOptions = { executablePath: EXECUTABLE, args, ignoreDefaultArgs: playwrights };
    } finally {
      await probe.close();
    }
  }
  return chromium.launch(launchOptions);
}

let browserPromise = null;

function browser() {
  if (browserPromise === null) {
    browserPromise = launch().then((launched) => {
      launched.on("disconnected", () => {
        browserPromise = null;
        idle.length = 0; // the pool's pages died with the browser
        slots = 0;
        generation += 1;
      });
      return launched;
    });
    browserPromise.catch(() => {
      browserPromise = null;
    });
  }
  return browserPromise;
}

// The rejection of a call that outran its time (within): a page's limit, or a browser call's.
class Overtime extends Error {}

function within(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Overtime(`not done within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Warm host pages, each in an incognito context of its own (its own renderer processes): a host renders one
// component at a time; one whose component timed out or failed is closed (which ends its renderer, also one
// stuck in an endless loop) and replaced. Requests wait for a host first come, first served.
const POOL_SIZE = 4;
const SLOT_START_MS = 30_000; // a new host: its context, page and document (and a browser launch, after a crash)
const idle = [];
const waiters = []; // {resolve, reject} of the requests waiting for a host
let slots = 0;
let generation = 0; // the browser's launches: slots of an earlier one are gone
let slotNumbers = 0; // every slot ever made gets a host of its own

async function newSlot() {
  const number = slotNumbers++;
  const context = await (await browser()).newContext({ javaScriptEnabled: true, acceptDownloads: false });
  try {
    const host = `http://host-${number}.${DOMAIN}`;
    const slot = { context, host, navigatedAway: null, page: null, generation };
    // How a host was lost: "crashed", its renderer died (only its component's code ran there); "closed", its
    // context closed (the browser died, or the slot was discarded).
    slot.lost = new Promise((resolve) => context.on("close", () => resolve("closed")));
    await context.route("**/*", (route) => {
      const request = route.request();
      const url = new URL(request.url());
      if (url.origin !== slot.host || url.pathname !== "/" || request.frame().parentFrame() !== null) {
        return route.abort("blockedbyclient");
      }
      return route.fulfill({ status: 200, contentType: "text/html", body: HOST_PAGE });
    });
    context.on("page", (page) => {
      page.on("dialog", (dialog) => dialog.dismiss().catch(() => {}));
      if (slot.page !== null && page !== slot.page) page.close().catch(() => {});
    });
    slot.page = await context.newPage();
    const crashed = new Promise((resolve) => slot.page.on("crash", () => resolve("crashed")));
    slot.lost = Promise.race([slot.lost, crashed]);
    // A component that navigates its frame away (window.location = ...): the request is refused, and its report
    // never comes. A change of the fragment alone (tabs, anchors) stays on the page.
    slot.page.on("framenavigated", (frame) => {
      const away = frame.parentFrame() === slot.page.mainFrame() && frame.url().split("#")[0] !== "about:srcdoc";
      if (away && slot.navigatedAway) slot.navigatedAway();
    });
    await slot.page.goto(`${slot.host}/`, { waitUntil: "load" });
    return slot;
  } catch (failure) {
    context.close().catch(() => {});
    throw failure;
  }
}

// A new slot within SLOT_START_MS (one that comes later is closed).
async function startSlot() {
  const starting = newSlot();
  try {
    return await within(starting, SLOT_START_MS);
  } catch (failure) {
    starting.then((slot) => slot.context.close().catch(() => {}), () => {});
    throw failure;
  }
}

function acquire() {
  if (idle.length > 0) return Promise.resolve(idle.pop());
  if (slots < POOL_SIZE) {
    slots += 1;
    return startSlot().catch((failure) => {
      slots -= 1;
      throw failure;
    });
  }
  return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
}

function release(slot) {
  if (slot.generation !== generation) return discard(slot);
  const waiter = waiters.shift();
  if (waiter) waiter.resolve(slot);
  else idle.push(slot);
}

// A slot that cannot be trusted any more (a page that timed out, a failure): its context is closed, which
// ends its renderer, also one stuck in an endless loop; a waiting request gets a new slot (or the failure to make
// one, answered as the checker's error).
async function discard(slot) {
  await within(slot.context.close(), 10_000).catch(() => {});
  if (slot.generation === generation) slots -= 1;
  const waiter = waiters.shift();
  if (waiter) acquire().then(waiter.resolve, waiter.reject);
}

// Everything one request does on its host page, from mounting its frame to removing it: the report (or the
// frame's navigation away), the screenshot on request.
async function onPage(slot, request, built) {
  const nonce = randomUUID();
  const navigatedAway = new Promise((resolve) => {
    slot.navigatedAway = () => resolve({ navigated: true, elements: 0, text: "", tags: [], errors: [] });
  });
  const framePage = FRAME_PAGE(nonce, request.export, built.js);
  const reported = slot.page.evaluate(([parts, key]) => window.mount(parts, key), [framePage, nonce]);
  const result = await Promise.race([reported, navigatedAway]);
  const screenshot = request.screenshot ? (await slot.page.screenshot({ type: "png" })).toString("base64") : undefined;
  // The frame goes, which ends its timers (its storage and cookies were its own, in memory).
  await slot.page.evaluate(() => window.unmount());
  return { result, screenshot };
}

const NOTHING = { elements: 0, text_chars: 0, text: "", tags: [] };

// The answer of a page that failed: "timeout" when it outran its limit, "runtime_error" when its renderer
// crashed (only this request's component ran in it); anything else (the browser died, a protocol error) is the
// checker's failure, not the sample's, and is thrown.
async function failedPage(slot, failure) {
  if (failure instanceof Overtime) return { status: "timeout", ...NOTHING };
  const lost = await Promise.race([slot.lost, delay(1000)]);
  if (lost === "crashed") return { status: "runtime_error", ...NOTHING, exception: { message: "the page crashed" } };
  throw failure;
}

async function render(request) {
  let built;
  try {
    built = await bundle(request.code);
  } catch (failure) {
    const message = failure.errors && failure.errors[0] ? failure.errors[0].text : String(failure);
    return { status: "bundle_error", ...NOTHING, exception: { message } };
  }
  const slot = await acquire();
  let outcome;
  try {
    // The page's time limit counts from here, not from when the request was queued.
    send({ id: request.id, started: true });
    outcome = await within(onPage(slot, request, built), request.timeout_ms);
  } catch (failure) {
    try {
      return await failedPage(slot, failure);
    } finally {
      discard(slot);
    }
  } finally {
    slot.navigatedAway = null;
  }
  release(slot);
  const { result, screenshot } = outcome;
  const errors = result.navigated ? [{ message: "the page navigated away" }] : result.errors;
  const tags = [...new Set(result.tags.map((tag) => String(tag).toLowerCase()))];
  const text = String(result.text);
  const answer = { elements: result.elements, text_chars: text.trim().length, text: text.slice(0, MAX_TEXT), tags };
  if (errors.length > 0) {
    const first = errors[0];
    const offset = codeOffset(first.stack, built.map, request.code);
    answer.status = "runtime_error";
    answer.exception = offset === undefined ? { message: first.message } : { message: first.message, offset_utf16: offset };
  } else {
    answer.status = result.elements > 0 || answer.text_chars > 0 ? "renders" : "blank";
  }
  if (screenshot !== undefined) answer.screenshot = screenshot;
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
    return send({ id: null, error: `not a JSON request: ${failure}` });
  }
  try {
    send({ id: request.id, ...(await render(request)) });
  } catch (failure) {
    send({ id: request.id, error: `the render checker failed: ${failure && failure.message ? failure.message : failure}` });
  }
}

async function serve() {
  const launched = await browser();
  // The interfaces with an address this process sees: none in the network namespace its launcher made for it.
  send({ ready: true, browser: launched.version(), network: Object.keys(networkInterfaces()) });
  const lines = readline.createInterface({ input: process.stdin });
  const inFlight = new Set();
  for await (const line of lines) {
    if (!line.trim()) continue;
    const task = answer(line).finally(() => inFlight.delete(task));
    inFlight.add(task);
  }
  await Promise.allSettled([...inFlight]);
  await (await browser()).close();
}

serve().catch((failure) => {
  process.stderr.write(`render worker failed: ${failure && failure.stack ? failure.stack : failure}\n`);
  process.exit(1);
});
