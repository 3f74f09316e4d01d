// The console's entry: sign-in, the router over /ui/..., the header.

import { h, clear, errorBox, labelled, say } from "./dom.js";
import { key, get, request } from "./api.js";
import { askView } from "./ask.js";
import { searchView } from "./search.js";
import { docsView, unitsView } from "./docs.js";
import { uploadView } from "./upload.js";
import { opsView } from "./ops.js";
import { viewerFromLocation, closeViewer } from "./viewer.js";

const main = document.getElementById("main");
let me = null;

function signInView(problem) {
  const input = h("input", { type: "password", name: "key", required: true, autocomplete: "off", spellcheck: "false" });
  const form = h(
    "form",
    { class: "signin", on: { submit: (e) => (e.preventDefault(), signIn(input.value.trim())) } },
    labelled("API key", input),
    h("button", { type: "submit" }, "Sign in"),
  );
  clear(main, h("h2", {}, "Sign in"), h("p", {}, "The key stays in this tab only (session storage) and is sent as a Bearer header."), problem ? errorBox(problem) : "", form);
  input.focus();
}

async function signIn(k) {
  key.set(k);
  try {
    // The session cookie lets <img>, <audio> and <video> load under the same ACL.
    await request("POST", "/v1/session");
    await start();
  } catch (e) {
    key.clear();
    signInView(e);
  }
}

async function signOut() {
  try {
    await request("DELETE", "/v1/session");
  } catch (_) {
    /* the key may be revoked already: the cookie is cleared either way */
  }
  key.clear();
  sessionStorage.clear();
  location.assign("/ui/ask");
}

function go(path) {
  history.pushState({}, "", path);
  route();
}

function route() {
  if (!me) return;
  const path = location.pathname;
  for (const a of document.querySelectorAll("#nav a")) {
    if (path.startsWith(a.getAttribute("href"))) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (path.startsWith("/ui/units/")) {
    if (!main.childElementCount || main.querySelector(".loading")) askView(main, me);
    viewerFromLocation();
    return;
  }
  closeViewer();
  const doc = /^\/ui\/docs\/(.+)$/.exec(path);
  if (doc) return unitsView(main, decodeURIComponent(doc[1]), new URLSearchParams(location.search).get("scope"));
  if (path.startsWith("/ui/search")) return searchView(main, me);
  if (path.startsWith("/ui/docs")) return docsView(main, me, go);
  if (path.startsWith("/ui/upload")) return uploadView(main, me);
  if (path.startsWith("/ui/ops")) return opsView(main, me);
  return askView(main, me);
}

async function start() {
  me = await get("/v1/me");
  const out = h("button", { type: "button", class: "link" }, "Sign out");
  out.addEventListener("click", signOut);
  clear(document.getElementById("who"), h("span", {}, `${me.name} (${me.tier})`), " ", out);
  document.getElementById("nav").hidden = false;
  clear(main);
  route();
}

document.getElementById("nav").addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (!a) return;
  e.preventDefault();
  go(a.getAttribute("href"));
});
window.addEventListener("popstate", route);

if (key.get()) {
  start().catch((e) => {
    key.clear();
    signInView(e);
  });
} else {
  signInView(null);
}
say("");
