// The toolbridge web view: renders /api/runs and /api/runs/{id}, polling while runs go on.
// Built with DOM calls only (never innerHTML), so journal text is always shown as text.
"use strict";

const POLL_MS = 1000;

// A run waiting on a person's decision goes on too: the page follows it until it ends.
function goingOn(status) {
  return status === "running" || status === "waiting";
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "style") Object.assign(node.style, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "…";
  if (seconds < 1) return `${(seconds * 1000).toFixed(1)} ms`;
  if (seconds < 120) return `${seconds.toFixed(2)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

function when(stamp) {
  return new Date(stamp * 1000).toLocaleString(undefined, { hour12: false });
}

function pill(status, text) {
  return el("span", { class: `pill ${status}`, text: text || status });
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

async function fetchJSON(url) {
  const response = await fetch(url, { headers: { accept: "application/json" }, cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function showProblem(error) {
  const problem = document.getElementById("problem");
  problem.hidden = !error;
  problem.textContent = error ? `Cannot read the journal: ${error.message}` : "";
}

function setLive(on) {
  document.getElementById("live").hidden = !on;
}

// ---- requests for a person's decision ---------------------------------------------------

const NAME_KEY = "toolbridge-approver";

function token() {
  return document.querySelector('meta[name="toolbridge-token"]').content;
}

async function decide(id, body) {
  const response = await fetch(`/api/approvals/${encodeURIComponent(id)}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", "x-toolbridge-token": token() },
    body: JSON.stringify(body),
    cache: "no-store",
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || `${response.status} ${response.statusText}`);
  return answer;
}

function approverField() {
  const input = el("input", { id: "approver", type: "text", required: true, autocomplete: "name", placeholder: "your name", maxlength: "200" });
  input.value = localStorage.getItem(NAME_KEY) || "";
  input.addEventListener("input", () => localStorage.setItem(NAME_KEY, input.value.trim()));
  return el("label", { class: "approver" }, "Decide as ", input);
}

function parseAnswer(text, schema) {
  if (schema && schema.type === "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text; // plain text: the answer's schema says whether it will do
  }
}

function requestCard(req) {
  const status = el("p", { class: "decision-status", role: "status" });
  const reason = el("input", { class: "reason", type: "text", placeholder: req.kind === "input" ? "your answer" : "reason (needed to reject)" });
  const buttons = [];
  const card = el(
    "div",
    { class: `request pending ${req.kind}`, "data-request": req.id },
    el("div", { class: "asks" }, el("span", { class: "request-id", text: req.id }), el("span", { class: "summary-text", text: req.summary })),
    detail("arguments", req.arguments),
    req.answer_schema ? detail("answer must match", req.answer_schema) : null,
    el("p", { class: "hint", text: `asked ${when(req.asked_at)} · expires ${when(req.expires_at)}` }),
    reason,
  );
  const act = async (action) => {
    const name = document.getElementById("approver");
    const by = name.value.trim();
    if (!by) {
      status.className = "decision-status decision-error";
      status.textContent = "Enter your name first: it is recorded with the decision.";
      name.focus();
      return;
    }
    const body = { action, by };
    if (action === "answer") body.answer = parseAnswer(reason.value, req.answer_schema);
    else if (reason.value.trim()) body.reason = reason.value.trim();
    for (const button of buttons) button.disabled = true;
    try {
      const decided = await decide(req.id, body);
      const how = req.kind === "input" ? "answered" : decided.state;
      status.className = "decision-status decision-done";
      status.textContent = `${how} by ${decided.decided_by} via ${decided.channel}`;
    } catch (error) {
      status.className = "decision-status decision-error";
      status.textContent = error.message;
      for (const button of buttons) button.disabled = false;
    }
  };
  const actions = req.kind === "input" ? [["answer", "Answer"]] : [["approve", "Approve"], ["reject", "Reject"]];
  for (const [action, label] of actions) {
    const button = el("button", { type: "button", class: `decide ${action}`, text: label });
    button.addEventListener("click", () => act(action));
    buttons.push(button);
  }
  card.append(el("div", { class: "actions" }, ...buttons), status);
  return card;
}

let shownRequests = null;

function renderRequests(requests) {
  // Re-rendered only when the pending set changes, so a name or reason being typed stays.
  const signature = requests.map((req) => req.id).join(" ");
  if (signature === shownRequests) return;
  shownRequests = signature;
  const section = document.getElementById("requests");
  section.hidden = requests.length === 0;
  section.replaceChildren(
    el("h2", { text: requests.length === 1 ? "Waiting for a decision" : `${requests.length} requests waiting for a decision` }),
    approverField(),
    ...requests.map(requestCard),
  );
}

function requestLine(req) {
  if (req.state === "pending") return `${req.kind} ${req.id}: waiting for a decision: ${req.summary}`;
  const how = req.kind === "input" && req.state === "approved" ? "answered" : req.state;
  const who = req.by ? ` by ${req.by}` : "";
  const why = req.reason ? `: ${req.reason}` : "";
  return `${req.kind} ${req.id}: ${how}${who} via ${req.via} at ${when(req.decided_at)}${why}`;
}

function pendingIn(steps, found) {
  for (const step of steps) {
    for (const req of step.approvals || []) if (req.state === "pending") found.push({ ...req, asked_at: req.asked_at });
    pendingIn(step.children, found);
  }
  return found;
}

// ---- the list of runs -------------------------------------------------------------------

function renderRuns(runs) {
  const body = document.querySelector("#runs tbody");
  body.replaceChildren(
    ...runs.map((run) =>
      el(
        "tr",
        { class: `run ${run.status}`, "data-run": run.run_id },
        el("td", {}, el("a", { href: `/runs/${encodeURIComponent(run.run_id)}`, text: run.run_id })),
        el("td", {}, pill(run.status)),
        el("td", { text: when(run.started_at) }),
        el("td", { class: "num", text: duration(run.duration ?? (goingOn(run.status) ? Date.now() / 1000 - run.started_at : null)) }),
        el("td", { class: "num", text: run.steps }),
        el("td", { class: "num", text: run.entries }),
      ),
    ),
  );
  document.getElementById("empty").hidden = runs.length > 0;
  setLive(runs.some((run) => goingOn(run.status)));
}

function renderPending(requests) {
  document.getElementById("pending").hidden = requests.length === 0;
  document.querySelector("#pending tbody").replaceChildren(
    ...requests.map((req) =>
      el(
        "tr",
        { class: "request pending", "data-request": req.id },
        el("td", {}, el("a", { href: `/runs/${encodeURIComponent(req.run_id)}`, text: req.run_id })),
        el("td", { class: "mono", text: req.id }),
        el("td", { text: req.kind }),
        el("td", { text: req.summary }),
        el("td", { text: when(req.asked_at) }),
        el("td", { text: when(req.expires_at) }),
      ),
    ),
  );
}

async function pollRuns() {
  try {
    renderPending(await fetchJSON("/api/approvals"));
    renderRuns(await fetchJSON("/api/runs"));
    showProblem(null);
  } catch (error) {
    showProblem(error);
  }
  setTimeout(pollRuns, POLL_MS);
}

// ---- one run as a waterfall -------------------------------------------------------------

const expanded = new Set();
const collapsed = new Set();

function stepTitle(step) {
  const input = step.input;
  if (step.kind === "command" && input && Array.isArray(input.argv)) return `$ ${input.argv.join(" ")}`;
  if (input && typeof input.code === "string") return input.code.trim().split("\n")[0];
  return null;
}

function span(range, start, finish) {
  const [t0, t1] = range;
  const total = Math.max(t1 - t0, 1e-6);
  const from = Math.min(Math.max((start - t0) / total, 0), 1);
  const to = Math.min(Math.max(((finish ?? t1) - t0) / total, from), 1);
  return { left: `${(from * 100).toFixed(3)}%`, width: `max(${((to - from) * 100).toFixed(3)}%, 2px)` };
}

function bar(range, start, finish, cls, label) {
  return el("div", { class: "track" }, el("div", { class: `span ${cls}`, style: span(range, start, finish), title: label }));
}

function detail(label, value, cls) {
  if (value === null || value === undefined || value === "") return null;
  const text = typeof value === "string" ? value : json(value);
  return el("div", { class: `detail ${cls || ""}` }, el("span", { class: "key", text: label }), el("pre", { text }));
}

function stepDetails(step) {
  const outputErrors = step.entries.filter((entry) => entry.output_error);
  return el(
    "div",
    { class: "details" },
    detail("idempotency key", step.idempotency_key, "mono"),
    detail("input", step.input),
    step.status === "completed" ? detail("output", step.output) : null,
    step.error ? detail("error", `${step.error.type}: ${step.error.message}`, "bad") : null,
    step.error && step.error.error_id ? detail("error id", step.error.error_id, "mono") : null,
    ...outputErrors.map((entry) => detail("output validation", entry.output_error, "bad reason")),
    ...step.entries
      .filter((entry) => entry.kind === "attempt" && entry.error && !entry.output_error)
      .map((entry) => detail(entry.label, entry.error, "bad")),
  );
}

function entryRow(entry, depth, range) {
  const text = entry.output_error ? `${entry.label}: output failed validation` : entry.error ? `${entry.label}: ${entry.error}` : entry.label;
  return el(
    "li",
    { class: `row entry ${entry.kind} ${entry.tone}` },
    el("div", { class: "label", style: { paddingLeft: `${depth * 18 + 22}px` } }, el("span", { class: "entry-text", text })),
    bar(range, entry.started_at, entry.finished_at, `${entry.kind} ${entry.tone}`, text),
    el("div", { class: "dur", text: duration(entry.duration) }),
  );
}

function isOpen(step) {
  if (expanded.has(step.step_key)) return true;
  if (collapsed.has(step.step_key)) return false;
  return step.status === "failed" || step.entries.some((entry) => entry.output_error);
}

function stepRows(step, depth, range, rows) {
  const open = isOpen(step);
  const title = stepTitle(step);
  const state = step.stale ? "stale" : step.status;
  const toggle = el("button", { class: "toggle", type: "button", "aria-expanded": String(open), title: "show input, output and errors", text: open ? "▾" : "▸" });
  toggle.addEventListener("click", () => {
    if (isOpen(step)) {
      expanded.delete(step.step_key);
      collapsed.add(step.step_key);
    } else {
      collapsed.delete(step.step_key);
      expanded.add(step.step_key);
    }
    refreshRun();
  });
  const row = el(
    "li",
    { class: `row step ${state}`, "data-step": step.step_key },
    el(
      "div",
      { class: "label", style: { paddingLeft: `${depth * 18}px` } },
      toggle,
      el("span", { class: "name", text: step.name }),
      el("span", { class: "kind", text: step.kind }),
      step.marker ? el("span", { class: `marker ${step.marker.replaceAll(" ", "-")}`, text: step.marker }) : null,
      step.status === "failed" ? pill("failed") : null,
      title ? el("span", { class: "title", text: title }) : null,
    ),
    bar(range, step.started_at, step.finished_at, state, `${step.name}: ${step.status}`),
    el("div", { class: "dur", text: duration(step.duration) }),
  );
  rows.push(row);
  if (open) rows.push(el("li", { class: "row open" }, el("div", { class: "label wide", style: { paddingLeft: `${depth * 18 + 22}px` } }, stepDetails(step))));
  const showEntries = step.entries.length > 1 || step.entries.some((entry) => entry.kind !== "attempt" || entry.tone !== "plain");
  if (showEntries) for (const entry of step.entries) rows.push(entryRow(entry, depth, range));
  for (const req of step.approvals || []) {
    rows.push(
      el(
        "li",
        { class: `row request ${req.state}`, "data-request": req.id },
        el("div", { class: "label wide", style: { paddingLeft: `${depth * 18 + 22}px` } }, pill(req.state === "pending" ? "waiting" : req.state), el("span", { class: "request-text", text: requestLine(req) })),
      ),
    );
  }
  for (const child of step.children) stepRows(child, depth + 1, range, rows);
}

function latest(steps, found) {
  for (const step of steps) {
    found.push(step.finished_at ?? step.started_at);
    for (const entry of step.entries) found.push(entry.finished_at ?? entry.started_at);
    latest(step.children, found);
  }
  return found;
}

function renderSummary(run) {
  document.title = `toolbridge · ${run.run_id}`;
  document.getElementById("crumb").textContent = run.run_id;
  const facts = [
    ["started", when(run.started_at)],
    ["duration", duration(run.duration ?? Date.now() / 1000 - run.started_at)],
    ["steps", String(run.steps)],
    ["entered", `${run.entries}×`],
  ];
  const parts = [
    el("h1", {}, el("span", { class: "run-id", text: run.run_id }), pill(run.status)),
    el("dl", { class: "facts" }, ...facts.flatMap(([key, value]) => [el("dt", { text: key }), el("dd", { text: value })])),
    run.entries > 1 ? el("p", { class: "hint", text: "Entered more than once: steps completed in an earlier entry were answered from the journal, not run again." }) : null,
    run.error ? el("p", { class: "run-error", text: run.error }) : null,
  ];
  document.getElementById("summary").replaceChildren(...parts.filter(Boolean));
}

function renderRun(run) {
  renderSummary(run);
  const now = Date.now() / 1000;
  const end = Math.max(run.finished_at ?? now, ...latest(run.tree, []));
  const range = [run.started_at, end];
  const axis = document.getElementById("axis");
  axis.replaceChildren(
    el("div", { class: "label", text: "step" }),
    el("div", { class: "track ticks" }, ...[0, 0.25, 0.5, 0.75, 1].map((f) => el("span", { class: "tick", style: { left: `${f * 100}%` }, text: duration((end - run.started_at) * f) }))),
    el("div", { class: "dur", text: "took" }),
  );
  const rows = [];
  for (const step of run.tree) stepRows(step, 0, range, rows);
  if (rows.length === 0) rows.push(el("li", { class: "row empty", text: "No steps recorded yet." }));
  document.getElementById("steps").replaceChildren(...rows);
  renderRequests(pendingIn(run.tree, []));
  setLive(goingOn(run.status));
}

let current = null;

function runId() {
  return decodeURIComponent(location.pathname.replace(/^\/runs\//, ""));
}

function refreshRun() {
  if (current) renderRun(current);
}

async function pollRun() {
  try {
    current = await fetchJSON(`/api/runs/${encodeURIComponent(runId())}`);
    renderRun(current);
    showProblem(null);
  } catch (error) {
    showProblem(error);
  }
  // A finished run changes no more; a running one is followed until it ends.
  if (!current || goingOn(current.status)) setTimeout(pollRun, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page === "runs") pollRuns();
  else pollRun();
});
