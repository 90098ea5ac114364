// The dashboard reads the JSON API and acts through it with the same bearer token, kept in
// sessionStorage (never in a URL). While the event stream (/v1/events) is open it reads the
// API when a change comes (at most once a second) and every 15 s, and only the chart's
// /metrics every 2 s (a time series, not a change); without the stream, all of it every 2 s.
// Everything from the API goes in through textContent, never as HTML, so a timer's id,
// payload or error cannot inject markup.
"use strict";

const TOKEN_KEY = "tickwheel-token";
const POLL_MS = 2000;
const CHART_WINDOW_MS = 5 * 60 * 1000;
const PAGE_SIZE = 200; // timers asked for per request
const MAX_PAGES = 5; // requests per refresh when an id prefix filters the list
const SHOWN = 100; // rows the timer and dead-letter tables show
const TABLE_PAGE = 50; // queues and host limits shown at once: a page, not the whole table
const CHANGE_REFRESH_MS = 1000; // a change streamed in: read the API this long after it
const LIVE_POLL_MS = 15000; // streaming: read the API at least this often (chart, limits)
const STREAM_RETRY_MS = [1000, 2000, 5000, 10000, 30000]; // waits before reconnecting
const MAX_PARTIAL_EVENT = 65536; // a stream's unfinished event is never held past this

// Where the queue and host-limit tables are: the cursor their page starts at (null: the first),
// the cursors of the pages before it, and the cursor of the page after it (null: none).
const pagers = { queues: { start: null, back: [], next: null }, limits: { start: null, back: [], next: null } };

let token = sessionStorage.getItem(TOKEN_KEY) || "";
let selected = null; // the id whose details are open
let selectedSchedule = null; // the schedule whose runs are open
let generation = 0; // refreshes started; only the latest one draws
let lastRefresh = 0; // when the latest refresh started (ms)
let live = null; // the event stream's AbortController, or null when none is asked for
let streaming = false; // the stream is open: changes come as they happen
let lastEventId = null; // where a reconnected stream resumes
let failures = 0; // streams that failed in a row: the reconnect waits longer each time
let changeTimer = null; // the refresh a streamed change asked for, not yet run
const samples = []; // {at, fired, lateSum, lateCount, queue} read from /metrics
const drawn = new Map(); // table body id -> the JSON of what it shows, to redraw on change only

const $ = (id) => document.getElementById(id);

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// One segment of a URL path. A browser resolves "." and ".." (even percent-encoded) as
// directory steps, so a timer with such an id cannot be addressed from here.
function segment(value) {
  if (value === "." || value === "..") throw new ApiError(0, `the id ${value} cannot be sent from a browser; use the CLI`);
  return encodeURIComponent(value);
}

async function request(method, path, body) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  if (!response.ok) {
    let message = response.statusText || "HTTP " + response.status;
    try {
      message = JSON.parse(text).error.message;
    } catch (ignored) {
      // not the API's error shape: keep the status line
    }
    throw new ApiError(response.status, message);
  }
  return text;
}

async function api(method, path, body) {
  const text = await request(method, path, body);
  return text ? JSON.parse(text) : null;
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) search.set(name, value);
  return search.toString();
}

function notice(text, isError) {
  const element = $("notice");
  element.textContent = text;
  element.className = isError ? "error" : "";
}

function text(tag, value, className) {
  const element = document.createElement(tag);
  element.textContent = value == null ? "" : String(value);
  if (className) element.className = className;
  return element;
}

function button(label, action, args) {
  const element = text("button", label);
  element.type = "button";
  element.dataset.action = action;
  element.dataset.args = JSON.stringify(args);
  return element;
}

function row(cells, actions, id) {
  const tr = document.createElement("tr");
  if (id != null) tr.dataset.id = id;
  if (id != null && id === selected) tr.className = "selected";
  for (const cell of cells) {
    if (cell instanceof HTMLTableCellElement) tr.appendChild(cell);
    else tr.appendChild(cell instanceof Node ? wrap(cell) : text("td", cell));
  }
  const td = document.createElement("td");
  td.className = "actions";
  td.append(...actions);
  tr.appendChild(td);
  return tr;
}

// A cell for text that may be long and unbroken (ids, URLs, errors): it wraps anywhere.
function long(value) {
  return text("td", value, "long");
}

function time(value) {
  return text("td", value, "time");
}

function wrap(node) {
  const td = document.createElement("td");
  td.appendChild(node);
  return td;
}

// Redraw a table only when its data changed, so a button is not replaced under the pointer.
function fill(bodyId, items, render) {
  const key = JSON.stringify([items, selected]);
  if (drawn.get(bodyId) === key) return;
  drawn.set(bodyId, key);
  $(bodyId).replaceChildren(...items.map(render));
}

// One page of a paged table: asks for the page the pager is on.
function loadPage(name, path) {
  return api("GET", path + "?" + query({ limit: TABLE_PAGE, cursor: pagers[name].start }));
}

// Under a paged table: which page it shows, and buttons to move, redrawn on change only.
function showPager(name, shown, cursor) {
  const pager = pagers[name];
  pager.next = cursor;
  const first = pager.back.length * TABLE_PAGE;
  const key = JSON.stringify([first, shown, cursor]);
  const element = $(name + "-pages");
  if (element.dataset.key === key) return;
  element.dataset.key = key;
  const parts = [text("span", shown ? `${first + 1}–${first + shown}${cursor ? ", more after" : ""}` : "")];
  if (pager.back.length) parts.push(button("First page", "page-first", [name]), button("Previous page", "page-back", [name]));
  if (cursor) parts.push(button("Next page", "page-next", [name]));
  element.replaceChildren(...parts);
}

// A table the token may not read (403: an admin's, with a tokens file) says so in one row.
function note(bodyId, message) {
  const key = JSON.stringify(["note", message]);
  if (drawn.get(bodyId) === key) return;
  drawn.set(bodyId, key);
  const cell = text("td", message, "note");
  cell.colSpan = 11;
  const tr = document.createElement("tr");
  tr.appendChild(cell);
  $(bodyId).replaceChildren(tr);
}

function clear(bodyId) {
  drawn.delete(bodyId);
  $(bodyId).replaceChildren();
}

function target(timer) {
  return timer.callback ? timer.callback.method + " " + timer.callback.url : "queue " + timer.queue;
}

function seconds(value) {
  if (value == null) return "–";
  return value < 120 ? value.toFixed(1) + " s" : Math.round(value / 60) + " min";
}

function limitText(limit) {
  if (!limit) return "–";
  const parts = [];
  if (limit.rate != null) parts.push(limit.rate + "/s");
  if (limit.burst != null) parts.push("burst " + limit.burst);
  if (limit.concurrency != null) parts.push("≤ " + limit.concurrency + " at once");
  return parts.join(", ");
}

// A queue's defaults (what its timers take when they fire without their own): the policy in
// short, then the header names (the API shows no values)
function defaultsText(defaults) {
  if (!defaults) return "–";
  const parts = [];
  const retry = defaults.retry;
  if (retry) parts.push(`${retry.max_attempts} attempts, ${retry.timeout} s each`);
  const names = Object.keys(defaults.headers || {});
  if (names.length) parts.push(names.join(", "));
  return parts.join("; ") || "–";
}

// Leased timers are their workers' and never purged; the others a state at a time
const PURGEABLE = ["scheduled", "paused", "dead"];

function renderQueue(queue) {
  const counts = queue.counts;
  const actions = [queue.paused ? button("Resume", "resume-queue", [queue.name]) : button("Pause", "pause-queue", [queue.name])];
  if (counts.dead > 0) actions.push(button(`Replay ${counts.dead} dead`, "replay-queue", [queue.name, counts.dead]));
  if (queue.limit) actions.push(button("Remove limit", "remove-queue-limit", [queue.name]));
  for (const state of PURGEABLE) {
    if (counts[state] > 0) actions.push(button(`Purge ${counts[state]} ${state}`, "purge-queue", [queue.name, state, counts[state]]));
  }
  return row(
    [queue.name, counts.scheduled, counts.leased, counts.paused, counts.done, counts.dead,
      seconds(queue.oldest_overdue_s), queue.paused ? text("span", "paused", "paused") : "active",
      limitText(queue.limit), defaultsText(queue.defaults)],
    actions, queue.name,
  );
}

function renderLimit(limit) {
  return row(
    [long(limit.host), limit.rate == null ? "–" : limit.rate + "/s", limit.burst ?? "–", limit.concurrency ?? "–"],
    [button("Remove", "remove-limit", [limit.host])], limit.host,
  );
}

// A schedule's occurrence (`<schedule>@<ms>`) belongs to its schedule: the API refuses to pause,
// cancel or move it, so only replay (of a dead one) is offered.
function owned(timer) {
  return timer.id.includes("@");
}

function timerActions(timer) {
  const actions = [button("Details", "details", [timer.id])];
  if (owned(timer) && timer.state !== "dead") return actions;
  if (timer.state === "scheduled") {
    actions.push(button("Pause", "pause-timer", [timer.id]), button("Cancel", "cancel", [timer.id]));
  } else if (timer.state === "paused") {
    actions.push(button("Resume", "resume-timer", [timer.id]), button("Cancel", "cancel", [timer.id]));
  } else if (timer.state === "dead") {
    actions.push(button("Replay", "replay", [timer.id]));
  }
  return actions;
}

function renderTimer(timer) {
  const state = timer.state === "paused" ? text("span", "paused", "paused") : timer.state;
  return row([long(timer.id), timer.queue, state, time(timer.due), timer.attempt, long(target(timer)),
    long(timer.last_error)], timerActions(timer), timer.id);
}

function renderDead(timer) {
  return row([long(timer.id), timer.queue, time(timer.due), timer.attempt, long(target(timer)),
    long(timer.last_error)], [button("Details", "details", [timer.id]), button("Replay", "replay", [timer.id])], timer.id);
}

function rule(schedule) {
  return schedule.cron != null ? schedule.cron + " (" + schedule.timezone + ")" : "every " + schedule.every + " s";
}

function scheduleState(schedule) {
  if (schedule.next_run == null) return "ended";
  return schedule.paused ? "paused" : "active";
}

function renderSchedule(schedule) {
  const tr = document.createElement("tr");
  tr.dataset.id = schedule.id;
  for (const value of [schedule.id, rule(schedule), schedule.next_run || "–", schedule.runs, scheduleState(schedule)]) {
    tr.appendChild(text("td", value));
  }
  tr.appendChild(long(target(schedule)));
  tr.appendChild(wrap(button("Runs", "runs", [schedule.id])));
  return tr;
}

// An occurrence of the open schedule; its attempts are its timer's, shown in the details.
function renderRun(run) {
  const cells = [time(run.nominal), long(run.timer_id), run.state || "expired", run.attempt == null ? "–" : run.attempt, long(run.last_error)];
  const actions = run.state == null ? [] : [button("Attempts", "details", [run.timer_id])];
  return row(cells, actions, run.timer_id);
}

// One attempt of the open timer: what it came to, the status or kind of failure, the body.
function renderAttempt(attempt) {
  const result = attempt.status != null ? attempt.status : attempt.error || "–";
  const cells = [attempt.attempt, time(attempt.at), attempt.outcome, result, attempt.latency_ms.toFixed(1),
    time(attempt.next_due || "–"), long(attempt.worker), long(attempt.body)];
  const tr = document.createElement("tr");
  for (const cell of cells) tr.appendChild(cell instanceof Node ? cell : text("td", cell));
  return tr;
}

// The timers the filters select: pages of the list, narrowed to the id prefix here, since the
// API filters by queue and state only; at most MAX_PAGES requests a refresh.
async function filteredTimers() {
  const queue = $("filter-queue").value;
  const state = $("filter-state").value;
  const prefix = $("filter-prefix").value;
  const limit = prefix ? PAGE_SIZE : SHOWN;
  const found = [];
  let cursor = null;
  let scanned = 0;
  let pages = 0;
  do {
    const page = await api("GET", "/v1/timers?" + query({ state, queue, limit, cursor }));
    pages += 1;
    scanned += page.timers.length;
    for (const timer of page.timers) if (timer.id.startsWith(prefix) && found.length < SHOWN) found.push(timer);
    cursor = page.cursor;
  } while (prefix && cursor && found.length < SHOWN && pages < MAX_PAGES);
  const more = cursor ? ` of the first ${scanned}; narrow the filters to see the others` : "";
  $("shown").textContent = `${found.length} shown${more}`;
  return found;
}

// Sums of the counters the chart needs, over every queue or the one the filter names, whatever
// other labels they carry (queue names need no escaping: letters, digits and ._:-).
function readMetrics(body, queue) {
  const sample = { at: Date.now(), fired: 0, lateSum: 0, lateCount: 0 };
  const fields = {
    tickwheel_fired_total: "fired",
    tickwheel_lateness_seconds_sum: "lateSum",
    tickwheel_lateness_seconds_count: "lateCount",
  };
  for (const line of body.split("\n")) {
    const match = /^(\w+)(?:\{(.*)\})? (\S+)( \d+)?$/.exec(line);
    if (!match || !(match[1] in fields)) continue;
    const label = /(?:^|,)queue="([^"]*)"/.exec(match[2] || "");
    if (queue && (!label || label[1] !== queue)) continue;
    const value = Number(match[3]);
    if (Number.isFinite(value)) sample[fields[match[1]]] += value;
  }
  return sample;
}

function addSample(sample) {
  const last = samples[samples.length - 1];
  // a restarted service or another queue filter starts the counters afresh
  if (last && (sample.fired < last.fired || sample.lateCount < last.lateCount || sample.queue !== last.queue)) samples.length = 0;
  samples.push(sample);
  while (samples.length > 1 && samples[0].at < sample.at - CHART_WINDOW_MS) samples.shift();
}

// Points of the chart: callbacks fired per second and their mean lateness, between samples.
function points() {
  const found = [];
  for (let i = 1; i < samples.length; i += 1) {
    const [before, after] = [samples[i - 1], samples[i]];
    const seconds = (after.at - before.at) / 1000;
    const count = after.lateCount - before.lateCount;
    found.push({
      at: after.at,
      rate: seconds > 0 ? (after.fired - before.fired) / seconds : 0,
      late: count > 0 ? ((after.lateSum - before.lateSum) / count) * 1000 : null,
    });
  }
  return found;
}

// A line under the chart: what fired in the last minute and how late, on average.
function summary() {
  const last = samples[samples.length - 1];
  const first = samples.find((sample) => sample.at >= last.at - 60_000);
  if (!first || first === last) return "last minute: waiting for a second reading";
  const fired = last.fired - first.fired;
  const count = last.lateCount - first.lateCount;
  const late = count > 0 ? (((last.lateSum - first.lateSum) / count) * 1000).toFixed(1) + " ms" : "–";
  return `last minute: ${fired} fired, mean lateness ${late}`;
}

function drawChart() {
  $("chart-now").textContent = summary();
  const canvas = $("chart");
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.max(300, Math.round(canvas.clientWidth * ratio));
  canvas.height = Math.round(160 * ratio);
  const context = canvas.getContext("2d");
  const [width, height, pad] = [canvas.width, canvas.height, 24 * ratio];
  context.clearRect(0, 0, width, height);
  context.font = `${11 * ratio}px system-ui, sans-serif`;
  const data = points();
  const now = Date.now();
  const x = (at) => pad + ((at - (now - CHART_WINDOW_MS)) / CHART_WINDOW_MS) * (width - 2 * pad);
  const series = [
    { key: "rate", color: "#0969da", unit: "/s", side: "left" },
    { key: "late", color: "#cf222e", unit: " ms", side: "right" },
  ];
  context.strokeStyle = "#eaeef2";
  context.strokeRect(pad, pad / 2, width - 2 * pad, height - 1.5 * pad);
  context.fillStyle = "#57606a";
  context.fillText("−5 min", pad, height - 6 * ratio);
  context.fillText("now", width - pad - context.measureText("now").width, height - 6 * ratio);
  if (data.length === 0) {
    context.fillText("waiting for a second reading of /metrics…", 2 * pad, height / 2);
    return;
  }
  for (const { key, color, unit, side } of series) {
    const values = data.filter((point) => point[key] != null);
    const top = Math.max(1, ...values.map((point) => point[key]));
    const y = (value) => pad / 2 + (1 - value / top) * (height - 1.5 * pad);
    context.strokeStyle = color;
    context.fillStyle = color;
    context.lineWidth = 1.5 * ratio;
    context.beginPath();
    values.forEach((point, i) => (i ? context.lineTo : context.moveTo).call(context, x(point.at), y(point[key])));
    context.stroke();
    const label = (top < 10 ? top.toFixed(1) : Math.round(top)) + unit;
    const labelX = side === "left" ? 2 : width - context.measureText(label).width - 2;
    context.fillText(label, labelX, pad / 2 + 10 * ratio);
  }
}

function fillQueueFilter(queues) {
  const select = $("filter-queue");
  const names = queues.map((queue) => queue.name);
  const current = select.value;
  if (current && !names.includes(current)) names.push(current);
  const key = JSON.stringify(names);
  if (select.dataset.names === key) return;
  select.dataset.names = key;
  const options = names.map((name) => {
    const option = text("option", name);
    option.value = name;
    return option;
  });
  const all = text("option", "all");
  all.value = "";
  select.replaceChildren(all, ...options);
  select.value = current;
}

// the API moves a scheduled or paused timer (a paused one stays paused), never an occurrence
function movable(timer) {
  return (timer.state === "scheduled" || timer.state === "paused") && !owned(timer);
}

async function showDetails() {
  if (selected == null) return;
  try {
    const timer = await api("GET", "/v1/timers/" + segment(selected));
    $("details-json").textContent = JSON.stringify(timer, null, 2);
    $("reschedule").className = movable(timer) ? "row" : "row hidden";
    const history = await api("GET", "/v1/timers/" + segment(selected) + "/attempts");
    if (history.attempts.length) fill("details-attempts", history.attempts, renderAttempt);
    else note("details-attempts", "no attempts recorded");
  } catch (error) {
    $("details-json").textContent = error.status === 404 ? "this timer is gone" : error.message;
    clear("details-attempts");
  }
}

async function showRuns() {
  if (selectedSchedule == null) return;
  try {
    const body = await api("GET", "/v1/schedules/" + segment(selectedSchedule) + "/runs");
    fill("runs-list", body.runs, renderRun);
  } catch (error) {
    note("runs-list", error.status === 404 ? "this schedule is gone" : error.message);
  }
}

// What each refresh reads, and how it shows it; one that fails leaves the others shown.
const SECTIONS = [
  {
    name: "queues",
    load: () => loadPage("queues", "/v1/queues"),
    show: (body) => {
      fillQueueFilter(body.queues);
      fill("queues", body.queues, renderQueue);
      showPager("queues", body.queues.length, body.cursor);
    },
  },
  {
    name: "limits",
    load: () => loadPage("limits", "/v1/limits"),
    show: (body) => {
      fill("limits", body.limits, renderLimit);
      showPager("limits", body.limits.length, body.cursor);
    },
    denied: (error) => note("limits", "not shown to this token: " + error.message),
  },
  { name: "timers", load: filteredTimers, show: (timers) => fill("timers", timers, renderTimer) },
  {
    name: "dead letters",
    load: () => api("GET", "/v1/timers?" + query({ state: "dead", queue: $("filter-queue").value, limit: SHOWN })),
    show: (body) => fill("dead", body.timers, renderDead),
  },
  {
    name: "schedules",
    load: () => api("GET", "/v1/schedules?limit=50"),
    show: (body) => fill("schedules", body.schedules, renderSchedule),
  },
  {
    name: "metrics",
    load: () => request("GET", "/metrics"),
    show: (body) => {
      const queue = $("filter-queue").value;
      addSample({ ...readMetrics(body, queue), queue });
      drawChart();
    },
    denied: (error) => {
      $("chart-now").textContent = "not shown to this token: " + error.message;
    },
  },
];

// Read /v1/events with fetch, not EventSource: an EventSource cannot send the Authorization
// header, and the token must never go in a URL (it would land in logs and history).
async function stream() {
  const controller = new AbortController();
  live = controller;
  const headers = token ? { Authorization: "Bearer " + token } : {};
  if (lastEventId) headers["Last-Event-ID"] = lastEventId;
  try {
    const init = { headers, cache: "no-store", credentials: "omit", redirect: "error", signal: controller.signal };
    const response = await fetch("/v1/events", init);
    if (!response.ok) throw new ApiError(response.status, "HTTP " + response.status);
    failures = 0;
    streaming = true;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += value;
      let end;
      while ((end = pending.indexOf("\n\n")) >= 0) {
        const block = pending.slice(0, end);
        pending = pending.slice(end + 2);
        let isChange = false;
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) lastEventId = line.slice(4);
          else if (line.startsWith("event: ")) isChange = true;
        }
        if (isChange) changed();
      }
      if (pending.length > MAX_PARTIAL_EVENT) break;
    }
  } catch (ignored) {
    // refused (no token yet, a full server) or cut: the 2 s reads go on meanwhile
  }
  if (live !== controller) return; // a new token started another stream
  live = null;
  streaming = false;
  failures += 1;
  setTimeout(stream, STREAM_RETRY_MS[Math.min(failures, STREAM_RETRY_MS.length) - 1]);
}

function restartStream() {
  if (live) live.abort();
  live = null;
  streaming = false;
  lastEventId = null;
  failures = 0;
  stream();
}

function changed() {
  if (changeTimer === null) {
    changeTimer = setTimeout(() => {
      changeTimer = null;
      refresh();
    }, CHANGE_REFRESH_MS);
  }
}

async function refresh() {
  const status = $("status");
  const mine = ++generation;
  lastRefresh = Date.now();
  const results = await Promise.allSettled(SECTIONS.map((section) => section.load()));
  if (mine !== generation) return;
  const failed = [];
  results.forEach((result, i) => {
    const section = SECTIONS[i];
    if (result.status === "fulfilled") section.show(result.value);
    else if (result.reason.status === 403 && section.denied) section.denied(result.reason);
    else failed.push([section.name, result.reason]);
  });
  if (failed.some(([, error]) => error.status === 401)) {
    selected = selectedSchedule = null;
    $("details").className = "panel hidden";
    $("runs").className = "panel hidden";
    for (const body of ["queues", "limits", "timers", "dead", "schedules"]) clear(body);
    status.textContent = "this service needs a token: enter it above";
    status.className = "error";
    $("token").focus();
    return;
  }
  await showDetails();
  await showRuns();
  if (failed.length) {
    status.textContent = failed.map(([name, error]) => `cannot read ${name}: ${error.message}`).join("; ");
    status.className = "error";
  } else {
    status.textContent = "updated " + new Date().toLocaleTimeString() + (streaming ? " · live" : "");
    status.className = "";
  }
}

const ACTIONS = {
  "pause-timer": (id) => api("POST", `/v1/timers/${segment(id)}/pause`).then(() => `paused ${id}`),
  "resume-timer": (id) => api("POST", `/v1/timers/${segment(id)}/resume`).then(() => `resumed ${id}`),
  cancel: (id) => confirm(`Cancel timer ${id}?`)
    && api("DELETE", `/v1/timers/${segment(id)}`).then(() => `cancelled ${id}`),
  replay: (id) => api("POST", `/v1/dead/${segment(id)}/replay`).then(() => `replayed ${id}`),
  "pause-queue": (name) => api("POST", `/v1/queues/${segment(name)}/pause`).then(() => `paused queue ${name}`),
  "resume-queue": (name) => api("POST", `/v1/queues/${segment(name)}/resume`).then(() => `resumed queue ${name}`),
  "replay-queue": (name, count) => confirm(`Replay the ${count} dead timers of queue ${name}?`)
    && api("POST", "/v1/dead/replay?" + query({ queue: name })).then((body) => `replayed ${body.replayed} timers of queue ${name}`),
  "remove-limit": (host) => confirm(`Remove the limit on host ${host}?`)
    && api("DELETE", `/v1/limits/${segment(host)}`).then(() => `removed the limit on host ${host}`),
  "purge-queue": (name, state, count) => confirm(`Delete the ${count} ${state} timers of queue ${name}? They are gone for good.`)
    && api("DELETE", `/v1/queues/${segment(name)}/timers?` + query({ state }))
      .then((body) => `purged ${body.purged} ${state} timers of queue ${name}`),
  "remove-queue-limit": (name) => confirm(`Remove the limit of queue ${name}?`)
    && api("DELETE", `/v1/queues/${segment(name)}/limit`).then(() => `removed the limit of queue ${name}`),
  "page-next": (name) => {
    const pager = pagers[name];
    if (pager.next) {
      pager.back.push(pager.start);
      pager.start = pager.next;
    }
    return null;
  },
  "page-back": (name) => {
    const pager = pagers[name];
    if (pager.back.length) pager.start = pager.back.pop();
    return null;
  },
  "page-first": (name) => {
    Object.assign(pagers[name], { start: null, back: [] });
    return null;
  },
  details: (id) => {
    selected = id;
    $("details").className = "panel";
    $("details-id").textContent = id;
    $("details-json").textContent = "loading…";
    clear("details-attempts");
    $("reschedule-delay").value = "";
    $("details").scrollIntoView({ block: "nearest" });
    return null;
  },
  runs: (id) => {
    selectedSchedule = id;
    $("runs").className = "panel";
    $("runs-id").textContent = "runs of " + id;
    clear("runs-list");
    return null;
  },
};

async function act(name, args) {
  try {
    const done = await ACTIONS[name](...args);
    if (done) notice(done, false);
  } catch (error) {
    notice(error.message, true);
  }
  await refresh();
}

document.addEventListener("click", (event) => {
  const target = event.target.closest("button[data-action]");
  if (target) act(target.dataset.action, JSON.parse(target.dataset.args));
});

$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  token = $("token").value;
  $("token").value = "";
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  notice(token ? "token in use for this tab" : "no token", false);
  restartStream();
  refresh();
});

$("forget").addEventListener("click", () => {
  token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  notice("token forgotten", false);
  restartStream();
  refresh();
});

$("filters").addEventListener("submit", (event) => event.preventDefault());
for (const id of ["filter-queue", "filter-state", "filter-prefix"]) $(id).addEventListener("input", refresh);

$("runs-close").addEventListener("click", () => {
  selectedSchedule = null;
  $("runs").className = "panel hidden";
});

$("details-close").addEventListener("click", () => {
  selected = null;
  $("details").className = "panel hidden";
  drawn.clear();
  refresh();
});

$("reschedule").addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = selected;
  const delay = Number($("reschedule-delay").value);
  try {
    await api("PATCH", "/v1/timers/" + segment(id), { delay });
    notice(`rescheduled ${id} to run in ${delay} s`, false);
  } catch (error) {
    notice(error.message, true);
  }
  await refresh();
});

// A host limit is PUT /v1/limits/{host}, a queue's PUT /v1/queues/{queue}/limit; the fields
// left empty are not sent, and the API says what it refuses.
$("limit-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const kind = $("limit-kind").value;
  const name = $("limit-name").value.trim();
  const limit = {};
  for (const field of ["rate", "burst", "concurrency"]) {
    const value = $("limit-" + field).value;
    if (value !== "") limit[field] = Number(value);
  }
  try {
    const path = kind === "queue" ? `/v1/queues/${segment(name)}/limit` : `/v1/limits/${segment(name)}`;
    await api("PUT", path, limit);
    notice(`limit set on ${kind} ${name}: ${limitText(limit)}`, false);
  } catch (error) {
    notice(error.message, true);
  }
  await refresh();
});

async function sampleChart() {
  const chart = SECTIONS.find((section) => section.name === "metrics");
  try {
    chart.show(await chart.load());
  } catch (error) {
    if (error.status === 403) chart.denied(error);
  }
}

refresh();
stream();
setInterval(() => {
  if (!streaming || Date.now() - lastRefresh >= LIVE_POLL_MS) refresh();
  else sampleChart();
}, POLL_MS);
