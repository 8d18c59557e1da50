// Long-lived React render checker for bot_grpo_verl/rewards/react_render.py. Model-written code runs only inside a
// headless Chromium page: never in this Node process (esbuild only bundles it) and never in Python.
//
// Protocol: newline-delimited JSON on stdin and stdout, like worker.mjs. On start the worker writes one line
//   {"ready": true, "browser": str, "network": [str, ...] (the interfaces with an address it sees)}
// then, for each request line
//   {"id": int, "code": str, "export"?: str, "timeout_ms": int, "screenshot"?: bool}
// writes {"id": int, "started": true} when a page starts it (its timeout_ms counts from there), then answers it
// with one line
//   {"id": int, "status": "renders" | "blank" | "runtime_error" | "timeout" | "bundle_error",
//    "elements": int, "visible": int, "text_chars": int, "text": str (first 2,000 characters of the visible text),
//    "tags": [str, ...] (the distinct tag names in the DOM), "tag_counts": {str: int}, "shown_tags": [str, ...],
//    "export_kind": str, "default_kind": str (see HARNESS and PRELUDE),
//    "exception"?: {"message": str, "offset_utf16"?: int}, "screenshot"?: str (base64 PNG)}
// or {"id": int, "error": str} when the checker itself fails on that request (the browser died, a protocol
// error): the machinery's failure, never the sample's status. A renderer that crashes fails only its request
// ("runtime_error", "the page crashed": only that request's component ran in it).
//
// The component: the export named "export", else the default export, else the first export that is a component
// (PRELUDE). It is rendered with React 19 (react-dom/client) into an empty page, every prop it reads an empty array
// (its empty state), then explored (HARNESS); the result is read after each state settles. "renders": it showed
// something a person can see and raised no error in its first render; "blank": nothing visible (null, an empty
// fragment, empty or invisible elements); "runtime_error": a
// throw while rendering or in an effect, an unhandled rejection or an error event (the first one is reported,
// its position in the code mapped back through the bundle's source map); "timeout": the page did not finish
// within timeout_ms from its start on a page, screenshot and removal included (an endless loop, a render storm),
// after which its renderer is killed.
//
// Isolation (see docs/bad-input.md): this process and its browser have no network at all: the launcher
// (bot_grpo_verl/rewards/node_worker.py) starts it in a network namespace of its own whose only interface, loopback, is
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

// The bundle's entry: the prelude module first (it keeps what rendering needs from React and the page's built-ins
// before the component's module runs, and renders it: see PRELUDE), then the component's module.
const PRELUDE_NAME = "bot-grpo-render-prelude";
const ENTRY = `import { start } from "${PRELUDE_NAME}";
import * as Module from "component";
start(Module);`;

// The component: the export the request names ("export"; "default" for the default export), else the default
// export, else the first export that is a component. Its kind (what the value is, not what the source calls it) is
// reported: "function", "class", "memo", "forward_ref", "lazy", or what else the value is ("number", "string",
// "object", "undefined", ...). A component of any kind is rendered as an element whose props object is a proxy:
// every prop it reads is an array, empty in the first render (the component's empty state), then two sample items
// (its filled state; each item is a string "Item 1" / "Item 2" whose every other field is that string too). React
// gets the proxy itself, so function components, classes, memo() and forwardRef() all see the same props.
const PRELUDE = `const harness = window.__harness;
const { React, ReactDOM, ReactDOMClient, JSXRuntime } = window.__vendor;
const apply = Reflect.apply, keysOf = Object.keys, freezeField = Object.defineProperty, ProxyOf = Proxy;
const flushSync = ReactDOM.flushSync, jsx = JSXRuntime.jsx;
const MEMO = React.memo(() => null).$$typeof, FORWARD_REF = React.forwardRef(() => null).$$typeof;
const LAZY = React.lazy(() => null).$$typeof;
const report = (error) => harness.report(error);
const root = ReactDOMClient.createRoot(document.getElementById("root"), { __proto__: null, onUncaughtError: report, onCaughtError: report });
const renderRoot = root.render;
// React reads its error callbacks from the root's fiber, which the page can reach through any rendered node.
for (const field of ["onUncaughtError", "onCaughtError"]) freezeField(root._internalRoot, field, { __proto__: null, writable: false, configurable: false });
const bound = (text, method) => (...args) => apply(method, text, args);
const item = (label) => {
  const text = new String(label);
  return new ProxyOf(text, { __proto__: null, get: (target, key) => {
    if (key in target) { const value = target[key]; return typeof value === "function" ? bound(target, value) : value; }
    return typeof key === "string" && key !== "then" ? label : undefined;
  } });
};
let propsRead = false; // a component that reads no prop has no filled state to explore
const props = (values) => new ProxyOf({ __proto__: null }, { __proto__: null, get: (target, key) => {
  if (typeof key !== "string" || key === "then") return undefined;
  propsRead = true;
  return values();
} });
const emptyProps = props(() => []), filledProps = props(() => [item("Item 1"), item("Item 2")]);
const kind = (value) => {
  if (typeof value === "function") return value.prototype && value.prototype.isReactComponent ? "class" : "function";
  if (value === null) return "null";
  if (typeof value !== "object") return typeof value;
  const tag = value.$$typeof;
  return tag === MEMO ? "memo" : tag === FORWARD_REF ? "forward_ref" : tag === LAZY ? "lazy" : "object";
};
const COMPONENT_KINDS = { __proto__: null, function: true, class: true, memo: true, forward_ref: true, lazy: true };
export function start(Module) {
  const name = harness.exportName;
  const named = Boolean(name) && name in Module;
  let chosen = named ? Module[name] : Module.default;
  if (!named && !(kind(chosen) in COMPONENT_KINDS)) {
    const names = keysOf(Module);
    for (let index = 0; index < names.length; index += 1) {
      if (kind(Module[names[index]]) in COMPONENT_KINDS) {
        chosen = Module[names[index]];
        break;
      }
    }
  }
  const chosenKind = kind(chosen);
  harness.describe(chosenKind, kind(Module.default));
  if (!(chosenKind in COMPONENT_KINDS)) return report({ message: "the module exports no component" });
  const show = (values) => {
    const element = jsx(chosen, { __proto__: null });
    element.props = values;
    flushSync(() => apply(renderRoot, root, [element]));
  };
  harness.explore(() => {
    if (propsRead) show(filledProps);
    return propsRead;
  });
  try {
    show(emptyProps);
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
        // The prelude is the entry's alone: the component importing that name gets a stub.
        if (args.path === PRELUDE_NAME && args.importer === "<stdin>") return { path: PRELUDE_NAME, namespace: "prelude" };
        if (args.path === "component") return { path: "component", namespace: "sample" };
        if (args.path in VENDOR_MODULES) return { path: args.path, namespace: "vendor" };
        return { path: args.path, namespace: "stub" };
      });
      build.onLoad({ filter: /.*/, namespace: "sample" }, () => ({ contents: code, loader: "tsx", resolveDir: HERE }));
      build.onLoad({ filter: /.*/, namespace: "vendor" }, (args) => ({
        contents: `module.exports = ${VENDOR_MODULES[args.path]};`,
        loader: "js",
      }));
      build.onLoad({ filter: /.*/, namespace: "prelude" }, () => ({ contents: PRELUDE, loader: "js" }));
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

// The answer's fields of a page that showed nothing (not rendered, timed out, navigated away).
const NOTHING = { elements: 0, visible: 0, text_chars: 0, text: "", tags: [], tag_counts: {}, shown_tags: [], export_kind: "", default_kind: "" };

// The answer from the harness's result (see HARNESS): "runtime_error" with the first error (its offset in the code
// when its stack maps back), else "renders" when something is visible, else "blank".
function answerOf(result, map, code) {
  if (result.navigated) return { ...NOTHING, status: "runtime_error", exception: { message: "the page navigated away" } };
  const text = String(result.text);
  const counts = Object.fromEntries(result.tags.map(([tag, count]) => [String(tag), Number(count)]));
  const answer = {
    elements: result.elements,
    visible: result.visible,
    text_chars: text.trim().length,
    text: text.slice(0, MAX_TEXT),
    tags: Object.keys(counts),
    tag_counts: counts,
    shown_tags: result.shown_tags.map(([tag]) => String(tag)),
    export_kind: String(result.export_kind),
    default_kind: String(result.default_kind),
  };
  if (result.errors.length === 0) return { ...answer, status: result.visible > 0 ? "renders" : "blank" };
  const first = result.errors[0];
  const offset = codeOffset(first.stack, map, code);
  const exception = offset === undefined ? { message: first.message } : { message: first.message, offset_utf16: offset };
  return { ...answer, status: "runtime_error", exception };
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

// The component's document: the harness first, then React (put in by the host), then the bundle. The harness keeps
// every built-in and DOM accessor it uses before any model code can replace them (model code may replace any global,
// prototype method or accessor: String, Array.prototype, JSON, the DOM's getters, ...), gives the frame empty
// in-memory storage and cookies, and removes itself. It builds its result without the page's prototypes (object
// literals and descriptors without a prototype, values written with defineProperty) and posts it with a nonce the
// component cannot read.
//
// What it reports, read from the page (not from the source), after each of these states settles (three rounds of a
// message and a zero timeout: passive effects, the updates they schedule and zero timeouts run in between):
// the first render (every prop an empty array), the filled render (two sample items in every prop; only for a
// component that read a prop), then a click on
// each of the first MAX_CLICKS buttons (button, [role=button], checkbox, radio, summary) in turn:
//   errors: the first error of the first render and its effects (a throw, an unhandled rejection, an error event,
//     an error React caught); the later states explore with made-up data, so their errors do not count;
//   elements: the most elements under #root in any state; tags: each tag name's largest count in any state (every
//     element in the DOM); shown_tags: the same for elements with a box that can show (not under display:none, a
//     clip-path, a mask or a clip, visibility visible, opacity above 0 through their ancestors);
//   text: the visible text of every state (text nodes of one element joined, elements on lines of their own);
//   visible: the most visible things in any state: visible characters (see visibleText) and elements that show
//     themselves (form controls, media, images, svg) or paint a box (a background or a border that differs from
//     what is behind it), with a size of at least 1x1 px inside the page's scrollable area;
//   export_kind, default_kind: what the rendered export and the default export are (see PRELUDE).
const MAX_CLICKS = 4;
const MIN_TEXT_PX = 4; // a visible text's rendered height (a font of ~3.5 px: font-size 0 or a scale(0) has none)
const MIN_CONTRAST = 1.1; // WCAG's contrast ratio between a text's colour, blended over its background, and it
const HARNESS = (nonce, exportName) => `(() => {
  document.currentScript.remove();
  const apply = Reflect.apply, defineProperty = Reflect.defineProperty, describe = Object.getOwnPropertyDescriptor;
  const getter = (proto, key) => describe(proto, key).get;
  const call = (method, self, ...args) => apply(method, self, args);
  const parentWindow = window.parent, post = window.postMessage, later = window.setTimeout, toText = String;
  const toNumber = parseFloat, exec = RegExp.prototype.exec, INK = /\\S/, freeze = Object.freeze;
  const computed = window.getComputedStyle, cssValue = CSSStyleDeclaration.prototype.getPropertyValue;
  const byId = Document.prototype.getElementById, all = Element.prototype.querySelectorAll;
  const documentElement = getter(Document.prototype, "documentElement");
  const count = getter(NodeList.prototype, "length"), item = NodeList.prototype.item;
  const firstChild = getter(Node.prototype, "firstChild"), nextSibling = getter(Node.prototype, "nextSibling");
  const parentNode = getter(Node.prototype, "parentNode"), parentElement = getter(Node.prototype, "parentElement");
  const nodeType = getter(Node.prototype, "nodeType"), textData = getter(CharacterData.prototype, "data");
  const localName = getter(Element.prototype, "localName"), attribute = Element.prototype.getAttribute;
  const box = Element.prototype.getBoundingClientRect, click = HTMLElement.prototype.click;
  const clientWidth = getter(Element.prototype, "clientWidth"), clientHeight = getter(Element.prototype, "clientHeight");
  const scrollWidth = getter(Element.prototype, "scrollWidth"), scrollHeight = getter(Element.prototype, "scrollHeight");
  const left = getter(DOMRectReadOnly.prototype, "left"), right = getter(DOMRectReadOnly.prototype, "right");
  const top = getter(DOMRectReadOnly.prototype, "top"), bottom = getter(DOMRectReadOnly.prototype, "bottom");
  const range = call(Document.prototype.createRange, document);
  const selectContents = Range.prototype.selectNodeContents, rangeBox = Range.prototype.getBoundingClientRect;
  const errorMessage = getter(ErrorEvent.prototype, "message"), errorValue = getter(ErrorEvent.prototype, "error");
  const errorLine = getter(ErrorEvent.prototype, "lineno"), errorColumn = getter(ErrorEvent.prototype, "colno");
  const rejection = getter(PromiseRejectionEvent.prototype, "reason");
  const channel = new MessageChannel(), hop = MessagePort.prototype.postMessage;
  const canvas = call(Document.prototype.createElement, document, "canvas");
  canvas.width = 1;
  canvas.height = 1;
  const paint = call(HTMLCanvasElement.prototype.getContext, canvas, "2d", { __proto__: null, willReadFrequently: true });
  const fillStyle = describe(CanvasRenderingContext2D.prototype, "fillStyle").set;
  const fillRect = CanvasRenderingContext2D.prototype.fillRect, clearRect = CanvasRenderingContext2D.prototype.clearRect;
  const imageData = CanvasRenderingContext2D.prototype.getImageData, pixels = getter(ImageData.prototype, "data");
  const append = (list, value) => defineProperty(list, list.length, { __proto__: null, value, writable: true, enumerable: true, configurable: true });
  const text = (value) => { try { return typeof value === "string" ? value : toText(value); } catch { return "(a value that cannot be printed)"; } };

  // The first error of the first render: recorded before it is described (describing it may run model code).
  let recording = true, firstError = null;
  const report = (details) => {
    if (!recording || firstError !== null) return;
    firstError = { __proto__: null, message: "an error", stack: "" };
    try {
      const found = details();
      firstError = { __proto__: null, message: text(found.message), stack: text(found.stack || "") };
    } catch {}
  };
  const fromValue = (error) => () => ({ __proto__: null, message: error && error.message ? error.message : error, stack: error && error.stack });
  // The prelude's handle on the harness, given once: the prelude takes it before the component's module runs.
  let exportKind = "undefined", defaultKind = "undefined", fill = null;
  let handle = freeze({
    __proto__: null,
    exportName: ${JSON.stringify(exportName || "")},
    report: (error) => report(fromValue(error)),
    describe: (chosen, fallback) => { exportKind = text(chosen); defaultKind = text(fallback); },
    explore: (filled) => { fill = filled; },
  });
  defineProperty(window, "__harness", { __proto__: null, get: () => { const given = handle; handle = null; return given; } });
  addEventListener("error", (event) => report(() => {
    const error = call(errorValue, event);
    const stack = error && error.stack ? error.stack : "bundle.js:" + call(errorLine, event) + ":" + call(errorColumn, event);
    return { __proto__: null, message: call(errorMessage, event), stack };
  }), true);
  addEventListener("unhandledrejection", (event) => report(() => {
    const reason = call(rejection, event);
    return { __proto__: null, message: "unhandled rejection: " + text((reason && reason.message) || reason), stack: reason && reason.stack };
  }), true);

  // storage and cookies of the frame's own, in memory (the component's API: it may replace them)
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

  // Waiting for a state to settle: a message, then a zero timeout (after the component's own zero timeouts; the
  // message resets the timer nesting that Chromium clamps to 4 ms), three times.
  let resume = null;
  channel.port1.onmessage = () => { const then = resume; resume = null; call(later, window, then, 0); };
  const pause = (then) => { resume = then; call(hop, channel.port2, 0); };
  const settle = (then) => pause(() => pause(() => pause(then)));

  // Colours as the canvas paints them (any CSS colour syntax), cached.
  const colours = { __proto__: null };
  const rgba = (value) => {
    let found = colours[value];
    if (found === undefined) {
      call(clearRect, paint, 0, 0, 1, 1);
      call(fillStyle, paint, "rgba(0, 0, 0, 0)");
      call(fillStyle, paint, value);
      call(fillRect, paint, 0, 0, 1, 1);
      const data = call(pixels, call(imageData, paint, 0, 0, 1, 1));
      found = { __proto__: null, r: data[0], g: data[1], b: data[2], a: data[3] / 255 };
      colours[value] = found;
    }
    return found;
  };
  const blend = (over, alpha, under) => ({ __proto__: null, r: over.r * alpha + under.r * (1 - alpha), g: over.g * alpha + under.g * (1 - alpha), b: over.b * alpha + under.b * (1 - alpha), a: 1 });
  const linear = (channel) => { const c = channel / 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const luminance = (c) => 0.2126 * linear(c.r) + 0.7152 * linear(c.g) + 0.0722 * linear(c.b);
  const contrast = (a, b) => { const x = luminance(a), y = luminance(b); return x > y ? (x + 0.05) / (y + 0.05) : (y + 0.05) / (x + 0.05); };
  const WHITE = { __proto__: null, r: 255, g: 255, b: 255, a: 1 };
  const stands = (colour, alpha, under) => colour.a * alpha > 0 && contrast(blend(colour, colour.a * alpha, under), under) >= ${MIN_CONTRAST};

  const rectOf = (rect) => ({ __proto__: null, l: call(left, rect), t: call(top, rect), r: call(right, rect), b: call(bottom, rect) });
  const meet = (a, b) => ({ __proto__: null, l: a.l > b.l ? a.l : b.l, t: a.t > b.t ? a.t : b.t, r: a.r < b.r ? a.r : b.r, b: a.b < b.b ? a.b : b.b });
  const overlaps = (a, area) => { const both = meet(a, area); return both.r - both.l >= 1 && both.b - both.t >= 1; };
  const css = (style, name) => call(cssValue, style, name);
  const CLIPS = { __proto__: null, hidden: true, clip: true };
  const SHOWS_ITSELF = { __proto__: null, input: true, textarea: true, select: true, button: true, img: true, svg: true, canvas: true, video: true, audio: true, progress: true, meter: true, iframe: true, object: true, embed: true, hr: true };
  const SIDES = ["top", "right", "bottom", "left"];

  // What an element passes to its content: the opacity through its ancestors, the background behind it (unknown under
  // a background image), the area it is clipped to, and whether something hides it whole.
  const enter = (element, outer, viewport) => {
    const style = call(computed, window, element);
    if (css(style, "display") === "none" || css(style, "content-visibility") === "hidden") return null;
    const name = call(localName, element);
    const opacity = toNumber(css(style, "opacity"));
    const alpha = outer.alpha * (opacity >= 0 ? opacity : 1);
    const positioned = css(style, "position");
    const hidden = outer.hidden || css(style, "clip-path") !== "none" || css(style, "mask-image") !== "none" ||
      (css(style, "clip") !== "auto" && (positioned === "absolute" || positioned === "fixed"));
    let clip = outer.clip;
    if (CLIPS[css(style, "overflow-x")] || CLIPS[css(style, "overflow-y")]) {
      clip = meet(clip, name === "html" || name === "body" ? viewport : rectOf(call(box, element)));
    }
    const background = rgba(css(style, "background-color"));
    return {
      __proto__: null, style, name, alpha, hidden, clip, outer,
      background: background.a > 0 ? blend(background, background.a * alpha, outer.background) : outer.background,
      known: outer.known && css(style, "background-image") === "none",
      svg: outer.svg || name === "svg",
      shown: !hidden && alpha > 0 && css(style, "visibility") === "visible",
    };
  };
  const showsItself = (element, inner) => {
    if (!inner.shown) return false;
    const rect = rectOf(call(box, element));
    if (rect.r - rect.l < 1 || rect.b - rect.t < 1 || !overlaps(rect, inner.outer.clip)) return false;
    if (SHOWS_ITSELF[inner.name]) return inner.name !== "input" || call(attribute, element, "type") !== "hidden";
    if (!inner.known && inner.outer.known) return true; // a background image of its own
    const style = inner.style, under = inner.outer.background;
    if (stands(rgba(css(style, "background-color")), inner.alpha, under)) return true;
    for (let side = 0; side < 4; side += 1) {
      const edge = "border-" + SIDES[side];
      if (toNumber(css(style, edge + "-width")) > 0 && css(style, edge + "-style") !== "none" && stands(rgba(css(style, edge + "-color")), inner.alpha, under)) return true;
    }
    return false;
  };
  const visibleText = (node, inner) => {
    if (!inner.shown) return false;
    call(selectContents, range, node);
    const rect = rectOf(call(rangeBox, range));
    if (rect.r - rect.l < 1 || rect.b - rect.t < ${MIN_TEXT_PX} || !overlaps(rect, inner.clip)) return false;
    if (inner.svg || !inner.known) return true;
    const style = inner.style;
    return stands(rgba(css(style, "-webkit-text-fill-color")), inner.alpha, inner.background) ||
      (toNumber(css(style, "-webkit-text-stroke-width")) > 0 && stands(rgba(css(style, "-webkit-text-stroke-color")), inner.alpha, inner.background));
  };

  // One state of the page, added to what the earlier states showed.
  const seen = { __proto__: null, elements: 0, visible: 0, text: "", tags: { __proto__: null }, shown: { __proto__: null } };
  const texts = { __proto__: null }; // each state's text, once
  const most = (into, counts) => { for (const name in counts) if (!(into[name] >= counts[name])) into[name] = counts[name]; };
  const look = () => {
    const root = call(byId, document, "root");
    if (!root) return;
    const html = call(documentElement, document);
    const width = call(clientWidth, html), height = call(clientHeight, html);
    const viewport = { __proto__: null, l: 0, t: 0, r: width, b: height };
    const page = { __proto__: null, l: 0, t: 0, r: width > call(scrollWidth, html) ? width : call(scrollWidth, html), b: height > call(scrollHeight, html) ? height : call(scrollHeight, html) };
    let chain = null;
    for (let node = root; node !== null; node = call(parentElement, node)) chain = { __proto__: null, node, next: chain };
    let context = { __proto__: null, alpha: 1, hidden: false, clip: page, background: WHITE, known: true, svg: false, shown: true };
    for (let link = chain; link !== null && context !== null; link = link.next) context = enter(link.node, context, viewport);
    if (context === null) return;
    let elements = 0, visible = 0, words = "", lastParent = null;
    const tags = { __proto__: null }, shown = { __proto__: null };
    // Depth first in document order, without recursion (a deep tree) and without the page's arrays.
    let node = call(firstChild, root), stack = { __proto__: null, parent: root, context, next: null };
    while (node !== null) {
      const type = call(nodeType, node);
      let inner = null;
      if (type === 1) {
        elements += 1;
        const name = call(localName, node);
        tags[name] = (tags[name] || 0) + 1;
        inner = enter(node, stack.context, viewport);
        if (inner !== null && inner.shown) shown[name] = (shown[name] || 0) + 1;
        if (inner !== null && showsItself(node, inner)) visible += 1;
      } else if (type === 3) {
        const data = call(textData, node);
        if (call(exec, INK, data) === null) {
          if (lastParent === stack.parent) words += data; // spaces between the visible texts of one element
        } else if (visibleText(node, stack.context)) {
          visible += 1;
          words += (lastParent === stack.parent || words === "" ? "" : "\\n") + data;
          lastParent = stack.parent;
        }
      }
      const child = inner === null ? null : call(firstChild, node);
      if (child !== null) {
        stack = { __proto__: null, parent: node, context: inner, next: stack };
        node = child;
        continue;
      }
      let next = call(nextSibling, node);
      while (next === null && stack.parent !== root) {
        next = call(nextSibling, stack.parent);
        stack = stack.next;
      }
      node = next;
    }
    if (elements > seen.elements) seen.elements = elements;
    if (visible > seen.visible) seen.visible = visible;
    if (words !== "" && !texts[words]) seen.text = seen.text === "" ? words : seen.text + "\\n" + words;
    texts[words] = true;
    most(seen.tags, tags);
    most(seen.shown, shown);
  };
  const lookSafely = () => { try { look(); } catch {} };
  const finish = () => {
    const tags = [], shown = [];
    for (const name in seen.tags) append(tags, [name, seen.tags[name]]);
    for (const name in seen.shown) append(shown, [name, seen.shown[name]]);
    const errors = [];
    if (firstError !== null) append(errors, firstError);
    const result = { __proto__: null, elements: seen.elements, visible: seen.visible, text: seen.text, tags, shown_tags: shown, errors, export_kind: exportKind, default_kind: defaultKind };
    call(post, parentWindow, { __proto__: null, nonce: ${JSON.stringify(nonce)}, result }, "*");
  };
  const clickEach = (buttons, index) => {
    if (index >= buttons.length) return finish();
    try { call(click, buttons[index]); } catch {}
    settle(() => { lookSafely(); clickEach(buttons, index + 1); });
  };
  const explore = () => {
    lookSafely();
    recording = false;
    if (fill === null) return finish();
    const clickAll = () => {
      const root = call(byId, document, "root"), buttons = [];
      const found = root ? call(all, root, "button, [role=button], input[type=checkbox], input[type=radio], summary") : null;
      const size = found ? call(count, found) : 0;
      for (let index = 0; index < size && index < ${MAX_CLICKS}; index += 1) append(buttons, call(item, found, index));
      clickEach(buttons, 0);
    };
    let filled = true;
    try { filled = fill() === true; } catch {}
    if (filled) settle(() => { lookSafely(); clickAll(); });
    else clickAll();
  };
  addEventListener("DOMContentLoaded", () => settle(explore), true);
})();`;
const FRAME_PAGE = (nonce, exportName, js) => [`<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<script>${scriptText(HARNESS(nonce, exportName))}</script>
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
  const answer = answerOf(result, built.map, request.code);
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
