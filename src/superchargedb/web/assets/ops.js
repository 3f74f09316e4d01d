// Operations, for those allowed: readiness, usage against quota, the tenant's figures, audit
// verification; for admins, principals and keys (a new key is shown once, then its prefix).

import { h, clear, errorBox } from "./dom.js";
import { get, request } from "./api.js";

function card(title, ...kids) {
  return h("section", { class: "card", "aria-label": title }, h("h3", {}, title), ...kids);
}

async function filled(el, fn) {
  try {
    clear(el, await fn());
  } catch (e) {
    clear(el, errorBox(e));
  }
}

// Figures in words: {used, quota|cap} as "8 of 50", nested objects as "key value · ...".
function fmt(v) {
  if (v === null || v === undefined) return "none";
  if (typeof v !== "object") return String(v);
  if (Array.isArray(v)) return v.map(fmt).join(", ");
  if ("used" in v && ("quota" in v || "cap" in v)) {
    const lim = v.quota ?? v.cap;
    return `${fmt(v.used)} of ${lim === null || lim === undefined ? "no limit" : lim}`;
  }
  return Object.entries(v).map(([k, x]) => `${k} ${fmt(x)}`).join(" · ");
}

function kv(obj) {
  return h("dl", { class: "kv" }, Object.entries(obj).map(([k, v]) => [h("dt", {}, k.replaceAll("_", " ")), h("dd", {}, fmt(v))]));
}

export function opsView(main, me) {
  const ready = h("div");
  const usage = h("div");
  const jobs = h("div");
  const cards = [card("Readiness", ready), card("Usage and quota", usage), card("Jobs", jobs)];
  clear(main, h("h2", {}, "Operations"), h("div", { class: "cards" }, cards));
  filled(ready, async () => {
    const r = await fetch("/readyz", { cache: "no-store" });
    return h("p", {}, r.ok ? "ready" : "not ready (index replay in progress)");
  });
  filled(usage, async () => kv((({ documents, units, object_bytes, media_pages, media_minutes, requests }) => ({ documents, units, object_bytes, media_pages, media_minutes, requests }))(await get("/v1/usage"))));
  const refresh = () =>
    filled(jobs, async () => {
      const r = await get("/v1/jobs", { limit: 20 });
      if (!r.jobs.length) return h("p", {}, "no jobs");
      return h("ul", { class: "jobs" }, r.jobs.map((j) => h("li", {}, `${j.doc_id || j.kind}: ${j.state}${j.progress != null && j.state === "running" ? ` ${Math.round(j.progress * 100)} %` : ""}${j.error ? ` (${j.error})` : ""}`)));
    });
  refresh();
  const timer = setInterval(() => (jobs.isConnected ? refresh() : clearInterval(timer)), 2000);
  if (!me.perms.includes("admin")) return;
  const stats = h("div");
  const audit = h("div");
  const people = h("div");
  main.querySelector(".cards").append(card("Tenant figures", stats), card("Audit chain", audit), card("Principals and keys", people));
  filled(stats, async () => kv(await get("/v1/stats")));
  const verify = h("button", { type: "button" }, "Verify the audit chain");
  const verdict = h("p", { "aria-live": "polite" });
  verify.addEventListener("click", () => filled(verdict, async () => kv(await get("/v1/audit/verify"))));
  clear(audit, verify, verdict);
  filled(people, async () => {
    const r = await get("/v1/admin/principals");
    return h("ul", { class: "principals" }, r.principals.map((p) => principalRow(p)));
  });
}

function principalRow(p) {
  const keys = h("div", { class: "keys" });
  const show = h("button", { type: "button" }, "Keys");
  const mint = h("button", { type: "button" }, "New key");
  show.addEventListener("click", () =>
    filled(keys, async () => {
      const r = await get(`/v1/admin/principals/${encodeURIComponent(p.name)}/keys`);
      return h("ul", {}, r.keys.map((k) => h("li", {}, `${k.prefix}… ${k.revoked_at ? "revoked" : "active"}`)));
    }),
  );
  mint.addEventListener("click", () =>
    filled(keys, async () => {
      const r = await (await request("POST", `/v1/admin/principals/${encodeURIComponent(p.name)}/keys`, { json: {} })).json();
      return h("p", { class: "once" }, "The new key, shown this once: ", h("code", {}, r.key));
    }),
  );
  return h("li", {}, h("strong", {}, p.name), ` ${p.tier} · ${(p.perms || []).join(", ")} · ${(p.scopes || []).join(", ")} `, show, " ", mint, keys);
}
