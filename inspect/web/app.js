// The inspector's page: plain ES module, no build step. It reads the JSON
// API under /v1/inspect/ (docs/inspector.md) with the key it is given.

const $ = (sel) => document.querySelector(sel);
const state = { key: sessionStorage.getItem("interlingua.key") || "", open: null, abort: null, run: null, noted: {} };

function headers() {
  return state.key ? { Authorization: "Bearer " + state.key } : {};
}

function showError(msg) {
  $("#error").textContent = msg || "";
}

async function api(path, opts = {}) {
  const res = await fetch(path, { ...opts, headers: { ...headers(), ...(opts.headers || {}) } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new Error((body.code || res.status) + ": " + (body.message || res.statusText));
  }
  return body;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function ms(v) {
  return v === undefined || v === null ? "–" : v.toFixed(1) + " ms";
}

// The run list, polled.
async function refreshRuns() {
  try {
    const { runs } = await api("/v1/inspect/runs");
    const body = $("#runs tbody");
    body.replaceChildren();
    for (const r of runs) {
      const tr = el("tr");
      tr.dataset.run = r.id;
      if (r.id === state.open) tr.classList.add("selected");
      for (const v of [r.id, r.target, r.frontend, r.backend + (r.backend_type ? " (" + r.backend_type + ")" : ""),
        r.key || "–", r.status, ms(r.ttfd_ms), ms(r.duration_ms), String(r.events)]) {
        tr.append(el("td", "", v));
      }
      tr.addEventListener("click", () => openRun(r.id));
      body.append(tr);
    }
    showError("");
  } catch (e) {
    showError(e.message);
  }
}

// A chunk of wire as a row.
function chunkRow(c) {
  const row = el("div", "row dir-" + c.dir + (c.head ? " head" : ""));
  row.dataset.dir = c.dir;
  row.dataset.offset = c.offset;
  row.dataset.len = c.len;
  row.dataset.head = c.head ? "1" : "";
  const arrow = c.dir === "in" ? "→ in " : "← out";
  row.append(el("span", "meta arrow", arrow));
  row.append(el("span", "meta", (c.t_ms < 0 ? "" : "+") + c.t_ms.toFixed(1) + "ms"));
  if (!c.head) row.append(el("span", "meta", "@" + c.offset));
  const text = c.text !== undefined ? c.text : "[" + c.len + " bytes, base64] " + c.base64;
  row.append(el("div", "data", text));
  return row;
}

// Notes of the client's protocol that explain an event's feature.
function notesFor(feature) {
  const d = state.run && state.run.degradations;
  if (!feature || !d) return [];
  return d.frontend.filter((n) => n.features.includes(feature));
}

function eventRow(e) {
  const row = el("div", "row event");
  row.dataset.seq = e.seq;
  row.dataset.kind = e.kind;
  row.dataset.clientOffset = e.client_offset;
  row.dataset.upstreamOffset = e.upstream_offset;
  row.append(el("span", "meta", "#" + e.seq));
  row.append(el("span", "meta", "+" + e.t_ms.toFixed(1) + "ms"));
  row.append(el("span", "kind", e.kind + (e.feature ? " [" + e.feature + "]" : "")));
  if (e.text) row.append(el("span", "data delta", e.text));
  const off = el("div", "meta", "client @" + e.client_offset + " · upstream @" + e.upstream_offset);
  row.append(off);
  for (const n of notesFor(e.feature)) {
    // The note in full at the feature's first event, a pointer to it after.
    const first = state.noted[e.feature] || (state.noted[e.feature] = e.seq);
    const text = first === e.seq ? ": " + n.text : " (see #" + first + ")";
    row.append(el("div", "degradation", state.run.run.frontend + " cannot carry " + e.feature + text));
  }
  row.addEventListener("click", () => highlight(e));
  return row;
}

// highlight marks the event and the chunks of both wires its offsets fall in.
function highlight(e) {
  for (const r of document.querySelectorAll(".row.hl")) r.classList.remove("hl");
  const mark = (col, dir, off) => {
    for (const r of col.querySelectorAll(".row")) {
      const o = Number(r.dataset.offset), n = Number(r.dataset.len);
      if (r.dataset.dir === dir && !r.dataset.head && off >= o && off <= o + n) {
        r.classList.add("hl");
        r.scrollIntoView({ block: "nearest" });
        return;
      }
    }
  };
  mark($("#col-client"), "out", e.client_offset);
  mark($("#col-upstream"), "in", e.upstream_offset);
  const ev = $("#col-events").querySelector('[data-seq="' + e.seq + '"]');
  if (ev) ev.classList.add("hl");
}

function renderSummary(r) {
  $("#run-id").textContent = r.id;
  const st = $("#run-status");
  st.textContent = r.status + (r.code ? " (" + r.code + ")" : "");
  st.dataset.status = r.status;
  $("#run-facts").textContent = [
    "target " + r.target, "frontend " + r.frontend, "backend " + r.backend + (r.backend_type ? " (" + r.backend_type + ")" : ""),
    "key " + (r.key || "–"), "TTFD " + ms(r.ttfd_ms), "duration " + ms(r.duration_ms), r.events + " events",
  ].join(" · ") + (r.message ? " · " + r.message : "");
  $("#run-truncated").textContent = r.truncated.length ? "Truncated: " + r.truncated.join("; ") : "";
  $("#client-sub").textContent = r.client_recorded ? "" : "(not recorded: no client request on this instance)";
  $("#upstream-sub").textContent = r.upstream_recorded ? "" : "(nothing recorded: the run is on another instance, or its backend has no upstream)";
}

function renderNotes(d) {
  const fill = (node, title, notes) => {
    node.replaceChildren(el("h3", "", title));
    for (const n of notes) {
      const p = el("div", "note");
      p.append(el("b", "", n.features.join(", ") + ": "), document.createTextNode(n.text));
      node.append(p);
    }
  };
  fill($("#degradations-frontend"), "Client's wire (" + state.run.run.frontend + ")", d.frontend);
  fill($("#degradations-backend"), "Upstream's wire (" + (state.run.run.backend_type || state.run.run.backend) + ")", d.backend);
}

// apply appends an update of the live stream (or the first, whole one).
function apply(u) {
  if (!state.run) state.run = u;
  state.run.run = u.run;
  if (u.degradations) {
    state.run.degradations = u.degradations;
    renderNotes(u.degradations);
  }
  renderSummary(u.run);
  for (const c of u.client) $("#col-client").append(chunkRow(c));
  for (const e of u.events) $("#col-events").append(eventRow(e));
  for (const c of u.upstream) $("#col-upstream").append(chunkRow(c));
}

// stream reads the run's SSE stream (fetch, so the key travels as a header).
async function stream(id, signal) {
  const res = await fetch("/v1/inspect/runs/" + encodeURIComponent(id) + "/stream", { headers: headers(), signal });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error((body.code || res.status) + ": " + (body.message || res.statusText));
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "") + "\n";
      }
      if (event === "update") apply(JSON.parse(data));
      if (event === "end") {
        $("#run").dataset.ended = "1";
        return;
      }
    }
  }
}

async function openRun(id) {
  if (state.abort) state.abort.abort();
  state.abort = new AbortController();
  state.open = id;
  state.run = null;
  state.noted = {};
  location.hash = "run=" + encodeURIComponent(id);
  for (const c of ["#col-client", "#col-events", "#col-upstream", "#replay-wire"]) $(c).replaceChildren();
  $("#replay").hidden = true;
  $("#run").hidden = false;
  delete $("#run").dataset.ended;
  try {
    await stream(id, state.abort.signal);
  } catch (e) {
    if (e.name !== "AbortError") showError(e.message);
  }
}

async function replay() {
  const as = $("#replay-as").value;
  $("#replay").hidden = false;
  $("#replay-protocol").textContent = as + " …";
  $("#replay-wire").replaceChildren();
  try {
    const r = await api("/v1/inspect/runs/" + encodeURIComponent(state.open) + "/replay?as=" + encodeURIComponent(as), { method: "POST" });
    $("#replay-protocol").textContent = r.protocol;
    $("#replay-error").textContent = r.error || "";
    for (const c of r.wire) $("#replay-wire").append(chunkRow(c));
    $("#replay").dataset.protocol = r.protocol;
  } catch (e) {
    $("#replay-error").textContent = e.message;
  }
}

async function start() {
  $("#key").value = state.key;
  $("#key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.key = $("#key").value.trim();
    sessionStorage.setItem("interlingua.key", state.key);
    refreshRuns();
    loadProtocols();
  });
  $("#replay-go").addEventListener("click", replay);
  await Promise.all([refreshRuns(), loadProtocols()]);
  setInterval(refreshRuns, 1000);
  const m = location.hash.match(/run=([^&]+)/);
  if (m) openRun(decodeURIComponent(m[1]));
}

async function loadProtocols() {
  try {
    const { replay } = await api("/v1/inspect/protocols");
    const sel = $("#replay-as");
    sel.replaceChildren();
    for (const p of replay) sel.append(el("option", "", p));
  } catch (e) {
    showError(e.message);
  }
}

start();
