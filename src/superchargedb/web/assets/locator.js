// Locators in words, in permalinks, and the code point <-> UTF-16 conversion the text viewer
// needs (the server counts code points; JavaScript strings index UTF-16 units).

function clock(ms) {
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

export function inWords(loc) {
  if (!loc) return "whole unit";
  switch (loc.kind) {
    case "bbox":
      return `p. ${loc.page}`;
    case "time_range":
      return `${clock(loc.t_start_ms)}-${clock(loc.t_end_ms)}`;
    case "line_range":
      return loc.start === loc.end ? `line ${loc.start}` : `lines ${loc.start}-${loc.end}`;
    case "char_span":
      return `characters ${loc.start}-${loc.end}`;
    default:
      return String(loc.kind);
  }
}

// ?loc= of a permalink: "char_span:10-20", "line_range:4-9", "time_range:1200-3400",
// "bbox:3:x0,y0,x1,y1", or with a citation's line boxes "bbox:3:x0,y0,x1,y1:a0,b0,a1,b1;...".
export function toParam(loc) {
  if (!loc) return "";
  if (loc.kind === "bbox") {
    const lines = Array.isArray(loc.boxes) && loc.boxes.length ? `:${boxesParam(loc.boxes)}` : "";
    return `bbox:${loc.page}:${(loc.box || []).join(",")}${lines}`;
  }
  if (loc.kind === "time_range") return `time_range:${loc.t_start_ms}-${loc.t_end_ms}`;
  return `${loc.kind}:${loc.start}-${loc.end}`;
}

const NUM = "(-?\\d+(?:\\.\\d+)?)";
const BOX = "-?\\d+(?:\\.\\d+)?(?:,-?\\d+(?:\\.\\d+)?){3}";

// Boxes as the preview's ?boxes= and a permalink carry them: "x0,y0,x1,y1;x0,y0,x1,y1".
export function boxesParam(boxes) {
  return boxes.map((b) => b.join(",")).join(";");
}

export function fromParam(s) {
  if (!s) return null;
  let m = new RegExp(`^(char_span|line_range|time_range):(\\d+)-(\\d+)$`).exec(s);
  if (m) {
    const [a, b] = [Number(m[2]), Number(m[3])];
    if (b < a) return null;
    return m[1] === "time_range" ? { kind: m[1], t_start_ms: a, t_end_ms: b } : { kind: m[1], start: a, end: b };
  }
  m = new RegExp(`^bbox:(\\d+):${NUM},${NUM},${NUM},${NUM}(?::(${BOX}(?:;${BOX})*))?$`).exec(s);
  if (m) {
    const loc = { kind: "bbox", page: Number(m[1]), box: m.slice(2, 6).map(Number) };
    if (m[6]) loc.boxes = m[6].split(";").map((b) => b.split(",").map(Number));
    return loc;
  }
  return null;
}

// The UTF-16 index of code point `cp` in `s` (a non-BMP character is two units).
export function utf16Index(s, cp) {
  let units = 0;
  let seen = 0;
  for (const ch of s) {
    if (seen === cp) return units;
    units += ch.length;
    seen += 1;
  }
  return seen === cp ? units : -1;
}

// Whether `inner` lies inside `outer` (the Unit's own Locator): a permalink cannot point a
// highlight outside the Unit it names.
export function inside(inner, outer) {
  if (!inner || !outer || inner.kind !== outer.kind) return false;
  if (inner.kind === "time_range") return inner.t_start_ms >= outer.t_start_ms && inner.t_end_ms <= outer.t_end_ms;
  if (inner.kind === "bbox") {
    // 0.01: the localizer rounds clipped boxes to 2 decimals (the server allows the same).
    const [b, e] = [outer.box, 0.01];
    const within = (a) => Array.isArray(a) && a.length === 4 && a[0] >= b[0] - e && a[1] >= b[1] - e && a[2] <= b[2] + e && a[3] <= b[3] + e;
    return inner.page === outer.page && within(inner.box) && (inner.boxes || []).every(within);
  }
  return inner.start >= outer.start && inner.end <= outer.end;
}
