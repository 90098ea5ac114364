// The dashboard reads the JSON API every 2 s. Everything from the API goes in through
// textContent, never as HTML, so a timer's or schedule's id, URL or error cannot inject markup.
"use strict";

const token = document.getElementById("token");
token.value = sessionStorage.getItem("tickwheel-token") || "";
token.addEventListener("change", () => {
  sessionStorage.setItem("tickwheel-token", token.value);
  refresh();
});

async function api(path) {
  const headers = token.value ? { Authorization: "Bearer " + token.value } : {};
  const response = await fetch(path, { headers });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  row.appendChild(td);
}

function target(timer) {
  return timer.callback ? timer.callback.method + " " + timer.callback.url : "queue " + timer.queue;
}

function rule(schedule) {
  return schedule.cron != null ? schedule.cron + " (" + schedule.timezone + ")" : "every " + schedule.every + " s";
}

function scheduleState(schedule) {
  if (schedule.next_run == null) return "ended";
  return schedule.paused ? "paused" : "active";
}

function fill(id, timers, columns) {
  const body = document.getElementById(id);
  body.replaceChildren(...timers.map((timer) => {
    const row = document.createElement("tr");
    columns.forEach((column) => cell(row, column(timer)));
    return row;
  }));
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const [stats, timers, schedules, dead] = await Promise.all([
      api("/v1/stats"), api("/v1/timers?limit=50"), api("/v1/schedules?limit=50"),
      api("/v1/dead?limit=50"),
    ]);
    const counts = document.getElementById("counts");
    counts.replaceChildren(...Object.entries(stats.counts).map(([state, count]) => {
      const box = document.createElement("div");
      box.className = "count";
      const number = document.createElement("b");
      number.textContent = count;
      box.append(number, state);
      return box;
    }));
    document.getElementById("earliest").textContent = stats.earliest_due || "–";
    fill("timers", timers.timers, [(t) => t.id, (t) => t.state, (t) => t.due, (t) => t.attempt, target, (t) => t.last_error]);
    fill("schedules", schedules.schedules, [(s) => s.id, rule, (s) => s.next_run || "–", (s) => s.runs, scheduleState, target]);
    fill("dead", dead.timers, [(t) => t.id, (t) => t.due, (t) => t.attempt, target, (t) => t.last_error]);
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "";
  } catch (error) {
    status.textContent = "cannot read the API: " + error.message;
    status.className = "error";
  }
}

refresh();
setInterval(refresh, 2000);
