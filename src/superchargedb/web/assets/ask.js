// Ask: the answer streams in sentence by sentence as the model writes it (D-235); a [n] chip
// becomes a button that opens the viewer only once citation n has arrived (before that it is
// inert text, D-153).

import { h, clear, errorBox, labelled } from "./dom.js";
import { stream } from "./api.js";
import { inWords } from "./locator.js";
import { openViewer } from "./viewer.js";
import { scopePicker, planePicker, modalityPicker } from "./pickers.js";

export function askView(main, me) {
  const q = h("input", { type: "search", name: "q", required: true, autocomplete: "off", maxlength: 4096 });
  const scope = scopePicker(me);
  const planes = planePicker();
  const modality = modalityPicker();
  const out = h("section", { class: "answer", "aria-live": "polite", "aria-label": "Answer" });
  const form = h(
    "form",
    { class: "ask", role: "search", on: { submit: (e) => (e.preventDefault(), ask(q.value, scope.value(), planes.value(), modality.value(), out)) } },
    labelled("Question", q),
    scope.el,
    planes.el,
    modality.el,
    h("button", { type: "submit" }, "Ask"),
  );
  clear(main, h("h2", {}, "Ask"), form, out);
  q.focus();
}

function chip(n) {
  // A <span> until the citation is known: nothing to click, nothing to focus.
  return h("span", { class: "cite pending", "data-cite": n, title: "citation on its way" }, `[${n}]`);
}

function enable(out, c) {
  for (const el of out.querySelectorAll(`.cite.pending[data-cite="${c.index}"]`)) {
    const b = h(
      "button",
      { type: "button", class: "cite", "data-cite": c.index, "aria-label": `Citation ${c.index}: ${c.source_uri}, ${inWords(c.locator)}` },
      `[${c.index}]`,
    );
    b.addEventListener("click", () => openViewer(c.unit_id, c.locator, b));
    el.replaceWith(b);
  }
}

async function ask(text, scope, planes, modalities, out) {
  const sentences = h("p", { class: "sentences" });
  const sources = h("ol", { class: "sources", "aria-label": "Sources" });
  const meta = h("div", { class: "meta" });
  clear(out, sentences, meta, h("h3", {}, "Sources"), sources);
  const cites = new Map();
  const seen = new Set();
  const body = { q: text, answer: true, stream: true, top_k: 8 };
  if (planes.length) body.planes = planes;
  if (modalities.length) body.modalities = modalities;
  try {
    await stream("/v1/answer", body, { scope }, (name, data) => {
      if (name === "sentence") {
        const s = h("span", { class: data.supported === false ? "sentence unsupported" : "sentence" }, data.text.replace(/\s*$/, ""));
        for (const n of data.citations || []) s.append(" ", chip(n));
        s.append(flags(data));
        sentences.append(s, " ");
        for (const n of data.citations || []) if (cites.has(n)) enable(out, cites.get(n));
      } else if (name === "citation") {
        cites.set(data.index, data);
        enable(out, data);
        const k = `${data.unit_id} ${JSON.stringify(data.locator)}`;
        if (!seen.has(k)) {
          seen.add(k);
          const open = h("button", { type: "button", class: "link" }, `${data.source_uri}`);
          open.addEventListener("click", () => openViewer(data.unit_id, data.locator, open));
          sources.append(h("li", { value: data.index }, open, " — ", inWords(data.locator)));
        }
      } else if (name === "final") {
        finalMeta(meta, data);
        // A streamed sentence is judged against the whole answer only at the end (D-235).
        const all = (data.answer || {}).sentences || [];
        sentences.querySelectorAll(".sentence").forEach((el, i) => {
          if (!all[i]) return;
          const old = el.querySelector("small.flags");
          if (old) old.remove();
          el.append(flags(all[i]));
        });
      } else if (name === "error") {
        out.append(errorBox(data));
      }
    });
  } catch (e) {
    clear(out, errorBox(e));
  }
}

function flags(s) {
  const f = [];
  if (s.quoted) f.push("quoted");
  if (s.supported === false) f.push("unsupported");
  if (typeof s.support_score === "number") f.push(`support ${s.support_score.toFixed(2)}`);
  if (s.answers_question === false) f.push("does not answer the question");
  return f.length ? h("small", { class: "flags" }, ` (${f.join(", ")})`) : "";
}

function finalMeta(meta, final) {
  const a = final.answer || {};
  const bits = [];
  if (a.provider) bits.push(`provider: ${a.provider}`);
  if (a.extractive) bits.push("extractive");
  // What the system understood the question to ask (D-160): its type and focus, its parts.
  const qi = a.question || {};
  if (qi.type) bits.push(`question: ${qi.type}${qi.focus ? ` (${qi.focus})` : ""}`);
  if (Array.isArray(qi.parts) && qi.parts.length) bits.push(`${qi.parts.length} parts`);
  const kids = [h("p", { class: "understood" }, bits.join(" · "))];
  if (Array.isArray(a.unanswered_parts) && a.unanswered_parts.length) kids.push(h("p", { class: "note" }, `Not answered: ${a.unanswered_parts.map(String).join("; ")}`));
  if (a.refused) kids.push(h("p", { class: "refused", role: "note" }, `Refused${a.refusal_code ? ` (${a.refusal_code})` : ""}: ${a.refusal_reason || a.reason || "the sources do not support an answer"}`));
  const stages = ((final.trace || {}).stages || []).map((st) =>
    h("li", {}, h("span", { class: "stage" }, st.stage), ` ${Number(st.ms).toFixed(1)} ms`, st.cache ? ` · cache ${st.cache}` : "", st.cost_usd ? ` · $${st.cost_usd}` : "", st.detail ? ` · ${st.detail}` : ""),
  );
  kids.push(h("details", { class: "why" }, h("summary", {}, "why"), h("ol", { class: "timeline" }, stages)));
  clear(meta, kids);
}
