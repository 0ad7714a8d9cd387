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
    detail("arguments", req.arguments, "", { open: true }),
    req.answer_schema ? detail("answer must match", req.answer_schema, "", { open: true }) : null,
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

function runPill(run) {
  if (!run.token) return pill(run.status);
  // A sidecar token's run has no end of its own: its token says whether it can go on.
  const token = run.token;
  const title = `sidecar token ${token.id}: ${token.calls} of ${token.max_calls} calls, expires ${when(token.expires_at)}`;
  return el("span", { class: `pill token ${token.state.replaceAll(" ", "-")}`, title, text: run.status });
}

function renderRuns(runs) {
  const body = document.querySelector("#runs tbody");
  body.replaceChildren(
    ...runs.map((run) =>
      el(
        "tr",
        { class: `run ${run.status}`, "data-run": run.run_id },
        el("td", {}, el("a", { href: `/runs/${encodeURIComponent(run.run_id)}`, text: run.run_id })),
        el("td", {}, runPill(run)),
        el("td", { text: when(run.started_at) }),
        el("td", { class: "num", text: run.token ? "—" : duration(run.duration ?? (goingOn(run.status) ? Date.now() / 1000 - run.started_at : null)) }),
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

// What the list shows: the filters (kept in the address, so a search can be shared or
// reloaded) and the keyset page: each page starts after the last run of the one before.
const FILTERS = ["q", "status", "tool", "since", "until"];
const pages = [null]; // the "after" of each page seen, from the first (null) on
let pageIndex = 0;
let nextCursor = null;
let polling = null;

function filterParams() {
  const params = new URLSearchParams();
  for (const name of FILTERS) {
    const value = document.getElementById(name).value.trim();
    if (value) params.set(name, value);
  }
  return params;
}

function showFiltersFromAddress() {
  const params = new URLSearchParams(location.search);
  for (const name of FILTERS) document.getElementById(name).value = params.get(name) || "";
}

function filtered() {
  return [...filterParams().keys()].length > 0;
}

async function loadRuns() {
  const params = filterParams();
  const after = pages[pageIndex];
  if (after) params.set("after", after);
  const page = await fetchJSON(`/api/runs?${params}`);
  nextCursor = page.next;
  renderRuns(page.runs);
  document.getElementById("newer").disabled = pageIndex === 0;
  document.getElementById("older").disabled = !nextCursor;
  document.getElementById("page-info").textContent = page.runs.length ? `page ${pageIndex + 1}` : "";
  document.getElementById("empty").textContent = filtered() || pageIndex > 0 ? "No runs match." : "No runs in this journal yet.";
}

async function pollRuns() {
  clearTimeout(polling);
  try {
    renderPending(await fetchJSON("/api/approvals"));
    await loadRuns();
    showProblem(null);
  } catch (error) {
    showProblem(error);
  }
  polling = setTimeout(pollRuns, POLL_MS);
}

function startRuns() {
  showFiltersFromAddress();
  const form = document.getElementById("filters");
  const restart = () => {
    pages.length = 1;
    pageIndex = 0;
    const params = filterParams();
    history.replaceState(null, "", params.toString() ? `/?${params}` : "/");
    pollRuns();
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    restart();
  });
  document.getElementById("status").addEventListener("change", restart);
  document.getElementById("clear").addEventListener("click", () => {
    for (const name of FILTERS) document.getElementById(name).value = "";
    restart();
  });
  document.getElementById("older").addEventListener("click", () => {
    if (!nextCursor) return;
    pages[pageIndex + 1] = nextCursor;
    pageIndex += 1;
    pollRuns();
  });
  document.getElementById("newer").addEventListener("click", () => {
    if (pageIndex === 0) return;
    pageIndex -= 1;
    pollRuns();
  });
  pollRuns();
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

function copyButton(text) {
  const button = el("button", { type: "button", class: "copy", title: "copy to the clipboard", text: "copy" });
  button.addEventListener("click", async (event) => {
    event.preventDefault(); // inside a <summary>: copying does not open or close it
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "copied";
    } catch {
      button.textContent = "copy failed";
    }
    setTimeout(() => (button.textContent = "copy"), 1500);
  });
  return button;
}

// Text is shown as it is; JSON (an object or a list) is folded to one line until opened,
// so a big argument or result does not push the waterfall off the screen. Each has a copy button.
const opened = new Set();

function detail(label, value, cls, options) {
  if (value === null || value === undefined || value === "") return null;
  if (typeof value === "string" || typeof value !== "object") {
    const text = String(value);
    return el("div", { class: `detail ${cls || ""}` }, el("span", { class: "key", text: label }), el("pre", { text }), copyButton(text));
  }
  const text = json(value);
  const key = options && options.key;
  const open = (options && options.open) || (key && opened.has(key));
  const preview = JSON.stringify(value);
  const folded = el(
    "details",
    { class: `detail json ${cls || ""}`, open: open ? true : undefined },
    el("summary", {}, el("span", { class: "key", text: label }), el("code", { class: "preview", text: preview.length > 120 ? `${preview.slice(0, 117)}…` : preview }), copyButton(text)),
    el("pre", { text }),
  );
  if (key) folded.addEventListener("toggle", () => (folded.open ? opened.add(key) : opened.delete(key)));
  return folded;
}

function stepDetails(step) {
  const outputErrors = step.entries.filter((entry) => entry.output_error);
  return el(
    "div",
    { class: "details" },
    detail("idempotency key", step.idempotency_key, "mono"),
    detail("input", step.input, "", { key: `${step.step_key}\u0000input` }),
    step.status === "completed" ? detail("output", step.output, "", { key: `${step.step_key}\u0000output` }) : null,
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
      step.kind === "tool"
        ? el("a", { class: "name", href: `/tools/${encodeURIComponent(step.name)}`, title: "this tool's calls, errors and latency", text: step.name })
        : el("span", { class: "name", text: step.name }),
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
    el("h1", {}, el("span", { class: "run-id", text: run.run_id }), runPill(run)),
    el("dl", { class: "facts" }, ...facts.flatMap(([key, value]) => [el("dt", { text: key }), el("dd", { text: value })])),
    run.token ? el("p", { class: "hint token-state", text: tokenLine(run.token) }) : null,
    run.entries > 1 ? el("p", { class: "hint", text: "Entered more than once: steps completed in an earlier entry were answered from the journal, not run again." }) : null,
    run.error ? el("p", { class: "run-error", text: run.error }) : null,
  ];
  document.getElementById("summary").replaceChildren(...parts.filter(Boolean));
}

function tokenLine(token) {
  const made = `${token.calls} of ${token.max_calls} calls made`;
  const state = {
    active: `its sidecar token ${token.id} is active until ${when(token.expires_at)}: a sandbox elsewhere may call again`,
    expired: `its sidecar token ${token.id} expired at ${when(token.expires_at)}: nothing more will be recorded`,
    revoked: `its sidecar token ${token.id} was revoked at ${when(token.revoked_at)}: nothing more will be recorded`,
    "used up": `its sidecar token ${token.id} has made all its calls: nothing more will be recorded`,
  }[token.state];
  return `This run is recorded by a sandbox started elsewhere; ${state} (${made}).`;
}

// ---- cancelling a run ------------------------------------------------------------------

function cancellable(run) {
  return !run.token && (goingOn(run.status) || run.status === "interrupted");
}

async function cancelRun(event) {
  event.preventDefault();
  const name = document.getElementById("canceller");
  const status = document.getElementById("cancel-status");
  const by = name.value.trim();
  if (!by) {
    status.className = "cancel-status decision-error";
    status.textContent = "Enter your name first: it is recorded with the cancel.";
    name.focus();
    return;
  }
  localStorage.setItem(NAME_KEY, by);
  const body = { by };
  const reason = document.getElementById("cancel-reason").value.trim();
  if (reason) body.reason = reason;
  const button = document.getElementById("cancel-run");
  button.disabled = true;
  try {
    const response = await fetch(`/api/runs/${encodeURIComponent(runId())}/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json", "x-toolbridge-token": token() },
      body: JSON.stringify(body),
      cache: "no-store",
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || `${response.status} ${response.statusText}`);
    status.className = "cancel-status decision-done";
    status.textContent = `cancelled by ${by}`;
    pollRun();
  } catch (error) {
    status.className = "cancel-status decision-error";
    status.textContent = error.message;
    button.disabled = false;
  }
}

function renderCancel(run) {
  const form = document.getElementById("cancel");
  if (!form.dataset.ready) {
    form.dataset.ready = "1";
    document.getElementById("canceller").value = localStorage.getItem(NAME_KEY) || "";
    form.addEventListener("submit", cancelRun);
  }
  // A cancelled run keeps the form (and what it said) until the page is left.
  if (cancellable(run)) form.hidden = false;
  else if (!document.getElementById("cancel-status").textContent) form.hidden = true;
}

function renderRun(run) {
  renderSummary(run);
  renderCancel(run);
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

let runPolling = null;

async function pollRun() {
  clearTimeout(runPolling);
  try {
    current = await fetchJSON(`/api/runs/${encodeURIComponent(runId())}`);
    renderRun(current);
    showProblem(null);
  } catch (error) {
    showProblem(error);
  }
  // A finished run changes no more; a running one is followed until it ends.
  if (!current || goingOn(current.status) || (current.token && current.token.state === "active")) {
    runPolling = setTimeout(pollRun, POLL_MS);
  }
}

// ---- one tool: its calls, error rate, latency and latest errors -------------------------

function percent(fraction) {
  return fraction === null || fraction === undefined ? "—" : `${(fraction * 100).toFixed(1)} %`;
}

async function loadTool() {
  const name = decodeURIComponent(location.pathname.replace(/^\/tools\//, ""));
  document.title = `toolbridge · ${name}`;
  document.getElementById("crumb").textContent = name;
  try {
    const tool = await fetchJSON(`/api/tools/${encodeURIComponent(name)}`);
    const facts = [
      ["calls", tool.calls >= tool.window ? `the latest ${tool.window}` : String(tool.calls)],
      ["failed", String(tool.failed)],
      ["error rate", percent(tool.error_rate)],
      ["p50", tool.p50 === null ? "—" : duration(tool.p50)],
      ["p99", tool.p99 === null ? "—" : duration(tool.p99)],
      ["running", String(tool.running)],
      ["last call", tool.last_call_at ? when(tool.last_call_at) : "never"],
    ];
    document.getElementById("summary").replaceChildren(
      el("h1", {}, el("span", { class: "run-id", text: tool.tool }), el("span", { class: "pill tool", text: "tool" })),
      el("dl", { class: "facts tool-facts" }, ...facts.flatMap(([key, value]) => [el("dt", { text: key }), el("dd", { "data-fact": key, text: value })])),
      el("p", { class: "hint" }, "Error rate and latency over its latest calls (a call still running is not counted). ", el("a", { href: `/?tool=${encodeURIComponent(tool.tool)}`, text: "The runs that called it" }), "."),
    );
    document.getElementById("no-errors").hidden = tool.last_errors.length > 0;
    document.querySelector("#errors tbody").replaceChildren(
      ...tool.last_errors.map((call) =>
        el(
          "tr",
          { class: "call failed", "data-run": call.run_id },
          el("td", {}, el("a", { href: `/runs/${encodeURIComponent(call.run_id)}`, text: call.run_id })),
          el("td", { class: "mono", text: call.step_key }),
          el("td", { text: call.at ? when(call.at) : "" }),
          el("td", { class: "error-text", text: call.error }),
          el("td", { class: "mono", text: call.error_id }),
        ),
      ),
    );
    showProblem(null);
  } catch (error) {
    showProblem(error);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "runs") startRuns();
  else if (page === "tool") loadTool();
  else pollRun();
});
