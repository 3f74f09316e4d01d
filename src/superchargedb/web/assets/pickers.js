// The scope picker (granted scopes, starting at the active one) and the planes filter.

import { h, labelled } from "./dom.js";

export function scopePicker(me) {
  const opts = [...new Set([me.active_scope, ...me.scopes])];
  const sel = h("select", { name: "scope" }, opts.map((s) => h("option", { value: s }, s)));
  sel.value = me.active_scope;
  return { el: labelled("Scope", sel), value: () => sel.value };
}

const PLANES = [
  ["text", "Text"],
  ["doc_visual", "Pages"],
  ["visual", "Images"],
  ["audio", "Audio and video"],
];

export function planePicker() {
  const boxes = PLANES.map(([v, label]) => {
    const b = h("input", { type: "checkbox", value: v, id: `plane-${v}` });
    return [b, h("label", { for: `plane-${v}` }, b, " ", label)];
  });
  const el = h("fieldset", { class: "planes" }, h("legend", {}, "Planes (none ticked: all)"), boxes.map((x) => x[1]));
  return { el, value: () => boxes.filter(([b]) => b.checked).map(([b]) => b.value) };
}

const MODALITIES = ["text", "markdown", "code", "log", "transcript", "image", "video_shot", "audio", "utterance", "pdf_page", "scan", "table", "figure"];

export function modalityPicker() {
  const sel = h("select", { name: "modality" }, h("option", { value: "" }, "any"), MODALITIES.map((m) => h("option", { value: m }, m.replace("_", " "))));
  return { el: labelled("Modality", sel), value: () => (sel.value ? [sel.value] : []) };
}
