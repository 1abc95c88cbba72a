// fleetmind dashboard: plain JS + canvas, no build step, no network beyond this server.
// Views: live (WebSocket /api/live/ws), replay of a run folder (scrubber), comparison table.
// State hook for tests and debugging: window.fleetmind (mode, tick, frame, draws, ...).
"use strict";

const $ = (id) => document.getElementById(id);
const ACTIONS = ["wait", "up", "down", "left", "right"];
const DELTAS = [[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]];
const COLOURS = {
  floor: "#ecece8", grid: "#d6d6d0", wall: "#404048", pickup: "#d6be8c",
  station: "#78be78", charger: "#f0d450", load: "#1e1e1e", shield: "#e61414",
  openLoad: "#8b5a1a", broken: "#888888",
};
const CHUNK = 500;
const LIVE_EMPTY = "none recorded yet (the live recording is written every 50 ticks)";

const hook = (window.fleetmind = {
  mode: null, source: null, tick: null, frame: null, draws: 0, ready: false,
  ticks: 0, decisions: [], callLog: null, error: null, speed: null, state: null,
});

// ------------------------------------------------------------------ small helpers
function showError(message) {
  const box = $("error");
  hook.error = message || null;
  if (!message) { box.hidden = true; box.textContent = ""; return; }
  box.hidden = false;
  box.textContent = message;
}

async function api(path) {
  let res;
  try {
    res = await fetch(path, { headers: { Accept: "application/json" } });
  } catch (err) {
    throw new Error(`cannot reach the dashboard server (${err})`);
  }
  let body = null;
  try { body = await res.json(); } catch (_) { body = null; }
  if (!res.ok) {
    const msg = body && body.error ? body.error : `${res.status} ${res.statusText}`;
    throw new Error(msg);
  }
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number") {
    if (Number.isInteger(v)) return String(v);
    return Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(3);
  }
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

// Same colours as fleetmind.sim.render.robot_colours: golden-ratio hues, cycling S and V.
function robotColour(i) {
  const hue = (i * 0.618033988749895) % 1;
  const s = [0.9, 0.6, 0.75][i % 3];
  const v = [0.95, 0.75, 0.85][Math.floor(i / 3) % 3];
  const sector = Math.floor(hue * 6);
  const f = hue * 6 - sector;
  const p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  const rgb = [[v, t, p], [q, v, p], [p, v, t], [p, q, v], [t, p, v], [v, p, q]][sector % 6];
  return `rgb(${rgb.map((x) => Math.round(x * 255)).join(",")})`;
}

// ------------------------------------------------------------------ map drawing
const view = { rows: [], robots: [], cell: 20 };

function setMap(rows, robots) {
  view.rows = rows;
  view.robots = robots;
  const canvas = $("map");
  const h = rows.length, w = rows.length ? rows[0].length : 1;
  const avail = Math.max(300, canvas.parentElement.clientWidth - 4);
  view.cell = Math.max(6, Math.min(36, Math.floor(avail / w)));
  canvas.width = w * view.cell;
  canvas.height = h * view.cell;
  hook.cell = view.cell;
  drawFrame(null);
}

function drawFrame(frame) {
  const canvas = $("map");
  const ctx = canvas.getContext("2d");
  const px = view.cell;
  ctx.fillStyle = COLOURS.floor;
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  view.rows.forEach((line, r) => {
    for (let c = 0; c < line.length; c++) {
      const ch = line[c];
      const fill = ch === "#" ? COLOURS.wall : ch === "x" ? COLOURS.pickup
        : ch === "S" ? COLOURS.station : ch === "C" ? COLOURS.charger : null;
      if (fill) { ctx.fillStyle = fill; ctx.fillRect(c * px, r * px, px, px); }
      ctx.strokeStyle = COLOURS.grid;
      ctx.lineWidth = 1;
      ctx.strokeRect(c * px + 0.5, r * px + 0.5, px - 1, px - 1);
    }
  });
  if (!frame) return;
  // Loads waiting on shelves (open orders, live view).
  for (const [r, c] of frame.open || []) {
    ctx.strokeStyle = COLOURS.openLoad;
    ctx.lineWidth = Math.max(2, px / 6);
    ctx.strokeRect(c * px + px * 0.2, r * px + px * 0.2, px * 0.6, px * 0.6);
  }
  const n = frame.pos.length;
  // Targets: a ring in the robot's colour and a faint line from the robot.
  for (let i = 0; i < n; i++) {
    const t = frame.target && frame.target[i];
    if (!t) continue;
    const col = robotColour(i);
    const [r, c] = frame.pos[i];
    ctx.strokeStyle = col;
    ctx.globalAlpha = 0.35;
    ctx.lineWidth = Math.max(1, px / 10);
    ctx.beginPath();
    ctx.moveTo(c * px + px / 2, r * px + px / 2);
    ctx.lineTo(t[1] * px + px / 2, t[0] * px + px / 2);
    ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.lineWidth = Math.max(2, px / 7);
    ctx.strokeRect(t[1] * px + px * 0.12, t[0] * px + px * 0.12, px * 0.76, px * 0.76);
  }
  // Robots: discs; carried load a dark square; shield override a red ring; broken grey.
  for (let i = 0; i < n; i++) {
    const [r, c] = frame.pos[i];
    const cx = c * px + px / 2, cy = r * px + px / 2;
    ctx.fillStyle = frame.broken && frame.broken[i] ? COLOURS.broken : robotColour(i);
    ctx.beginPath();
    ctx.arc(cx, cy, px * 0.4, 0, 2 * Math.PI);
    ctx.fill();
    if (frame.carrying && frame.carrying[i]) {
      ctx.fillStyle = COLOURS.load;
      const s = px * 0.34;
      ctx.fillRect(cx - s / 2, cy - s / 2, s, s);
    }
    if (frame.broken && frame.broken[i]) {
      ctx.strokeStyle = "#222";
      ctx.lineWidth = Math.max(1, px / 12);
      ctx.beginPath();
      ctx.moveTo(cx - px * 0.25, cy - px * 0.25); ctx.lineTo(cx + px * 0.25, cy + px * 0.25);
      ctx.moveTo(cx + px * 0.25, cy - px * 0.25); ctx.lineTo(cx - px * 0.25, cy + px * 0.25);
      ctx.stroke();
    }
    if (frame.shield && frame.shield[i]) {
      ctx.strokeStyle = COLOURS.shield;
      ctx.lineWidth = Math.max(2, px / 7);
      ctx.beginPath();
      ctx.arc(cx, cy, px * 0.5, 0, 2 * Math.PI);
      ctx.stroke();
      // The move the executor wanted, as a short red stub.
      const d = DELTAS[frame.proposed ? frame.proposed[i] : 0] || [0, 0];
      if (d[0] || d[1]) {
        ctx.beginPath();
        ctx.moveTo(cx, cy);
        ctx.lineTo(cx + d[1] * px * 0.7, cy + d[0] * px * 0.7);
        ctx.stroke();
      }
    }
    if (px >= 16) {
      ctx.fillStyle = frame.carrying && frame.carrying[i] ? "#fff" : "#111";
      ctx.font = `${Math.floor(px * 0.38)}px sans-serif`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText(String(i), cx, cy + 0.5);
    }
  }
  hook.frame = frame;
  hook.tick = frame.tick;
  hook.draws += 1;
  canvas.dataset.tick = String(frame.tick);
  $("tick-label").textContent = `tick ${frame.tick}`;
}

// ------------------------------------------------------------------ charts
function drawChart(canvas, xs, series, opts = {}) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height;
  const pad = { l: 44, r: 8, t: 8, b: 20 };
  ctx.clearRect(0, 0, W, H);
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, W, H);
  if (!xs.length) {
    ctx.fillStyle = "#888"; ctx.font = "12px sans-serif"; ctx.fillText("no data yet", 50, H / 2);
    return;
  }
  let lo = Infinity, hi = -Infinity;
  for (const s of series) for (const y of s.ys) { if (y < lo) lo = y; if (y > hi) hi = y; }
  if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
  if (hi - lo < 1e-9) { hi += 0.5; lo -= 0.5; }
  const x0 = xs[0], x1 = Math.max(xs[xs.length - 1], x0 + 1);
  const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * (W - pad.l - pad.r);
  const Y = (y) => H - pad.b - ((y - lo) / (hi - lo)) * (H - pad.t - pad.b);
  ctx.strokeStyle = "#ccc"; ctx.lineWidth = 1;
  ctx.strokeRect(pad.l, pad.t, W - pad.l - pad.r, H - pad.t - pad.b);
  if (lo < 0 && hi > 0) {
    ctx.strokeStyle = "#e4e4e4"; ctx.beginPath(); ctx.moveTo(pad.l, Y(0)); ctx.lineTo(W - pad.r, Y(0)); ctx.stroke();
  }
  ctx.fillStyle = "#555"; ctx.font = "11px sans-serif"; ctx.textAlign = "right";
  ctx.fillText(fmt(hi), pad.l - 3, pad.t + 9);
  ctx.fillText(fmt(lo), pad.l - 3, H - pad.b);
  ctx.textAlign = "left"; ctx.fillText(`tick ${x0}`, pad.l, H - 5);
  ctx.textAlign = "right"; ctx.fillText(`${x1}`, W - pad.r, H - 5);
  for (const s of series) {
    ctx.strokeStyle = s.colour; ctx.lineWidth = s.width || 1.5;
    ctx.beginPath();
    s.ys.forEach((y, k) => { const f = k ? "lineTo" : "moveTo"; ctx[f](X(xs[k]), Y(y)); });
    ctx.stroke();
  }
  if (opts.cursor !== undefined && opts.cursor !== null) {
    ctx.strokeStyle = "rgba(0,0,0,0.45)"; ctx.setLineDash([3, 3]);
    ctx.beginPath(); ctx.moveTo(X(opts.cursor), pad.t); ctx.lineTo(X(opts.cursor), H - pad.b); ctx.stroke();
    ctx.setLineDash([]);
  }
  if (opts.legend) {
    ctx.textAlign = "left"; ctx.font = "11px sans-serif";
    let lx = pad.l + 6;
    for (const s of series) {
      if (!s.label) continue;
      ctx.fillStyle = s.colour; ctx.fillRect(lx, pad.t + 4, 10, 3);
      ctx.fillStyle = "#333"; ctx.fillText(s.label, lx + 13, pad.t + 9);
      lx += ctx.measureText(s.label).width + 24;
    }
  }
}

const charts = { ticks: [], reward: [], throughput: [], rate: [], cursor: null };

function redrawCharts() {
  const n = charts.reward.length;
  drawChart($("reward-chart"), charts.ticks,
    charts.reward.map((ys, i) => ({ ys, colour: robotColour(i), label: n <= 8 ? `r${i}` : null })),
    { cursor: charts.cursor, legend: true });
  drawChart($("throughput-chart"), charts.ticks, [
    { ys: charts.throughput, colour: "#2d5fa8", width: 2, label: "so far" },
    { ys: charts.rate, colour: "#d98a1a", label: "recent" },
  ], { cursor: charts.cursor, legend: true });
}

function setKpis(pairs) {
  const table = $("kpis");
  table.replaceChildren(...pairs.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, fmt(v)))));
}

// ------------------------------------------------------------------ decisions and call log
function renderDecisions(list, onPick, empty = "no planner decisions recorded") {
  hook.decisions = list;
  $("decision-count").textContent = list.length ? `(${list.length})` : "";
  const box = $("decisions");
  if (!list.length) { box.replaceChildren(el("div", { class: "muted" }, empty)); return; }
  box.replaceChildren(...list.map((d) => {
    const tags = [];
    if (d.calls) tags.push(el("span", { class: "tag llm" }, `${d.calls} LLM call${d.calls > 1 ? "s" : ""}`));
    if (d.fallback) tags.push(el("span", { class: "tag fallback" }, "fallback"));
    if (d.call_errors || d.failure) tags.push(el("span", { class: "tag err" }, d.failure || `${d.call_errors} error(s)`));
    const label = `t${d.tick} ${d.kind}${d.events && d.events.length ? " [" + d.events.join(",") + "]" : ""} → ${d.source || "-"}`;
    return el("button", { class: "decision", type: "button", "data-tick": d.tick, onclick: () => onPick(d) }, label, ...tags);
  }));
}

// Each incident of a recorded run (metrics.json incident_log): who handled it, its recovery,
// and the desk's conversation (role, phase, content) with the actions and their results.
function renderIncidents(list) {
  list = list || [];
  hook.incidents = list;
  $("incidents-card").hidden = !list.length;
  $("incident-count").textContent = list.length ? `(${list.length})` : "";
  $("incidents").replaceChildren(...list.map((i) => {
    const rec = i.recovery_ticks === null || i.recovery_ticks === undefined ? "unresolved" : `recovered in ${i.recovery_ticks} ticks`;
    const head = `t${i.tick} ${i.kind} → ${i.handler}${i.fallback ? " (fallback: " + i.fallback + ")" : ""}, ${rec}`;
    const lines = (i.conversation || []).map((m) =>
      el("li", { class: "talk" }, el("b", {}, `${m.role} [${m.phase}] `), String(m.content || "").slice(0, 300)));
    const acts = (i.actions || []).map((a) =>
      el("li", { class: "action" }, `${a.source}: ${a.tool}(${JSON.stringify(a.args)}) → ${a.result}`));
    return el("details", { class: "incident" }, el("summary", {}, head), el("div", { class: "muted" }, i.summary), el("ul", {}, ...lines, ...acts));
  }));
}

function pre(text) { return el("pre", {}, typeof text === "string" ? text : JSON.stringify(text, null, 2)); }

async function openCallLog(runName, tick) {
  const panel = $("call-log");
  const body = $("call-log-body");
  panel.hidden = false;
  body.replaceChildren(el("p", {}, "loading..."));
  let d;
  try {
    d = await api(`/api/run/decision?run=${encodeURIComponent(runName)}&tick=${tick}`);
  } catch (err) {
    body.replaceChildren(el("p", { class: "bad" }, String(err.message || err)));
    return;
  }
  hook.callLog = d;
  $("call-log-title").textContent = `Decision at tick ${d.tick} (${d.kind})`;
  const summary = el("div", { class: "summary" },
    el("p", {}, `events: ${(d.events || []).join(", ") || "-"}; plan source: ${d.source || "-"}; applied at tick ${fmt(d.applied_tick)}; latency ${fmt(d.latency_ms)} ms; tokens ${fmt(d.tokens)}`),
    el("p", {}, "fallback: ", el("span", { class: d.fallback ? "bad" : "good" }, d.fallback ? "yes (solver plan used)" : "no"),
      d.failure ? el("span", { class: "bad" }, ` — ${d.failure}`) : null),
    d.errors && d.errors.length ? el("p", {}, "validation errors: ", el("span", { class: "bad" }, d.errors.join(", "))) : null,
    el("p", {}, "assignments:"), pre((d.assignments || []).map((a) => a.join(" ← ")).join("\n") || "(none)"),
  );
  const calls = (d.call_log || []).map((c, k) => {
    const msgs = (c.messages || []).map((m) => el("div", {}, el("div", { class: "msg-role" }, m.role || "?"), pre(m.content ?? m)));
    const err = c.error || c.parse_error;
    return el("div", { class: "call" },
      el("h3", {}, `call ${k + 1} (id ${fmt(c.call_id)}) — ${c.model || "?"}, ${fmt((c.latency_s || 0) * 1000)} ms, ${fmt(c.prompt_tokens)}+${fmt(c.completion_tokens)} tokens${c.cached ? ", cached" : ""}`),
      el("div", { class: "msg-role" }, "prompt"), ...msgs,
      el("div", { class: "msg-role" }, "output"), pre(c.output ?? "(none)"),
      el("div", { class: "msg-role" }, "parsed"), pre(c.parsed ?? "(nothing parsed)"),
      el("div", { class: "msg-role" }, "validation"),
      err ? el("p", { class: "bad call-error" }, String(err)) : el("p", { class: "good" }, "valid"),
    );
  });
  body.replaceChildren(summary, el("h3", {}, `LLM calls (${calls.length})`),
    ...(calls.length ? calls : [el("p", {}, "this decision made no LLM call (a solver planner)")]));
}

$("call-log-close").addEventListener("click", () => { $("call-log").hidden = true; });

// ------------------------------------------------------------------ replay
const replay = { name: null, ticks: 0, chunks: new Map(), tick: 0, playing: false, timer: null, speed: 10, series: null };

async function chunkFor(tick) {
  const k = Math.floor(tick / CHUNK);
  if (!replay.chunks.has(k)) {
    const name = replay.name;
    const p = api(`/api/run/frames?run=${encodeURIComponent(name)}&start=${k * CHUNK}&stop=${(k + 1) * CHUNK}`)
      .then((d) => d.frames);
    replay.chunks.set(k, p);
    p.catch(() => replay.chunks.delete(k));
  }
  const frames = await replay.chunks.get(k);
  return frames[tick - k * CHUNK];
}

async function showReplayTick(tick) {
  tick = Math.max(0, Math.min(replay.ticks - 1, tick));
  replay.tick = tick;
  $("scrubber").value = String(tick);
  const name = replay.name;
  try {
    const frame = await chunkFor(tick);
    if (replay.name !== name || replay.tick !== tick || !frame) return;
    drawFrame(frame);
    charts.cursor = tick;
    redrawCharts();
    const delivered = replay.series ? seriesAt(replay.series, tick) : null;
    if (delivered) setKpis(replayKpis(frame, delivered));
  } catch (err) { showError(String(err.message || err)); }
}

function seriesAt(series, tick) {
  let k = 0;
  while (k + 1 < series.tick.length && series.tick[k + 1] <= tick) k++;
  return { delivered: series.delivered[k], throughput: series.throughput[k], shield: series.shield[k] };
}

function replayKpis(frame, s) {
  const m = replay.meta.metrics || {};
  return [
    ["tick", `${frame.tick} / ${replay.ticks - 1}`],
    ["delivered (so far)", s.delivered], ["throughput so far", s.throughput],
    ["shield interventions so far", s.shield],
    ["carrying now", frame.carrying.filter(Boolean).length],
    ["final throughput", m.throughput], ["on-time rate", m.on_time_rate],
    ["collisions executed", m.collisions], ["planner calls", m.planner_calls],
    ["planner fallbacks", m.planner_fallbacks],
  ];
}

function setReplayPlaying(on) {
  replay.playing = on;
  $("play").textContent = on ? "Pause" : "Play";
  clearTimeout(replay.timer);
  if (on) tickReplay();
}

async function tickReplay() {
  if (!replay.playing) return;
  if (replay.tick >= replay.ticks - 1) { setReplayPlaying(false); return; }
  const started = performance.now();
  await showReplayTick(replay.tick + 1);
  const wait = Math.max(0, 1000 / replay.speed - (performance.now() - started));
  replay.timer = setTimeout(tickReplay, wait);
}

async function openReplay(name) {
  stopLive();
  hook.mode = "replay"; hook.ready = false; hook.source = name;
  Object.assign(replay, { name, chunks: new Map(), tick: 0, playing: false, series: null });
  showSimView(true);
  $("scrubber").hidden = false; $("reset").hidden = true; $("step").hidden = false;
  $("state-label").textContent = "replay";
  setSpeedLabel(replay.speed);
  $("speed").value = String(sliderFromSpeed(replay.speed));
  const meta = await api(`/api/run/meta?run=${encodeURIComponent(name)}`);
  replay.meta = meta;
  replay.ticks = meta.ticks;
  hook.ticks = meta.ticks;
  const cfg = meta.config || {};
  $("subtitle").textContent = `${name}: ${cfg.planner || "?"} + ${cfg.executor || "?"}, ${meta.robots.length} robots, map ${cfg.map || "?"}, seed ${fmt(cfg.seed)}`;
  if (meta.problems && meta.problems.length) showError(meta.problems.join("\n"));
  $("scrubber").max = String(Math.max(0, meta.ticks - 1));
  setMap(meta.map, meta.robots);
  const [series, decisions] = await Promise.all([
    api(`/api/run/series?run=${encodeURIComponent(name)}`),
    api(`/api/run/decisions?run=${encodeURIComponent(name)}`),
  ]);
  replay.series = series;
  charts.ticks = series.tick;
  charts.reward = meta.robots.map((r) => series.reward[r] || []);
  charts.throughput = series.throughput;
  charts.rate = series.rate;
  renderDecisions(decisions.decisions, (d) => { showReplayTick(d.tick); openCallLog(name, d.tick); });
  renderIncidents((meta.metrics || {}).incident_log);
  await showReplayTick(0);
  hook.ready = true;
}

$("scrubber").addEventListener("input", (e) => {
  if (hook.mode !== "replay") return;
  setReplayPlaying(false);
  showReplayTick(Number(e.target.value));
});

// ------------------------------------------------------------------ live
const live = { ws: null, episode: null, status: null, decisionsTimer: null, closing: false };

function stopLive() {
  live.closing = true;
  if (live.ws) { try { live.ws.close(); } catch (_) { /* closed */ } }
  live.ws = null;
  clearInterval(live.decisionsTimer);
  live.decisionsTimer = null;
}

function sendLive(cmd, value) {
  if (live.ws && live.ws.readyState === WebSocket.OPEN) live.ws.send(JSON.stringify({ cmd, value }));
}

function resetLiveCharts() {
  charts.ticks = []; charts.reward = view.robots.map(() => []); charts.throughput = []; charts.rate = [];
  charts.cursor = null; live.delivered = [];
}

function pushLiveFrame(f) {
  if (charts.ticks.length && f.tick <= charts.ticks[charts.ticks.length - 1]) return;
  charts.ticks.push(f.tick);
  f.reward.forEach((r, i) => { (charts.reward[i] = charts.reward[i] || []).push(r); });
  charts.throughput.push(f.throughput);
  live.delivered.push(f.delivered);
  const w = 50, k = live.delivered.length - 1;
  let j = k; while (j > 0 && f.tick - charts.ticks[j - 1] <= w) j--;
  const span = Math.max(1, f.tick - charts.ticks[j]);
  charts.rate.push(k > j ? (f.delivered - live.delivered[j]) / span : 0);
  if (charts.ticks.length > 3000) {  // keep the charts light: drop every other old point
    const keep = (_, idx) => idx % 2 === 0 || idx > charts.ticks.length - 500;
    charts.ticks = charts.ticks.filter(keep); charts.throughput = charts.throughput.filter(keep);
    charts.rate = charts.rate.filter(keep); live.delivered = live.delivered.filter(keep);
    charts.reward = charts.reward.map((ys) => ys.filter(keep));
  }
}

async function refreshLiveDecisions() {
  const run = live.status && live.status.run;
  if (!run || hook.mode !== "live") return;
  try {
    const d = await api(`/api/run/decisions?run=${encodeURIComponent(run)}`);
    renderDecisions(d.decisions, (x) => openCallLog(run, x.tick), LIVE_EMPTY);
  } catch (_) { /* the recording may not have flushed yet */ }
}

function openLive() {
  renderIncidents([]);
  stopLive();
  live.closing = false;
  hook.mode = "live"; hook.ready = false; hook.source = "live";
  showSimView(true);
  $("scrubber").hidden = true; $("reset").hidden = false; $("step").hidden = false;
  $("subtitle").textContent = "live simulation";
  renderDecisions([], () => {}, LIVE_EMPTY);
  const proto = location.protocol === "https:" ? "wss" : "ws";
  // Off loopback the live controls need the token `fleetmind serve` printed (/?token=...).
  const token = new URLSearchParams(location.search).get("token");
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  const ws = new WebSocket(`${proto}://${location.host}/api/live/ws${query}`);
  live.ws = ws;
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === "status") {
      live.status = msg;
      hook.state = msg.state; hook.speed = msg.speed;
      $("play").textContent = msg.playing ? "Pause" : "Play";
      $("state-label").textContent = `${msg.state}${msg.run ? " · recording " + msg.run : ""}`;
      setSpeedLabel(msg.speed);
      if (msg.error) showError(`live simulation: ${msg.error}`);
    } else if (msg.type === "init") {
      live.episode = msg.episode;
      setMap(msg.map, msg.robots);
      resetLiveCharts();
      $("subtitle").textContent = `live: ${msg.robots.length} robots, ${msg.steps} ticks${msg.run ? ", recorded to " + msg.run : ""}`;
    } else if (msg.type === "history") {
      if (msg.episode !== live.episode) return;
      for (const point of msg.points) pushLiveFrame(point);
      redrawCharts();
      refreshLiveDecisions();
    } else if (msg.type === "frame") {
      if (msg.episode !== live.episode) return;
      drawFrame(msg);
      pushLiveFrame(msg);
      redrawCharts();
      setKpis([
        ["tick", `${msg.tick} / ${live.status ? live.status.steps : "?"}`],
        ["delivered", msg.delivered], ["throughput", msg.throughput],
        ["shield interventions", msg.shield_interventions],
        ["collisions executed", msg.collisions], ["planner calls", msg.planner_calls],
        ["open orders", (msg.open || []).length],
        ["carrying", msg.carrying.filter(Boolean).length],
      ]);
      hook.ready = true;
    } else if (msg.type === "error") {
      showError(msg.error);
    }
  };
  ws.onclose = () => {
    if (!live.closing && hook.mode === "live") showError("live connection closed; reload the page to reconnect");
  };
  live.decisionsTimer = setInterval(refreshLiveDecisions, 3000);
}

// ------------------------------------------------------------------ compare
async function openCompare(name) {
  stopLive();
  hook.mode = "compare"; hook.ready = false; hook.source = name;
  showSimView(false);
  const d = await api(`/api/compare?folder=${encodeURIComponent(name)}`);
  const show = d.display;
  const info = d.data;
  $("compare-title").textContent = `Comparison: ${name}`;
  $("subtitle").textContent = info.map
    ? `${info.map}, ${info.robots} robots, ${info.steps} ticks, seeds ${(info.seeds || []).join(", ")}`
    : `${show.rows.length} rows`;
  const head = el("tr", {}, ...show.columns.map((c) => el("th", {}, c)));
  const rows = show.rows.map((cells) => el("tr", {}, ...cells.map((v) => el("td", {}, fmt(v)))));
  $("compare-table").replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  const links = Object.entries(show.runs || {}).filter(([, list]) => list.length);
  $("compare-runs").replaceChildren(...links.map(([strategy, list]) => el("p", {},
    `${strategy}: `, ...list.flatMap((run, k) => [k ? ", " : "",
      el("a", { href: `#run=${run}`, class: "run-link" }, run.split("/").pop())]))));
  hook.ready = true;
}

// ------------------------------------------------------------------ shell
function showSimView(on) {
  $("sim-view").hidden = !on;
  $("compare-view").hidden = on;
}

function speedFromSlider(v) { return Math.round(Math.pow(10, -0.3 + (Number(v) / 100) * 2.7) * 10) / 10; }
function sliderFromSpeed(s) { return Math.round(((Math.log10(s) + 0.3) / 2.7) * 100); }
function setSpeedLabel(s) { $("speed-label").textContent = `${s} ticks/s`; }

$("speed").addEventListener("input", (e) => {
  const s = speedFromSlider(e.target.value);
  setSpeedLabel(s);
  if (hook.mode === "live") sendLive("speed", s);
  else { replay.speed = s; hook.speed = s; }
});
$("play").addEventListener("click", () => {
  if (hook.mode === "live") sendLive(live.status && live.status.playing ? "pause" : "play");
  else if (hook.mode === "replay") setReplayPlaying(!replay.playing);
});
$("step").addEventListener("click", () => {
  if (hook.mode === "live") sendLive("step");
  else if (hook.mode === "replay") { setReplayPlaying(false); showReplayTick(replay.tick + 1); }
});
$("reset").addEventListener("click", () => sendLive("reset"));
document.addEventListener("keydown", (e) => {
  if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
  if (e.code === "Space") { e.preventDefault(); $("play").click(); }
  if (hook.mode === "replay" && e.code === "ArrowRight") showReplayTick(replay.tick + 1);
  if (hook.mode === "replay" && e.code === "ArrowLeft") showReplayTick(replay.tick - 1);
  if (e.code === "Escape") $("call-log").hidden = true;
});

async function route() {
  showError(null);
  $("call-log").hidden = true;
  $("subtitle").textContent = "";
  const hash = decodeURIComponent(location.hash.slice(1));
  const sel = $("source");
  try {
    if (hash.startsWith("run=")) { sel.value = hash; await openReplay(hash.slice(4)); }
    else if (hash.startsWith("compare=")) { sel.value = hash; await openCompare(hash.slice(8)); }
    else if (hash === "live" || (!hash && hook.liveEnabled)) { sel.value = "live"; openLive(); }
    else if (!hash && sel.options.length > 1) { location.hash = sel.options[1].value; }
    else if (!hash) { showError("nothing to show: no run folders under the dashboard root and no live simulation"); }
    else showError(`unknown view '${hash}'`);
  } catch (err) {
    showError(String(err.message || err));
    $("sim-view").hidden = true;
    $("compare-view").hidden = true;
  }
}

async function init() {
  setSpeedLabel(10);
  $("speed").value = String(sliderFromSpeed(10));
  let listing = { folders: [], live: false };
  try { listing = await api("/api/folders"); } catch (err) { showError(String(err.message || err)); }
  hook.liveEnabled = listing.live;
  const sel = $("source");
  sel.replaceChildren(el("option", { value: "", disabled: "" }, "choose a run, a comparison or the live view"));
  if (listing.live) sel.append(el("option", { value: "live" }, "live simulation"));
  for (const f of listing.folders) {
    const v = `${f.kind === "compare" ? "compare" : "run"}=${f.name}`;
    sel.append(el("option", { value: v }, `${f.kind === "compare" ? "comparison" : "run"}: ${f.name}`));
  }
  // Allow deep links to folders the listing does not show (deeper than its search).
  const h = decodeURIComponent(location.hash.slice(1));
  if (h && ![...sel.options].some((o) => o.value === h)) sel.append(el("option", { value: h }, h));
  sel.addEventListener("change", () => { location.hash = sel.value; });
  window.addEventListener("hashchange", route);
  await route();
}

init();
