// holdfast console: one page over the admin API (schedhttp). No build
// step, no dependency. Every request carries the operator's bearer token,
// typed once and kept in sessionStorage. Data goes into the page through
// textContent only.
"use strict";

const STATUSES = ["succeeded", "failed", "running", "pending", "skipped", "missed", "abandoned"];
const SLOTS = 30;           // columns of a job's grid
const TOKEN_KEY = "holdfast.token";
const REFRESH_KEY = "holdfast.refresh";
const NOTE_MS = 6000;       // how long an action's note shows

const state = { selected: null, timer: null, busy: false, again: false, every: 3000, noteTimer: 0,
  reveal: false,     // scroll the slot's attempts into view once drawn (a deep link)
  runsSeq: 0,        // the newest renderRuns: an older one's answer is dropped
  jobs: [],          // the last GET /jobs
  job: null,         // the job whose runs are listed
  cursors: [],       // the cursors of the pages before the current one ("" for the first)
  cursor: "",        // the current page's cursor
  next: "" };        // the next page's cursor ("" when none)

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else e[k] = v;
  }
  for (const c of children) e.append(c === undefined || c === null ? "" : c);
  return e;
}

// fmt writes an API time (RFC 3339, UTC) as "2026-12-01 10:00:00Z";
// short keeps the time of day.
function fmt(t) { return t ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }
function short(t) { return t ? t.slice(11, 19) : ""; }
function ms(v) {
  if (v === undefined || v === null) return "";
  return v < 1000 ? v + " ms" : (v / 1000).toFixed(1) + " s";
}

class HTTPError extends Error {
  constructor(status, detail) { super(detail || ("HTTP " + status)); this.status = status; }
}

async function api(path, method, body) {
  const opts = { method: method || "GET", headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN_KEY) } };
  if (opts.method !== "GET") {
    // Every action is JSON, {} when it has no parameters: the handler
    // refuses any other Content-Type (415).
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body === undefined ? {} : body);
  }
  const res = await fetch(path, opts);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!res.ok) throw new HTTPError(res.status, data && data.detail);
  return data;
}

function setStatus(text, error) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", !!error);
}

// notify says how an action went, in a note of its own (the status line
// is the refresh's) that lets clicks through and leaves after NOTE_MS
// (an error after four times that).
function notify(text, error) {
  const n = $("notice");
  n.textContent = text;
  n.classList.toggle("error", !!error);
  n.hidden = false;
  clearTimeout(state.noteTimer);
  state.noteTimer = setTimeout(() => { n.hidden = true; }, error ? 4 * NOTE_MS : NOTE_MS);
}

function showLogin(message) {
  $("main").hidden = true;
  $("login").hidden = false;
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
  setStatus(message || "enter a bearer token", !!message);
  $("token").focus();
}

async function start() {
  $("login").hidden = true;
  $("main").hidden = false;
  await refresh();
  if (route()) { // a deep link, once the jobs are known
    state.reveal = true;
    await refresh();
  }
  schedule();
}

// schedule (re)arms the auto-refresh at state.every ms; 0 pauses it.
function schedule() {
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
  if (state.every > 0 && !$("main").hidden) state.timer = setInterval(refresh, state.every);
}

// signInFromFragment takes a token from the address's fragment
// (#token=...: a link the demo prints; fragments are never sent to a
// server nor logged by one), keeps it in sessionStorage, and removes it
// from the address bar and the history.
function signInFromFragment() {
  const m = /(^#|&)token=([^&]+)/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[2]));
  const rest = location.hash.replace(m[0], m[1] === "#" ? "#" : "").replace(/^#&/, "#");
  history.replaceState(null, "", location.pathname + location.search + (rest === "#" ? "" : rest));
}

// Deep links (the address's fragment): #/jobs/<job> lists a job's runs,
// with the list's filters as parameters (partition, status, from, to,
// limit: #/jobs/<job>?partition=bad&status=failed);
// #/jobs/<job>/runs/<slot>?partition=<p> opens one slot's attempts too.
function runLink(job, partition, slot) {
  return "#/jobs/" + enc(job) + "/runs/" + enc(slot) + (partition ? "?partition=" + enc(partition) : "");
}

// listLink is the address of job's runs as the filters select them.
function listLink(job) {
  const q = runsQuery("", Number($("f-limit").value) === 25 ? 0 : $("f-limit").value);
  const s = q.toString().replace(/%3A/g, ":"); // a colon is fine in a fragment, and easier to read
  return "#/jobs/" + enc(job) + (s ? "?" + s : "");
}

function route() {
  const hash = location.hash;
  const qi = hash.indexOf("?");
  const m = /^#\/jobs\/([^/]+)(?:\/runs\/(.+))?$/.exec(qi < 0 ? hash : hash.slice(0, qi));
  if (!m) return false;
  const params = new URLSearchParams(qi < 0 ? "" : hash.slice(qi + 1));
  const job = decodeURIComponent(m[1]);
  if (state.job !== job) openJob(job);
  if (m[2]) {
    state.selected = { job, partition: params.get("partition") || "", slot: decodeURIComponent(m[2]) };
  } else {
    if (state.selected) { state.selected = null; $("run").hidden = true; }
    setFilters(params);
  }
  return true;
}

// setFilters sets the runs list's filters from a list address's
// parameters, back to its first page.
function setFilters(params) {
  const local = (v) => v ? v.replace(/(\.\d+)?Z$/, "").slice(0, 19) : "";
  $("f-partition").value = params.has("partition") ? params.get("partition") : "*";
  if ($("f-partition").selectedIndex < 0) $("f-partition").value = "*";
  $("f-status").value = params.get("status") || "";
  if ($("f-status").selectedIndex < 0) $("f-status").value = "";
  $("f-from").value = local(params.get("from"));
  $("f-to").value = local(params.get("to"));
  $("f-limit").value = params.get("limit") || "25";
  if ($("f-limit").selectedIndex < 0) $("f-limit").value = "25";
  state.cursors = [];
  state.cursor = "";
}

// act runs an operator action after a confirm() dialog, then refreshes.
async function act(question, path, body) {
  if (!window.confirm(question)) return;
  try {
    await api(path, "POST", body);
    notify("done: " + question.replace(/\?$/, ""));
  } catch (e) {
    notify(e.message, true);
  }
  refresh();
}

function enc(s) { return encodeURIComponent(s); }

// refresh redraws the page from the API; called while a refresh runs, it
// runs once more after it (a route or an action wants the newest state).
async function refresh() {
  if (state.busy) { state.again = true; return; }
  state.busy = true;
  state.again = false;
  try {
    const page = await api("jobs");
    state.jobs = page.jobs;
    renderJobs(page.jobs);
    await renderGrids(page.jobs);
    if (state.job && !state.cursor) await renderRuns();
    if (state.selected) await renderRun();
    await renderLeases();
    setStatus("updated " + new Date().toISOString().slice(11, 19) + "Z" + (state.every > 0 ? ", every " + state.every / 1000 + " s" : ", refresh paused"));
  } catch (e) {
    if (e.status === 401 || e.status === 403) showLogin("the API refused the token: " + e.message);
    else setStatus(e.message, true);
  } finally {
    state.busy = false;
    if (state.again && !$("main").hidden) refresh();
  }
}

function renderJobs(jobs) {
  const body = $("jobs").tBodies[0];
  body.replaceChildren(...jobs.map((j) => {
    const last = j.last_status ? el("span", { class: "badge s-" + j.last_status }, j.last_status) : "";
    const toggle = j.paused
      ? el("button", { type: "button", "data-action": "resume", onclick: () => act("Resume " + j.name + "?", "jobs/" + enc(j.name) + "/resume") }, "Resume")
      : el("button", { type: "button", "data-action": "pause", onclick: () => act("Pause " + j.name + " on every replica?", "jobs/" + enc(j.name) + "/pause") }, "Pause");
    return el("tr", { "data-job": j.name },
      el("td", {}, el("a", { class: "job", href: "#/jobs/" + enc(j.name), title: "list its runs" }, el("strong", {}, j.name))),
      el("td", {}, j.schedule + (j.zone && j.zone !== "UTC" ? " (" + j.zone + ")" : "")),
      el("td", {}, fmt(j.next_fire)),
      el("td", {}, fmt(j.last_success)),
      el("td", {}, ms(j.lag_ms)),
      el("td", {}, last),
      el("td", { class: j.paused ? "paused" : j.ended ? "ended" : "", title: j.end_at ? "window ends " + fmt(j.end_at) : "" },
        j.paused ? "paused" : j.ended ? "ended" : "active"),
      el("td", {}, toggle));
  }));
}

function renderLegend() {
  $("legend").replaceChildren(...STATUSES.concat(["none"]).map((s) =>
    el("li", {}, el("span", { class: "swatch s-" + s }), s === "none" ? "no record" : s)));
}

// renderGrids draws, per job, its newest SLOTS slots: rows = partitions,
// columns = slots (newest left), one cell per (partition, slot) coloured
// by status; a slot one partition ran and another has no record of shows
// as an empty cell.
async function renderGrids(jobs) {
  const grids = [];
  for (const j of jobs) {
    const limit = Math.min(1000, SLOTS * Math.max(1, j.partitions.length));
    const page = await api("jobs/" + enc(j.name) + "/runs?limit=" + limit);
    const slots = [...new Set(page.runs.map((r) => r.slot))].sort().reverse().slice(0, SLOTS);
    const byCell = new Map(page.runs.map((r) => [(r.partition || "") + "\u0000" + r.slot, r]));
    const head = el("tr", {}, el("th", {}, ""), ...slots.map((s) => el("th", { class: "slot", title: fmt(s) }, short(s))));
    const rows = j.partitions.map((p) => el("tr", { "data-partition": p },
      el("th", { class: "part" }, p || "(default)", " ", j.ended ? "" : // an ended job has no slot left to trigger
        el("button", { type: "button", "data-action": "trigger", title: "run now",
          onclick: () => act("Trigger an extra run of " + j.name + (p ? " partition " + p : "") + " now?", "jobs/" + enc(j.name) + "/trigger", { partition: p, reason: "console" }) }, "▶")),
      ...slots.map((s) => cell(j.name, p, s, byCell.get(p + "\u0000" + s)))));
    const table = el("table", { class: "grid", "data-job": j.name }, el("thead", {}, head), el("tbody", {}, ...rows));
    const heading = el("h3", {}, j.name, j.paused ? el("span", { class: "badge s-missed" }, "paused") : "",
      j.ended ? el("span", { class: "ended" }, " ended " + fmt(j.end_at)) : "");
    grids.push(el("div", {}, heading, slots.length ? el("div", { class: "scroll" }, table) : el("p", { class: "hint" }, "no runs recorded yet")));
  }
  $("grids").replaceChildren(...grids);
}

function cell(job, partition, slot, run) {
  const status = run ? run.status : "none";
  const sel = state.selected;
  const selected = sel && sel.job === job && sel.partition === partition && sel.slot === slot;
  const attrs = { class: "cell s-" + status + (selected ? " selected" : ""), "data-partition": partition, "data-slot": slot,
    "data-status": status, title: (partition || "(default)") + " " + fmt(slot) + ": " + status + (run ? ", attempt " + run.attempt : "") };
  if (run) {
    attrs["data-attempt"] = String(run.attempt);
    attrs.onclick = () => { location.hash = runLink(job, partition, slot); };
  }
  return el("td", attrs, run && run.attempt > 1 ? String(run.attempt) : "");
}

async function renderRun() {
  const { job, partition, slot } = state.selected;
  const run = await api("jobs/" + enc(job) + "/runs/" + enc(slot) + "?partition=" + enc(partition));
  $("run").hidden = false;
  $("run").dataset.status = run.status;
  $("run-title").textContent = job + (partition ? " / " + partition : "") + " @ " + fmt(slot);
  $("run-link").href = runLink(job, partition, slot);
  $("run-summary").replaceChildren(el("span", { class: "badge s-" + run.status }, run.status), " attempt " + run.attempt,
    run.retry_at ? ", next attempt at " + fmt(run.retry_at) : "", run.reason ? ", reason: " + run.reason : "");
  $("retry").onclick = () => act("Retry " + job + (partition ? " partition " + partition : "") + " slot " + fmt(slot) + "?",
    "jobs/" + enc(job) + "/retry", { partition, slot, reason: "console" });
  $("attempts").tBodies[0].replaceChildren(...(run.attempts || []).map((a) => el("tr", { "data-n": String(a.n) },
    el("td", {}, String(a.n)), el("td", {}, el("span", { class: "badge s-" + a.status }, a.status)),
    el("td", {}, who(a)), el("td", {}, a.token), el("td", {}, fmt(a.started)), el("td", {}, fmt(a.heartbeat)),
    el("td", {}, fmt(a.finished)), el("td", { class: "error" }, (a.error_class ? a.error_class + ": " : "") + (a.error || "")))));
  if (state.reveal) { state.reveal = false; $("run").scrollIntoView(); }
}

// openJob shows the runs of job: its filters reset, the first page (the
// next refresh draws it).
function openJob(job) {
  state.job = job;
  state.cursors = [];
  state.cursor = "";
  state.next = "";
  if (state.selected && state.selected.job !== job) { state.selected = null; $("run").hidden = true; }
  const info = state.jobs.find((j) => j.name === job);
  const parts = info ? info.partitions : [];
  const opts = (all) => [el("option", { value: "*" }, all)].concat(parts.filter((p) => p !== "").map((p) => el("option", { value: p }, p)));
  $("f-partition").replaceChildren(...opts("all"));
  $("b-partition").replaceChildren(...(parts.length > 1 || (parts.length === 1 && parts[0] !== "") ? opts("all partitions") : [el("option", { value: "" }, "(default)")]));
  $("f-from").value = "";
  $("f-to").value = "";
  $("f-status").value = "";
  $("runs-section").hidden = false;
  $("runs-title").textContent = "Runs of " + job;
}

// utc turns a datetime-local value (read as UTC) into RFC 3339.
function utc(v) { return v ? (v.length === 16 ? v + ":00" : v) + "Z" : ""; }

// runsQuery is the query of the filters, for a page at cursor (and limit
// when given).
function runsQuery(cursor, limit) {
  const q = new URLSearchParams();
  if (limit !== 0) q.set("limit", String(limit || $("f-limit").value));
  const p = $("f-partition").value;
  if (p && p !== "*") q.set("partition", p);
  if ($("f-status").value) q.set("status", $("f-status").value);
  if ($("f-from").value) q.set("from", utc($("f-from").value));
  if ($("f-to").value) q.set("to", utc($("f-to").value));
  if (cursor) q.set("cursor", cursor);
  return q;
}

async function renderRuns() {
  const job = state.job, seq = ++state.runsSeq;
  const page = await api("jobs/" + enc(job) + "/runs?" + runsQuery(state.cursor));
  if (seq !== state.runsSeq) return; // a newer page or filter was asked for meanwhile
  state.next = page.next_cursor || "";
  $("runs").tBodies[0].replaceChildren(...page.runs.map((r) => {
    const row = el("tr", { "data-slot": r.slot, "data-partition": r.partition || "", "data-status": r.status },
      el("td", {}, el("a", { href: runLink(job, r.partition || "", r.slot) }, fmt(r.slot))),
      el("td", {}, r.partition || ""), el("td", {}, el("span", { class: "badge s-" + r.status }, r.status)),
      el("td", {}, String(r.attempt)), el("td", {}, r.reason || ""));
    return row;
  }));
  $("runs-next").disabled = !state.next;
  $("runs-first").disabled = !state.cursor;
  $("runs-prev").disabled = !state.cursor;
  $("runs-link").href = listLink(job);
  $("runs-page").textContent = "page " + (state.cursors.length + 1) + (page.runs.length ? "" : ": no runs");
  await renderChart(job, seq);
}

// renderChart draws the job's runs by status over time (those the
// filters select, but for status: the newest 500) as stacked bars, one per
// twentieth of their span.
async function renderChart(job, seq) {
  const q = runsQuery("", 500);
  q.delete("status");
  const page = await api("jobs/" + enc(job) + "/runs?" + q);
  if (seq !== state.runsSeq) return;
  const svg = $("chart");
  const ns = "http://www.w3.org/2000/svg";
  const shape = (tag, attrs) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  };
  if (!page.runs.length) { svg.replaceChildren(); return; }
  const times = page.runs.map((r) => Date.parse(r.slot));
  const lo = Math.min(...times), hi = Math.max(...times);
  const n = 20, width = svg.clientWidth || 600, height = 70;
  const span = Math.max(hi - lo, 1000);
  const buckets = Array.from({ length: n }, () => ({}));
  page.runs.forEach((r, i) => {
    const b = Math.min(n - 1, Math.floor((times[i] - lo) / span * n));
    buckets[b][r.status] = (buckets[b][r.status] || 0) + 1;
  });
  const most = Math.max(...buckets.map((b) => Object.values(b).reduce((a, c) => a + c, 0)), 1);
  const bw = width / n;
  const bars = [];
  buckets.forEach((b, i) => {
    let y = height;
    for (const s of STATUSES) {
      if (!b[s]) continue;
      const h = b[s] / most * height;
      y -= h;
      const rect = shape("rect", { x: String(i * bw + 1), y: String(y), width: String(Math.max(bw - 2, 1)), height: String(h),
        class: "s-" + s, "data-status": s, fill: getComputedStyle(document.documentElement).getPropertyValue("--" + s).trim() });
      const title = shape("title", {});
      title.textContent = b[s] + " " + s;
      rect.append(title);
      bars.push(rect);
    }
  });
  const label = (x, anchor, t) => { const e = shape("text", { x: String(x), y: String(height + 14), "text-anchor": anchor }); e.textContent = t; return e; };
  svg.replaceChildren(...bars, label(0, "start", fmt(new Date(lo).toISOString())), label(width, "end", fmt(new Date(hi).toISOString())));
}

async function backfill(ev) {
  ev.preventDefault();
  const job = state.job;
  const from = utc($("b-from").value), to = utc($("b-to").value);
  const p = $("b-partition").value;
  const info = state.jobs.find((j) => j.name === job);
  const parts = p === "*" ? info.partitions : [p];
  if (!window.confirm("Backfill " + job + (p === "*" ? ", every partition," : p ? " partition " + p : "") + " from " + from + " to " + to + "?")) return;
  let n = 0;
  try {
    for (const part of parts) {
      const res = await api("jobs/" + enc(job) + "/backfill", "POST", { partition: part, from, to, reason: $("b-reason").value });
      n += (res.slots || []).length;
    }
    notify("backfill asked for " + n + " slot" + (n === 1 ? "" : "s") + (parts.length > 1 ? " in " + parts.length + " partitions" : ""));
  } catch (e) {
    notify(e.message + (n ? " (after " + n + " slots asked for)" : ""), true);
  }
  refresh();
}

// who names the holder of a lease or an attempt: its holder label (the
// replica's name) and its owner id, a hash of the owner. The API never
// sends the owner itself: it is a write capability.
function who(x) {
  if (x.holder && x.owner_id) return x.holder + " (" + x.owner_id + ")";
  return x.holder || x.owner_id || "";
}

async function renderLeases() {
  let page;
  try {
    page = await api("leases?limit=200");
  } catch (e) {
    if (e.status !== 404) throw e;
    $("leases-note").hidden = false;
    $("leases-note").textContent = e.message;
    $("leases").tBodies[0].replaceChildren();
    return;
  }
  $("leases-note").hidden = true;
  $("leases").tBodies[0].replaceChildren(...page.leases.map((l) => el("tr", { "data-lease": l.name },
    el("td", {}, l.name), el("td", {}, l.held ? "held" : "free"), el("td", {}, who(l)),
    el("td", {}, l.held ? ms(l.ttl_ms) : ""), el("td", {}, l.token), el("td", {}, l.waiting ? "yes" : ""))));
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value);
  $("token").value = "";
  start();
});
$("forget").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); showLogin(); });
$("refresh").addEventListener("change", () => {
  state.every = Number($("refresh").value);
  sessionStorage.setItem(REFRESH_KEY, String(state.every));
  schedule();
  if (state.every > 0) refresh(); else setStatus("refresh paused");
});
const savedEvery = sessionStorage.getItem(REFRESH_KEY);
if (savedEvery !== null && [...$("refresh").options].some((o) => o.value === savedEvery)) {
  state.every = Number(savedEvery);
  $("refresh").value = savedEvery;
}
// Apply: the first page of the filtered list, whose address joins the
// history (Back returns to the previous filters).
$("runs-filter").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.cursors = [];
  state.cursor = "";
  if (state.selected) { state.selected = null; $("run").hidden = true; }
  const link = listLink(state.job);
  if (location.hash !== link) history.pushState(null, "", link);
  renderRuns().catch((e) => setStatus(e.message, true));
});
$("runs-prev").addEventListener("click", () => {
  if (!state.cursor) return;
  state.cursor = state.cursors.pop() || "";
  renderRuns().catch((e) => setStatus(e.message, true));
});
$("runs-next").addEventListener("click", () => {
  if (!state.next) return;
  state.cursors.push(state.cursor);
  state.cursor = state.next;
  renderRuns().catch((e) => setStatus(e.message, true));
});
$("runs-first").addEventListener("click", () => {
  state.cursors = [];
  state.cursor = "";
  renderRuns().catch((e) => setStatus(e.message, true));
});
$("backfill-form").addEventListener("submit", backfill);
window.addEventListener("hashchange", () => { if (route()) refresh(); });
$("f-status").append(...STATUSES.map((s) => el("option", { value: s }, s)));
renderLegend();
signInFromFragment();
if (sessionStorage.getItem(TOKEN_KEY)) { start(); } else showLogin();
