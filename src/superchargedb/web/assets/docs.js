// Browse: documents -> their Units -> one Unit (the viewer), cursor paging, a JSON link each.

import { h, clear, errorBox } from "./dom.js";
import { get } from "./api.js";
import { inWords } from "./locator.js";
import { openViewer } from "./viewer.js";
import { scopePicker } from "./pickers.js";

function jsonLink(path, params) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
  return h("a", { href: q ? `${path}?${q}` : path, target: "_blank", rel: "noopener", class: "json" }, "JSON");
}

export function docsView(main, me, go) {
  const scope = scopePicker(me);
  const out = h("section", { "aria-label": "Documents" });
  const load = (cursor) => listDocs(out, scope.value(), cursor, go);
  scope.el.querySelector("select").addEventListener("change", () => load(null));
  clear(main, h("h2", {}, "Documents"), scope.el, out);
  load(null);
}

async function listDocs(out, scope, cursor, go) {
  try {
    const r = await get("/v1/docs", { scope, cursor, limit: 50 });
    const rows = r.docs.map((d) => {
      const a = h("a", { href: `/ui/docs/${encodeURIComponent(d.doc_id)}?scope=${encodeURIComponent(d.scope)}` }, d.doc_id);
      a.addEventListener("click", (e) => (e.preventDefault(), go(a.getAttribute("href"))));
      return h("tr", {}, h("td", {}, a), h("td", {}, d.scope), h("td", {}, String(d.units)), h("td", {}, d.planes.join(", ")));
    });
    const table = h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["Document", "Scope", "Units", "Planes"].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows));
    const more = r.next_cursor ? h("button", { type: "button", on: { click: () => listDocs(out, scope, r.next_cursor, go) } }, "Next page") : "";
    clear(out, h("div", { class: "scroll" }, table), more, " ", jsonLink("/v1/docs", { scope, cursor }));
  } catch (e) {
    clear(out, errorBox(e));
  }
}

export async function unitsView(main, docId, scope, cursor = null) {
  const out = h("section", { "aria-label": "Units" });
  clear(main, h("h2", {}, `Document ${docId}`), out);
  try {
    const r = await get("/v1/units", { doc_id: docId, scope, cursor, limit: 50 });
    const items = r.units.map((u) => {
      const b = h("button", { type: "button", class: "link" }, `#${u.chunk.index + 1} ${u.plane} — ${inWords(u.locator)}`);
      b.addEventListener("click", () => openViewer(u.unit_id, u.locator, b));
      return h("li", {}, b, h("p", { class: "snippet" }, u.text.slice(0, 240)));
    });
    const more = r.next_cursor ? h("button", { type: "button", on: { click: () => unitsView(main, docId, scope, r.next_cursor) } }, "Next page") : "";
    clear(out, h("ol", { class: "units" }, items), more, " ", jsonLink("/v1/units", { doc_id: docId, scope, cursor }));
  } catch (e) {
    clear(out, errorBox(e));
  }
}
