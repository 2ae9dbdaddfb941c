// One room's page: the live transcript from the room's event stream (SSE read by auth.js's `follow`, resumed
// with Last-Event-ID), the floor and ledger, questions to answer, the timeline and the agent view. The page
// arrives empty; all of it comes through the API. Everything the room says is put in the page as text, never
// as HTML; an agent's message is Markdown built into nodes by markdown.js (no raw HTML, safe links only).
// What the user does not see is in the transcript only while "show what the user does not see" is ticked:
// lines hidden from the user, the anonymous workers' lines (the commander's hands) and a handoff's note to
// its agent (the user sees the hand_off_to call and the floor line).
"use strict";

const ROOM = decodeURIComponent(location.pathname.split("/")[2] || "");
const PATH = `/rooms/${encodeURIComponent(ROOM)}`;
const HANDBACK = /\s*<handback\s*\/>\s*/g;
const ANONYMOUS = /^worker(-\d+)?$/;  // the anonymous workers' reserved names (team/schema.py)
const $ = (id) => document.getElementById(id);

const seen = new Set();          // message ids already shown
const streams = new Map();       // agent -> the element its text streams into
const questions = new Map();     // request id -> its confirm event
const lanes = [];                // agent names in order of first appearance
const bars = [];                 // {agent, kind, id, start, end, status, label}
const ticks = [];                // {agent, start, end, name}
const handed = new Set();        // agents handed the floor whose handoff note has not arrived yet
let skew = Infinity;             // browser clock minus the server's, smallest seen
let members = [];

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function short(text, n) {
  text = String(text).replace(/\s+/g, " ");
  return text.length <= n ? text : text.slice(0, n - 1) + "…";
}

// --- the transcript ---------------------------------------------------------------------------

function addLine(node) {
  const box = $("transcript");
  const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  box.append(node);
  if (atEnd) box.scrollTop = box.scrollHeight;
}

// A handoff's note: the task the commander posts for the agent it just handed the floor to.
function handoffNote(ev) {
  if (ev.kind !== "task") return false;
  const to = ev.visible_to.find((v) => v !== "user" && v !== ev.author);
  return handed.delete(to);
}

function messageNode(ev) {
  for (const c of ev.calls || []) if (c.name === "hand_off_to") handed.add(String(c.input.agent));
  const hidden = !ev.visible_to.includes("user") || ANONYMOUS.test(ev.author) || handoffNote(ev);
  const node = el("div", `msg kind-${ev.kind}${hidden ? " hidden" : ""}`);
  node.dataset.seq = ev.seq;
  node.dataset.author = ev.author;
  const to = ev.visible_to.filter((v) => v !== ev.author && v !== "user" && v !== "commander");
  let who = ev.author;
  if (ev.kind === "task") who += ` → ${ev.visible_to.find((v) => v !== "user" && v !== ev.author) || "?"}`;
  else if (ev.kind === "user" && to.length) who += ` → ${to.join(", ")}`;
  node.append(el("span", "who", who));
  if (ev.kind === "tool_result") {
    node.append(el("span", "tool", ` ← ${ev.name}: ${ev.is_error ? "error " + short(ev.text, 160) : ev.text.length + " chars"}`));
    return node;
  }
  const text = ev.text.replace(HANDBACK, "");
  if (text) {
    const box = el("div", ev.kind === "user" ? "text" : "text md");
    if (ev.kind === "user") box.textContent = text; else renderMarkdown(box, text);
    node.append(box);
  }
  for (const c of ev.calls || []) {
    const args = Object.entries(c.input).map(([k, v]) => `${k}=${short(typeof v === "string" ? v : JSON.stringify(v), 60)}`);
    node.append(el("div", "tool", `→ ${c.name}(${args.join(", ")})`));
  }
  return node;
}

function onMessage(ev) {
  if (seen.has(ev.id)) return;
  seen.add(ev.id);
  const streaming = streams.get(ev.author);
  if (streaming && (ev.kind === "text" || ev.kind === "tool_call")) {
    streams.delete(ev.author);
    streaming.replaceWith(messageNode(ev));
    return;
  }
  addLine(messageNode(ev));
}

function onDelta(ev) {
  let node = streams.get(ev.agent);
  if (!node) {
    node = el("div", `msg streaming${ANONYMOUS.test(ev.agent) ? " hidden" : ""}`);
    node.dataset.author = ev.agent;
    node.append(el("span", "who", ev.agent), el("div", "text md", ""));
    node.dataset.raw = "";
    streams.set(ev.agent, node);
    addLine(node);
  }
  node.dataset.raw += ev.text;
  renderMarkdown(node.querySelector(".text"), node.dataset.raw.replace(HANDBACK, ""));
}

function note(text, cls) {
  addLine(el("div", `note ${cls || ""}`, text));
}

// --- questions, floor, ledger -----------------------------------------------------------------

function renderQuestions() {
  const box = $("questions");
  box.replaceChildren();
  for (const [id, q] of questions) {
    const node = el("div", "question");
    node.append(el("div", "", `${q.agent} asks to do something risky (${q.category}):`), el("pre", "", q.summary));
    for (const answer of ["once", "run", "deny"]) {
      const b = el("button", `answer answer-${answer}`, { once: "Allow once", run: "Allow for this run", deny: "Deny" }[answer]);
      b.onclick = () => send(`${PATH}/answers`, { request_id: id, answer }).then((ok) => {
        if (ok) { questions.delete(id); renderQuestions(); }
      });
      node.append(b);
    }
    box.append(node);
  }
}

let stateTimer = null;
function stateSoon() {
  if (stateTimer === null) stateTimer = setTimeout(refreshState, 150);
}

async function refreshState() {
  stateTimer = null;
  const r = await api(`${PATH}/state`);
  if (!r.ok) {
    if (r.status === 404) gone((await r.json()).error);
    return;
  }
  const s = await r.json();
  if ($("room-name").textContent !== s.name) {
    $("room-name").textContent = s.name;
    document.title = `${s.name} · orchestrator`;
  }
  $("floor").textContent = s.floor;
  $("busy").textContent = s.busy ? "working" : "idle";
  $("busy").classList.toggle("working", s.busy);
  for (const id of questions.keys()) if (!s.asking.includes(id)) questions.delete(id);
  renderQuestions();
  const body = $("ledger").querySelector("tbody");
  body.replaceChildren();
  for (const t of s.tasks.slice().reverse()) {
    const row = body.insertRow();
    row.className = `status-${t.status}`;
    for (const v of [t.id, t.agent, t.kind + (t.background ? " (bg)" : ""), t.status, short(t.task, 80), short(t.result, 80)]) {
      row.insertCell().textContent = v;
    }
  }
  const names = s.members.map((m) => m.name);
  if (names.join() !== members.join()) {
    members = names;
    const pick = $("agent");
    const chosen = pick.value;
    pick.replaceChildren(...names.map((n) => el("option", "", n)));
    if (names.includes(chosen)) pick.value = chosen;
    if (pick.value !== chosen) agentViewSoon();
  }
}

// What the room spent, per agent and model, as `show --usage` prints it: the cached share is what a prompt
// cache billed at its cached price.
let usageTimer = null;
function usageSoon(delay) {  // after the room's usage rows are written (they wait about a second)
  if (usageTimer === null) usageTimer = setTimeout(refreshUsage, delay);
}

async function refreshUsage() {
  usageTimer = null;
  const r = await api(`${PATH}/usage`);
  if (r.ok) renderUsage(await r.json());
}

function renderUsage(usage) {
  const body = $("usage").querySelector("tbody");
  body.replaceChildren();
  const lines = usage.lines.length > 1 ? [...usage.lines, usage.total] : usage.lines;
  for (const u of lines) {
    const row = body.insertRow();
    const mark = u.estimated_calls ? "~" : "";
    const share = u.input_tokens ? `${Math.round((100 * u.cached_tokens) / u.input_tokens)}%` : "-";
    for (const v of [u.agent, u.provider ? `${u.provider}/${u.model}` : "", u.calls,
      mark + u.input_tokens.toLocaleString("en"), u.cached_tokens.toLocaleString("en"), share,
      mark + u.output_tokens.toLocaleString("en"), u.cost === null ? "?" : u.cost.toFixed(4)]) {
      row.insertCell().textContent = v;
    }
  }
}

// --- the timeline -----------------------------------------------------------------------------

function lane(agent) {
  if (!lanes.includes(agent)) lanes.push(agent);
}

function closeBars(match, ts, status) {
  for (const b of bars) if (b.end === null && match(b)) { b.end = ts; b.status = status; }
}

function onTimeline(ev) {
  skew = Math.min(skew, Date.now() / 1000 - ev.ts);
  switch (ev.type) {
    case "turn":
      lane(ev.agent);
      closeBars((b) => b.kind === "turn" && b.agent === ev.agent, ev.ts, "done");
      bars.push({ agent: ev.agent, kind: "turn", start: ev.ts, end: null, status: "running", label: "turn" });
      break;
    case "done":
      closeBars((b) => b.kind === "turn" && b.agent === ev.agent, ev.ts, "done");
      break;
    case "error":
      if (ev.agent) closeBars((b) => b.kind === "turn" && b.agent === ev.agent, ev.ts, "failed");
      break;
    case "task": {
      lane(ev.agent);
      const open = bars.find((b) => b.kind === "task" && b.id === ev.task_id);
      if (ev.status === "running" && !open) {
        bars.push({ agent: ev.agent, kind: "task", id: ev.task_id, start: ev.ts, end: null, status: "running",
                    label: `${ev.kind} ${ev.task_id}` });
      } else if (open && ev.status !== "running") {
        open.end = ev.ts;
        open.status = ev.status;
      }
      break;
    }
    case "cancelled":
      closeBars(() => true, ev.ts, "cancelled");
      for (const t of ticks) if (t.end === null) t.end = ev.ts;
      break;
    case "tool_start":
      lane(ev.agent);
      ticks.push({ agent: ev.agent, id: ev.call_id, start: ev.ts, end: null, name: ev.name });
      break;
    case "tool_end": {
      const t = ticks.find((x) => x.id === ev.call_id && x.agent === ev.agent);
      if (t) t.end = ev.ts;
      break;
    }
    default:
      return;
  }
  drawSoon();
}

let drawPending = false;
function drawSoon() {
  if (!drawPending) { drawPending = true; requestAnimationFrame(draw); }
}

// The timeline's scale: the work shown fills the width, however short. A stretch where nothing ran (the room
// idle between two lines) is cut to a small share of it and marked, so that runs an hour apart both show.
const GAP_SHARE = 0.06;  // of the work's own length: what a cut stretch keeps

function timeScale(spans) {
  const busy = [];
  for (const [s, e] of spans.slice().sort((a, b) => a[0] - b[0])) {
    const last = busy[busy.length - 1];
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else busy.push([s, e]);
  }
  const worked = busy.reduce((n, [s, e]) => n + (e - s), 0);
  const keep = worked * GAP_SHARE;
  const pieces = [];  // {from, to, at, shown}: the time from..to drawn from `at` over `shown`
  let total = 0;
  busy.forEach(([s, e], i) => {
    if (i > 0) {
      const from = busy[i - 1][1];
      const shown = Math.min(s - from, keep);
      pieces.push({ from, to: s, at: total, shown, cut: s - from > keep });
      total += shown;
    }
    pieces.push({ from: s, to: e, at: total, shown: e - s });
    total += e - s;
  });
  total = total || 1;
  const x = (t) => {
    const p = pieces.find((q) => t <= q.to) || pieces[pieces.length - 1];
    const into = p.to > p.from ? Math.min(1, Math.max(0, (t - p.from) / (p.to - p.from))) : 0;
    return (100 * (p.at + into * p.shown)) / total;
  };
  const cuts = pieces.filter((p) => p.cut).map((p) => ({ at: x(p.from), idle: p.to - p.from }));
  return { x, cuts, t0: busy[0][0], t1: busy[busy.length - 1][1], worked };
}

function seconds(s) {
  return s < 1 ? `${Math.max(1, Math.round(s * 1000))} ms` : `${s.toFixed(1)} s`;
}

function draw() {
  drawPending = false;
  const box = $("lanes");
  if (!bars.length && !ticks.length) return;
  const now = Date.now() / 1000 - (skew === Infinity ? 0 : skew);
  const ending = (end, start) => (end === null ? Math.max(now, start) : end);
  const spans = bars.map((b) => [b.start, ending(b.end, b.start)])
    .concat(ticks.map((t) => [t.start, ending(t.end, t.start)]));
  const { x, cuts, t0, t1, worked } = timeScale(spans);
  box.replaceChildren();
  for (const agent of lanes) {
    const row = el("div", "lane");
    row.dataset.agent = agent;
    const track = el("div", "track");
    row.append(el("div", "lane-name", agent), track);
    for (const c of cuts) {
      const gap = el("div", "gap");
      gap.style.left = `${c.at}%`;
      gap.title = `${seconds(c.idle)} with nothing running, cut`;
      track.append(gap);
    }
    for (const b of bars.filter((b) => b.agent === agent)) {
      const end = ending(b.end, b.start);
      const bar = el("div", `bar ${b.kind} ${b.status}${b.end === null ? " open" : ""}`);
      bar.style.left = `${x(b.start)}%`;
      bar.style.width = `max(3px, ${x(end) - x(b.start)}%)`;
      bar.title = `${b.label}: ${b.status}, ${(end - b.start).toFixed(2)} s`;
      bar.dataset.start = b.start;
      bar.dataset.end = end;
      track.append(bar);
    }
    for (const t of ticks.filter((t) => t.agent === agent)) {
      const tick = el("div", "tick");
      tick.style.left = `${x(t.start)}%`;
      tick.title = `${t.name}${t.end ? `, ${(t.end - t.start).toFixed(2)} s` : ", running"}`;
      track.append(tick);
    }
    box.append(row);
  }
  const idle = cuts.length ? `, of ${seconds(t1 - t0)} (stretches with nothing running cut)` : "";
  box.append(el("div", "axis small muted", `${seconds(worked)} of work${idle}`));
}

setInterval(() => { if (bars.some((b) => b.end === null)) drawSoon(); }, 200);

// --- the agent view ---------------------------------------------------------------------------

function blockNode(b) {
  switch (b.type) {
    case "text": return el("pre", "block text", b.text);
    case "thinking": return el("pre", "block thinking", `(thinking) ${b.thinking}`);
    case "tool_call": return el("pre", "block call", `tool_call ${b.name} ${JSON.stringify(b.input)}`);
    case "tool_result": return el("pre", `block result${b.is_error ? " error" : ""}`, `tool_result ${b.name}: ${b.content}`);
    case "image": return el("div", "block image", `[image ${b.media_type}, ${b.bytes} bytes]`);
    default: return el("pre", "block", JSON.stringify(b));
  }
}

let agentTimer = null;
function agentViewSoon() {
  if (agentTimer === null) agentTimer = setTimeout(showAgent, 300);
}

async function showAgent() {
  agentTimer = null;
  const name = $("agent").value;
  const box = $("agent-view");
  if (!name) return;
  const r = await api(`${PATH}/agents/${encodeURIComponent(name)}`);
  const v = await r.json();
  if (!r.ok) { box.replaceChildren(el("div", "error", v.error)); return; }
  const system = el("details", "system");
  system.append(el("summary", "", `system prompt (${v.system.length} chars) · model ${v.model} · tools: ${v.tools.join(", ") || "none"}`),
                el("pre", "", v.system));
  const list = el("ol", "model-messages");
  for (const m of v.messages) {
    const item = el("li", `role-${m.role}`);
    item.append(el("span", "role", m.role), ...m.blocks.map(blockNode));
    list.append(item);
  }
  box.replaceChildren(system, el("div", "small muted", `${v.messages.length} messages`), list);
  box.dataset.agent = v.agent;
}

$("agent").addEventListener("change", showAgent);
$("agent-refresh").addEventListener("click", showAgent);

// --- writing to the room ----------------------------------------------------------------------

async function send(path, body) {
  const r = await api(path, { method: "POST", json: body || {} });
  if (!r.ok) {
    const e = await r.json().catch(() => ({ error: r.statusText }));
    $("post-error").textContent = e.error;
    return false;
  }
  $("post-error").textContent = "";
  return true;
}

$("post").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("line").value.trim();
  if (!text) return;
  if (await send(`${PATH}/lines`, { text })) $("line").value = "";
});

$("stop").addEventListener("click", async () => {
  $("stop").disabled = true;
  try { await send(`${PATH}/stop`); } finally { $("stop").disabled = false; }
});

$("show-hidden").addEventListener("change", (e) => {
  $("transcript").classList.toggle("show-hidden", e.target.checked);
});

// --- the stream -------------------------------------------------------------------------------

function handle(ev) {
  switch (ev.type) {
    case "message": onMessage(ev); break;
    case "text_delta": onDelta(ev); break;
    case "state": $("floor").textContent = ev.floor; note(`${ev.floor} has the floor`, "dim"); break;
    case "task": stateSoon(); break;
    case "confirm": questions.set(ev.request_id, ev); renderQuestions(); stateSoon(); break;
    case "cancelled":
      for (const [agent, node] of streams) { node.classList.add("cut"); streams.delete(agent); }
      note(`■ stopped: ${ev.reason}`, "stopped");
      stateSoon();
      usageSoon(1500);
      break;
    case "error": note(`! ${ev.agent ? ev.agent + ": " : ""}${ev.message}`, "error"); break;
    case "retry": note(`↻ ${ev.agent}: ${ev.reason}, retry ${ev.attempt} in ${ev.delay.toFixed(2)} s`, "dim"); break;
    case "compaction": note(`⇣ ${ev.agent}: history compacted ${ev.tokens_before} → ${ev.tokens_after} tokens`, "dim"); break;
    case "turn": stateSoon(); break;
    case "done": stateSoon(); usageSoon(1500); break;
  }
  onTimeline(ev);
  const viewed = $("agent").value;  // the agent view follows what lands in that agent's partition
  if (ev.type === "message" && ev.visible_to.includes(viewed)) agentViewSoon();
}

function gone(error) {
  $("link").textContent = "closed";
  $("link").classList.add("down");
  $("post-error").textContent = error;
}

follow(`${PATH}/events`, {
  event: (data) => handle(JSON.parse(data)),
  open: () => { $("link").textContent = "live"; $("link").classList.remove("down"); refreshState(); usageSoon(0); },
  down: () => { $("link").textContent = "reconnecting…"; $("link").classList.add("down"); },
  gone,
});
refreshState();
