// Safe rendering: every piece of content becomes a text node; nothing is parsed as HTML.
// Ingested text, snippets, file names and error messages all pass through here (D-152).

const BLOCKED_ATTR = /^on|^style$|^srcdoc$/i;

export function h(tag, props = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") {
      for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      continue;
    }
    if (BLOCKED_ATTR.test(k)) throw new Error(`attribute ${k} is not allowed`);
    if ((k === "href" || k === "src") && !safeUrl(String(v))) throw new Error(`unsafe ${k}`);
    el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, kids);
  return el;
}

export function append(el, kids) {
  for (const kid of kids.flat(Infinity)) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

export function clear(el, ...kids) {
  el.replaceChildren();
  return append(el, kids);
}

// Same-origin paths only: an ingested javascript: or data: URL never reaches an attribute.
export function safeUrl(u) {
  return u.startsWith("/") && !u.startsWith("//");
}

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

export function decodeEntities(s) {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, e) => {
    if (e[0] === "#") {
      const n = e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : m;
    }
    return ENTITIES[e.toLowerCase()] ?? m;
  });
}

// A search snippet is escaped text with <mark>…</mark> around matches: those tags, and only
// those, become elements; every other character (a "<script>" included) stays text.
export function snippetNodes(snippet) {
  const out = [];
  let inMark = false;
  for (const part of String(snippet).split(/(<\/?mark>)/)) {
    if (part === "<mark>") inMark = true;
    else if (part === "</mark>") inMark = false;
    else if (part) {
      const t = decodeEntities(part);
      out.push(inMark ? h("mark", {}, t) : document.createTextNode(t));
    }
  }
  return out;
}

export function say(msg, isError = false) {
  const el = document.getElementById("status");
  el.className = isError ? "status error" : "status";
  el.textContent = msg;
}

export function errorBox(err) {
  const msg = err && err.message ? err.message : String(err);
  const code = err && err.code ? ` (${err.status || ""} ${err.code})` : "";
  return h("p", { class: "error", role: "alert" }, msg + code);
}

let uid = 0;
export function labelled(labelText, input) {
  const id = input.id || `f${++uid}`;
  input.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, labelText), input);
}
