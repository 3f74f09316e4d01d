// The source viewer: a side panel showing the exact spot of a Locator, with a permalink
// (/ui/units/{id}?loc=...). A Locator that does not lie inside its Unit, or a kind with no
// view, is said so in words with the Unit's text: a highlight is never guessed (D-154).

import { h, clear, errorBox } from "./dom.js";
import { get, ApiError } from "./api.js";
import { inWords, toParam, fromParam, utf16Index, inside, boxesParam } from "./locator.js";

let opener = null;

export function permalink(unitId, loc) {
  const p = toParam(loc);
  return `/ui/units/${encodeURIComponent(unitId)}${p ? `?loc=${encodeURIComponent(p)}` : ""}`;
}

export function closeViewer() {
  const panel = document.getElementById("viewer");
  if (panel.hidden) return;
  panel.hidden = true;
  clear(panel);
  if (location.pathname.startsWith("/ui/units/")) history.pushState({}, "", sessionStorage.getItem("scdb_back") || "/ui/ask");
  if (opener && opener.isConnected) opener.focus();
  opener = null;
}

document.addEventListener("keydown", (e) => {
  if (e.key === "Escape") closeViewer();
});

export async function openViewer(unitId, loc, from = null, push = true) {
  opener = from;
  if (push) {
    if (!location.pathname.startsWith("/ui/units/")) sessionStorage.setItem("scdb_back", location.pathname);
    history.pushState({}, "", permalink(unitId, loc));
  }
  const panel = document.getElementById("viewer");
  const close = h("button", { type: "button", class: "close", "aria-label": "Close the viewer" }, "×");
  close.addEventListener("click", closeViewer);
  const body = h("div", { class: "viewer-body" }, h("p", {}, "Loading…"));
  clear(panel, h("div", { class: "viewer-head" }, h("h2", { id: "viewer-title" }, "Source"), close), body);
  panel.setAttribute("aria-labelledby", "viewer-title");
  panel.hidden = false;
  close.focus();
  try {
    const unit = await get(`/v1/units/${encodeURIComponent(unitId)}`);
    await render(body, unit, loc || unit.locator);
  } catch (e) {
    clear(body, errorBox(e instanceof ApiError && e.status === 404 ? new Error("This unit does not exist or you may not read it.") : e));
  }
}

export function viewerFromLocation() {
  const m = /^\/ui\/units\/([^/]+)$/.exec(location.pathname);
  if (!m) return false;
  const loc = fromParam(new URLSearchParams(location.search).get("loc"));
  openViewer(decodeURIComponent(m[1]), loc, null, false);
  return true;
}

function header(unit, loc) {
  return [
    h("p", { class: "source" }, h("strong", {}, unit.source_uri), " — ", inWords(loc)),
    h(
      "p",
      { class: "links" },
      h("a", { href: permalink(unit.unit_id, loc) }, "Permalink"),
      " · ",
      h("a", { href: `/v1/units/${encodeURIComponent(unit.unit_id)}`, target: "_blank", rel: "noopener" }, "JSON"),
    ),
  ];
}

function cannot(body, unit, loc, why) {
  clear(body, header(unit, loc), h("p", { class: "cannot", role: "note" }, `This spot cannot be shown: ${why}. The unit's text:`), h("pre", { class: "unit-text" }, unit.text));
}

// The Unit's own extent: a single-chunk text without a Locator spans its whole text.
function extent(unit) {
  if (unit.locator) return unit.locator;
  if (unit.chunk && unit.chunk.count === 1) return { kind: "char_span", start: 0, end: [...unit.text].length };
  return null;
}

async function render(body, unit, loc) {
  const own = extent(unit);
  if (!loc) return cannot(body, unit, loc, "the unit has no locator");
  if (!inside(loc, own)) return cannot(body, unit, loc, "the locator does not lie inside this unit");
  if (loc.kind === "char_span") return textView(body, unit, loc, own);
  if (loc.kind === "line_range") return linesView(body, unit, loc, own);
  if (loc.kind === "time_range") return mediaView(body, unit, loc);
  if (loc.kind === "bbox") return boxView(body, unit, loc);
  return cannot(body, unit, loc, `no view for a ${loc.kind} locator`);
}

// The document's text from its Units (each chunk is text[start:end] of the document, in code
// points); the trimmed whitespace between chunks is shown as line breaks.
async function documentText(unit, own) {
  if (!unit.chunk || unit.chunk.count <= 1) return { cps: [...unit.text], base: own.start };
  const chunks = [];
  let cursor = null;
  do {
    const page = await get("/v1/units", { doc_id: unit.doc_id, scope: unit.scope, cursor, limit: 100 });
    for (const u of page.units) if (u.locator && u.locator.kind === "char_span") chunks.push(u);
    cursor = page.next_cursor;
  } while (cursor);
  chunks.sort((a, b) => a.locator.start - b.locator.start);
  const cps = [];
  for (const c of chunks) {
    while (cps.length < c.locator.start) cps.push("\n");
    [...c.text].forEach((ch, i) => (cps[c.locator.start + i] = ch));
  }
  return { cps, base: 0 };
}

async function textView(body, unit, loc, own) {
  const { cps, base } = await documentText(unit, own);
  const text = cps.join("");
  // Code points -> UTF-16 units: the mark must cover exactly [start, end) of the source.
  const a = utf16Index(text, loc.start - base);
  const b = utf16Index(text, loc.end - base);
  if (a < 0 || b < 0) return cannot(body, unit, loc, "the span lies outside the text this unit came from");
  const mark = h("mark", { class: "hl", id: "hl" }, text.slice(a, b));
  clear(body, header(unit, loc), h("pre", { class: "doc-text", tabindex: "0", "aria-label": "Document text" }, text.slice(0, a), mark, text.slice(b)));
  mark.scrollIntoView({ block: "center" });
}

function linesView(body, unit, loc, own) {
  const lines = unit.text.split("\n");
  const first = own.start;
  const rows = lines.map((line, i) => {
    const n = first + i;
    const hit = n >= loc.start && n <= loc.end;
    return h("tr", { class: hit ? "hl" : "" }, h("td", { class: "ln" }, String(n)), h("td", {}, h("code", {}, line)));
  });
  clear(body, header(unit, loc), h("table", { class: "lines", "aria-label": "Lines" }, h("tbody", {}, rows)));
  const hit = body.querySelector("tr.hl");
  if (hit) hit.scrollIntoView({ block: "center" });
}

function objectPath(unit) {
  const link = unit.link || "";
  return link.startsWith("/v1/objects/") ? link.split("#")[0] : null;
}

function mediaView(body, unit, loc) {
  const src = objectPath(unit);
  if (!src) return cannot(body, unit, loc, "the unit has no stored object to play");
  const video = unit.modality === "video_shot" || (unit.mime || "").startsWith("video/");
  const player = h(video ? "video" : "audio", { controls: true, preload: "metadata", src, class: "player" });
  const start = loc.t_start_ms / 1000;
  const end = loc.t_end_ms / 1000;
  const problem = h("p", { class: "error", role: "alert", hidden: true });
  player.addEventListener("loadedmetadata", () => {
    player.currentTime = start;
  });
  player.addEventListener("timeupdate", () => {
    if (!player.paused && player.currentTime >= end) {
      player.pause();
      player.currentTime = end;
    }
  });
  player.addEventListener("error", () => {
    problem.hidden = false;
    problem.textContent = "The media could not be loaded: you may be signed out or not allowed to read it.";
  });
  clear(body, header(unit, loc), player, problem, keyframe(unit), h("p", { class: "utterance" }, h("span", { class: "times" }, `${inWords(loc)} `), unit.text));
}

// A video shot's keyframe (its middle frame, kept at derivation, D-236), through the preview
// route: the same ACL as the Unit.
function keyframe(unit) {
  if (unit.modality !== "video_shot" || !unit.preview) return null;
  const idx = (unit.locator || {}).shot_idx;
  const shot = typeof idx === "number" ? `shot ${idx + 1}` : "the shot";
  const img = h("img", { src: unit.preview, alt: `Keyframe of ${shot} of ${unit.source_uri}`, class: "keyframe" });
  const caption = h("figcaption", {}, `Keyframe of ${shot} (its middle frame)`);
  img.addEventListener("error", () => {
    caption.textContent = "The keyframe could not be loaded: you may be signed out or not allowed to read it.";
    caption.className = "error";
    caption.setAttribute("role", "alert");
  });
  return h("figure", { class: "keyframe" }, img, caption);
}

// The cited page with the citation's boxes drawn by the server, in the coordinates that made
// them (D-255): every line box of `boxes` when present, else the union `box`; the Unit's own
// box needs no parameter (one cached rendering for every viewer of it).
function citedPreview(unit, loc) {
  const own = (unit.locator || {}).box;
  const boxes = Array.isArray(loc.boxes) && loc.boxes.length ? loc.boxes : [loc.box];
  if (boxes.length === 1 && JSON.stringify(boxes[0]) === JSON.stringify(own)) return unit.preview;
  return `${unit.preview}?boxes=${encodeURIComponent(boxesParam(boxes))}`;
}

function boxView(body, unit, loc) {
  if (!unit.preview) return cannot(body, unit, loc, "the unit has no page image");
  const cited = citedPreview(unit, loc);
  const img = h("img", { src: cited, alt: `Page ${loc.page} of ${unit.source_uri} with the cited box`, class: "page" });
  const problem = h("p", { class: "error", role: "alert", hidden: true });
  img.addEventListener("error", () => {
    problem.hidden = false;
    problem.textContent = "The page image could not be loaded: you may be signed out or not allowed to read it.";
  });
  // Previous/next page: the same preview route (same ACL) with ?page=; the box stays on its page.
  let page = loc.page;
  const where = h("span", { "aria-live": "polite" }, `page ${page}`);
  const prev = h("button", { type: "button", disabled: page <= 1 }, "Previous page");
  const next = h("button", { type: "button" }, "Next page");
  const turn = (to) => {
    const was = page;
    page = to;
    prev.disabled = page <= 1;
    where.textContent = page === loc.page ? `page ${page} (the cited box)` : `page ${page}`;
    img.alt = `Page ${page} of ${unit.source_uri}${page === loc.page ? " with the cited box" : ""}`;
    problem.hidden = true;
    img.onerror = () => {
      if (page !== was) turn(was);
      problem.hidden = false;
      problem.textContent = `There is no page ${to} to show.`;
      img.onerror = null;
    };
    img.src = page === loc.page ? cited : `${unit.preview}?page=${page}`;
  };
  prev.addEventListener("click", () => turn(page - 1));
  next.addEventListener("click", () => turn(page + 1));
  const pager = h("p", { class: "pager" }, prev, " ", where, " ", next);
  const kids = [header(unit, loc), problem, pager, h("div", { class: "page-wrap" }, img)];
  const n = Array.isArray(loc.boxes) ? loc.boxes.length : 0;
  if (n) kids.push(h("p", { class: "note" }, `The picture boxes the ${n === 1 ? "line" : `${n} lines`} the citation rests on.`));
  kids.push(h("p", { class: "unit-text" }, unit.text));
  clear(body, kids);
}
