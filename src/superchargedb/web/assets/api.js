// The API from the page: the key lives in sessionStorage (this tab only, never a URL or a
// log) and goes out as a Bearer header; media elements use the session cookie instead.

const KEY = "scdb_key";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const key = {
  get: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

function url(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

async function failure(r) {
  let code = "http_error";
  let message = `HTTP ${r.status}`;
  try {
    const body = await r.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch (_) {
    /* not JSON: keep the status line */
  }
  return new ApiError(r.status, code, message);
}

export async function request(method, path, { params, json, headers, body } = {}) {
  const h = { ...(headers || {}) };
  const k = key.get();
  if (k) h.Authorization = `Bearer ${k}`;
  if (json !== undefined) {
    h["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  let r;
  try {
    r = await fetch(url(path, params), { method, headers: h, body, cache: "no-store", credentials: "same-origin" });
  } catch (e) {
    throw new ApiError(0, "network", "the server cannot be reached");
  }
  if (!r.ok) throw await failure(r);
  return r;
}

export async function get(path, params) {
  return (await request("GET", path, { params })).json();
}

export async function post(path, json, params) {
  return (await request("POST", path, { json, params })).json();
}

// Server-sent events from a POST (EventSource can neither POST nor send a header): each
// event is handed to onEvent(name, data) as soon as its blank line arrives.
export async function stream(path, json, params, onEvent) {
  const r = await request("POST", path, { json, params, headers: { Accept: "text/event-stream" } });
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      onEvent(name, data.length ? JSON.parse(data.join("\n")) : null);
    }
  }
}

// Uploads report progress, which fetch cannot: XMLHttpRequest for this one call.
export function upload(path, file, params, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open("PUT", url(path, params));
    x.setRequestHeader("Authorization", `Bearer ${key.get()}`);
    x.setRequestHeader("Content-Type", file.type || "application/octet-stream");
    x.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    x.onerror = () => reject(new ApiError(0, "network", "the upload was interrupted"));
    x.onload = () => {
      let body = null;
      try {
        body = JSON.parse(x.responseText);
      } catch (_) {
        /* keep null */
      }
      if (x.status >= 200 && x.status < 300) resolve(body);
      else {
        const e = (body && body.error) || {};
        reject(new ApiError(x.status, e.code || "http_error", e.message || `HTTP ${x.status}`));
      }
    };
    x.send(file);
  });
}
