// Search: hits with their snippets (only <mark> survives), ranks per leg and Locators.

import { h, clear, errorBox, labelled, snippetNodes } from "./dom.js";
import { post } from "./api.js";
import { inWords } from "./locator.js";
import { openViewer } from "./viewer.js";
import { scopePicker, planePicker, modalityPicker } from "./pickers.js";

export function searchView(main, me) {
  const q = h("input", { type: "search", name: "q", required: true, autocomplete: "off", maxlength: 4096 });
  const scope = scopePicker(me);
  const planes = planePicker();
  const modality = modalityPicker();
  const out = h("section", { "aria-label": "Results", "aria-live": "polite" });
  const form = h(
    "form",
    { role: "search", on: { submit: (e) => (e.preventDefault(), run(q.value, scope.value(), planes.value(), modality.value(), out)) } },
    labelled("Search", q),
    scope.el,
    planes.el,
    modality.el,
    h("button", { type: "submit" }, "Search"),
  );
  clear(main, h("h2", {}, "Search"), form, out);
  q.focus();
}

async function run(q, scope, planes, modalities, out) {
  clear(out, h("p", {}, "Searching…"));
  const body = { q, top_k: 20 };
  if (planes.length) body.planes = planes;
  if (modalities.length) body.modalities = modalities;
  try {
    const r = await post("/v1/search", body, { scope });
    const items = r.hits.map((hit, i) => {
      const open = h("button", { type: "button", class: "link" }, hit.source_uri);
      open.addEventListener("click", () => openViewer(hit.unit_id, hit.locator, open));
      const ranks = Object.entries(hit.ranks || {})
        .filter(([, v]) => v !== null)
        .map(([k, v]) => `${k} #${v}`)
        .join(" · ");
      return h(
        "li",
        { class: "hit" },
        h("div", { class: "hit-head" }, h("span", { class: "rank" }, `${i + 1}.`), " ", open, " — ", inWords(hit.locator)),
        h("p", { class: "snippet" }, hit.snippet ? snippetNodes(hit.snippet) : hit.text.slice(0, 300)),
        h("small", {}, `${hit.plane} · score ${hit.score} · ${ranks}`),
      );
    });
    clear(out, h("p", {}, `${r.hits.length} hits`), h("ol", { class: "hits" }, items));
  } catch (e) {
    clear(out, errorBox(e));
  }
}
