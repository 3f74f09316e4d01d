// Upload: drag-and-drop or pick files; per file the upload's progress, the derivation job's
// state and the Units it made, and any failure in words.

import { h, clear, labelled } from "./dom.js";
import { upload, post, get } from "./api.js";
import { scopePicker } from "./pickers.js";

export function uploadView(main, me) {
  const scope = scopePicker(me);
  const input = h("input", { type: "file", multiple: true });
  const list = h("ul", { class: "uploads", "aria-live": "polite", "aria-label": "Uploads" });
  const zone = h("div", { class: "drop", tabindex: "0", role: "button", "aria-label": "Drop files here, or press Enter to choose files" }, "Drop files here, or press Enter to choose");
  const start = (files) => [...files].forEach((f) => send(f, scope.value(), list));
  zone.addEventListener("dragover", (e) => (e.preventDefault(), zone.classList.add("over")));
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => (e.preventDefault(), zone.classList.remove("over"), start(e.dataTransfer.files)));
  zone.addEventListener("keydown", (e) => (e.key === "Enter" || e.key === " ") && (e.preventDefault(), input.click()));
  input.addEventListener("change", () => start(input.files));
  clear(main, h("h2", {}, "Upload"), scope.el, labelled("Files", input), zone, list);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function send(file, scope, list) {
  const bar = h("progress", { max: "1", value: "0", "aria-label": `Upload of ${file.name}` });
  const state = h("span", { class: "state" }, "uploading");
  list.append(h("li", {}, h("span", { class: "name" }, file.name), " ", bar, " ", state));
  const key = `${scope}/${file.name.replace(/[^\w.\-]+/g, "_")}`;
  try {
    await upload(`/v1/objects/${key.split("/").map(encodeURIComponent).join("/")}`, file, { scope }, (f) => (bar.value = f));
    bar.value = 1;
    state.textContent = "queued for ingest";
    const r = await post("/v1/ingest", { units: [{ source_uri: key, mime: file.type || undefined }] }, { scope });
    const res = r.results[0];
    if (!res.ok) throw res.error;
    if (!res.job_id) return void (state.textContent = `ingested: ${res.status}`);
    for (;;) {
      const job = await get(`/v1/jobs/${encodeURIComponent(res.job_id)}`);
      state.textContent = `job ${job.state}${job.progress != null ? ` ${Math.round(job.progress * 100)} %` : ""}`;
      if (job.state === "done") return void (state.textContent = `done: ${job.unit_ids.length} units`);
      if (job.state === "failed") throw new Error(`the derivation failed: ${job.error || "unknown error"}`);
      await sleep(700);
    }
  } catch (e) {
    state.className = "state error";
    state.textContent = `failed: ${e.message || String(e)}`;
  }
}
