// air's web UI. Renders from air's JSON API (/api/air/...) and the MLflow API of the same
// server (/api/2.0/mlflow/...), with the browser's session (session.js: airFetch, the login
// page). Values from runs (names, log lines, params) only ever reach the page through
// textContent: no workload text is parsed as HTML.
"use strict";

const main = document.getElementById("main");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function getJson(url) {
  const res = await airFetch(url);
  const body = await res.json();
  if (!res.ok) throw new Error(body.message || res.statusText);
  return body;
}

function stateBadge(state) { return el("span", { class: "state state-" + state }, state); }

function table(headers, rows, id) {
  const t = el("table", id ? { id } : {});
  t.append(el("tr", {}, ...headers.map((h) => el("th", {}, h))));
  for (const row of rows) t.append(el("tr", {}, ...row.map((c) => el("td", {}, c))));
  return t;
}

function durationText(s) {
  if (!s) return "";
  if (s < 60) return s.toFixed(1) + " s";
  return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
}

// --- runs table ---

async function showRuns() {
  const params = new URLSearchParams(location.search);
  const stateSel = el("select", { id: "filter-state" }, el("option", { value: "" }, "any"),
    ...["PENDING", "RUNNING", "TERMINATING", "SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELED",
        "INTERNAL_ERROR"].map((s) => el("option", { value: s }, s)));
  stateSel.value = params.get("state") || "";
  const expInput = el("input", { id: "filter-experiment", placeholder: "glob, e.g. sft-*" });
  expInput.value = params.get("experiment") || "";
  const apply = () => {
    const q = new URLSearchParams();
    if (stateSel.value) q.set("state", stateSel.value);
    if (expInput.value) q.set("experiment", expInput.value);
    history.replaceState(null, "", "/?" + q.toString());
    showRuns();
  };
  stateSel.onchange = apply;
  expInput.onchange = apply;
  const q = new URLSearchParams();
  if (params.get("state")) q.set("state", params.get("state"));
  if (params.get("experiment")) q.set("experiment", params.get("experiment"));
  const data = await getJson("/api/air/runs?" + q.toString());
  const rows = data.runs.map((r) => [
    el("a", { href: "/runs/" + r.run_id }, String(r.run_id)), r.experiment, stateBadge(r.state),
    String(r.num_nodes), r.backend || "", r.created || "",
    durationText(r.duration_s), r.gpu_hours ? r.gpu_hours.toFixed(3) : ""]);
  main.replaceChildren(
    el("h1", {}, "Runs"),
    el("div", { class: "filters" }, el("label", {}, "state ", stateSel),
       el("label", {}, "experiment ", expInput)),
    rows.length ? table(["id", "experiment", "state", "nodes", "backend", "start", "duration", "GPU-hours"],
                        rows, "runs") : el("p", { class: "muted" }, "No runs."));
}

// --- one run ---

// The run's progress (air get's progress rows): step, ETA, time to first step, tokens/s, MFU,
// GPU-hours; blank where the run reports nothing.
function progressTable(p) {
  if (!p) return null;
  const step = p.step === null ? "" : p.step + (p.max_steps ? "/" + p.max_steps : "") +
    (p.percent === null ? "" : " (" + Math.round(p.percent) + "%)");
  return table(["step", "steps/s", "ETA", "first step", "tokens/s", "MFU", "GPU-hours"],
    [[step, p.steps_per_s === null ? "" : p.steps_per_s.toPrecision(3),
      p.eta_s === null ? "" : durationText(p.eta_s) || "0 s",
      p.time_to_first_step_s === null ? "" : durationText(p.time_to_first_step_s),
      p.tokens_per_s === null ? "" : p.tokens_per_s.toFixed(0),
      p.mfu === null ? "" : (p.mfu * 100).toFixed(1) + "%",
      p.accelerators ? p.gpu_hours.toFixed(3) : ""]], "progress");
}

const charts = [];

async function metricSeries(runId, key) {
  const h = await getJson("/api/2.0/mlflow/metrics/get-history?run_id=" +
                          encodeURIComponent(runId) + "&metric_key=" + encodeURIComponent(key));
  return (h.metrics || []).map((m) => ({ x: Number(m.step), y: typeof m.value === "number" ? m.value : NaN }));
}

async function drawCharts(container, runs) {
  // runs: [{label, runId}]; one chart per metric key of the first run, every run overlaid.
  for (const c of charts.splice(0)) c.destroy();
  container.replaceChildren();
  const first = await getJson("/api/2.0/mlflow/runs/get?run_id=" + encodeURIComponent(runs[0].runId));
  // The nodes' system metrics have their own charts (drawSystemCharts).
  const keys = ((first.run.data || {}).metrics || []).map((m) => m.key)
    .filter((k) => !k.startsWith("system/")).sort();
  if (!keys.length) { container.append(el("p", { class: "muted" }, "No metrics logged.")); return; }
  const palette = ["#2f6fdb", "#d9482b", "#2a9d55", "#8e44ad", "#c08a00"];
  for (const key of keys) {
    const canvas = el("canvas", { id: "chart-" + key });
    container.append(el("div", { class: "chart" }, canvas));
    const datasets = [];
    for (const [i, r] of runs.entries()) {
      datasets.push({ label: r.label + " " + key, data: await metricSeries(r.runId, key),
                      borderColor: palette[i % palette.length], pointRadius: 0, borderWidth: 1.5 });
    }
    charts.push(new Chart(canvas, {
      type: "line", data: { datasets },
      options: { animation: false, parsing: false, responsive: true, maintainAspectRatio: false,
                 scales: { x: { type: "linear", title: { display: true, text: "step" } },
                           y: { title: { display: true, text: key } } } },
    }));
  }
}

// MLflow's system metrics of a multi-node run, system/<node>/<name>: one chart per name with a
// line per node, against seconds since the run started (their step).
const systemCharts = [];

async function drawSystemCharts(container, runId) {
  for (const c of systemCharts.splice(0)) c.destroy();
  const got = await getJson("/api/2.0/mlflow/runs/get?run_id=" + encodeURIComponent(runId));
  const byName = {};
  for (const m of ((got.run.data || {}).metrics || [])) {
    const parts = m.key.match(/^system\/([^/]+)\/(.+)$/);
    if (parts) (byName[parts[2]] = byName[parts[2]] || []).push(parts[1]);
  }
  // CPU and memory first, then the GPUs, disk and network.
  const order = ["cpu_", "system_memory_", "gpu_", "disk_", "network_"];
  const rank = (n) => { const i = order.findIndex((p) => n.startsWith(p)); return i < 0 ? order.length : i; };
  const names = Object.keys(byName).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  if (!names.length) { container.append(el("p", { class: "muted" }, "No system metrics.")); return; }
  const palette = ["#2f6fdb", "#d9482b", "#2a9d55", "#8e44ad", "#c08a00"];
  for (const name of names) {
    const canvas = el("canvas", { id: "chart-system-" + name });
    container.append(el("div", { class: "chart" }, canvas));
    const datasets = [];
    for (const [i, node] of byName[name].sort().entries()) {
      datasets.push({ label: node.replace("_", " "), data: await metricSeries(runId, `system/${node}/${name}`),
                      borderColor: palette[i % palette.length], pointRadius: 0, borderWidth: 1.5 });
    }
    systemCharts.push(new Chart(canvas, {
      type: "line", data: { datasets },
      options: { animation: false, parsing: false, responsive: true, maintainAspectRatio: false,
                 scales: { x: { type: "linear", title: { display: true, text: "seconds" } },
                           y: { title: { display: true, text: name } } } },
    }));
  }
}

function logView(runId, attempts, runNodes, live) {
  const attemptSel = el("select", { id: "log-attempt" },
    ...attempts.map((a) => el("option", { value: a.attempt }, "attempt " + a.attempt)));
  attemptSel.value = attempts.length ? String(attempts[attempts.length - 1].attempt) : "0";
  // An elastic attempt may have fewer nodes than the run asked for.
  const nodesOf = () => {
    const a = attempts.find((x) => String(x.attempt) === attemptSel.value);
    return a && a.num_nodes ? a.num_nodes : runNodes;
  };
  const nodeSel = el("select", { id: "log-node" });
  const fillNodes = () => {
    const keep = nodeSel.value;
    nodeSel.replaceChildren(el("option", { value: "all" }, "all nodes"),
      ...Array.from({ length: nodesOf() }, (_, n) => el("option", { value: n }, "node " + n)));
    nodeSel.value = keep && Number(keep) < nodesOf() ? keep : "all";
  };
  fillNodes();
  const box = el("div", { id: "logs" });
  let timer = null;
  const state = {};
  async function refresh() {
    const numNodes = nodesOf();
    const nodes = nodeSel.value === "all" ? [...Array(numNodes).keys()] : [Number(nodeSel.value)];
    for (const n of nodes) {
      const key = attemptSel.value + "/" + n;
      if (!state[key]) {
        const pre = el("pre", { class: "log", id: "log-node-" + n });
        state[key] = { offset: 0, pre };
      }
      const s = state[key];
      const data = await getJson(`/api/air/runs/${runId}/logs?attempt=${attemptSel.value}&node=${n}&offset=${s.offset}`);
      for (const line of data.lines) {
        s.pre.append(el("span", { class: line.stream }, line.text + "\n"));
      }
      s.offset = data.next_offset;
    }
    box.replaceChildren(...nodes.map((n) => [el("h3", {}, "node " + n), state[attemptSel.value + "/" + n].pre]).flat());
  }
  attemptSel.onchange = () => { fillNodes(); refresh(); };
  nodeSel.onchange = refresh;
  refresh();
  if (live) timer = setInterval(refresh, 1000);
  return { view: el("div", {}, el("div", { class: "filters" }, attemptSel, " ", nodeSel), box),
           stop: () => timer && clearInterval(timer), refresh };
}

// While the run is live: its state badge and progress table follow it once a second (as the
// logs do), without reloading the page; when it ends, the last values are shown and the
// polling stops (the logs' too, after their last lines).
let stopFollowing = () => {};

function followRun(runId, badge, progressBox, logs) {
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const run = await getJson("/api/air/runs/" + runId);
      badge.replaceChildren(stateBadge(run.state));
      progressBox.replaceChildren(...(run.progress ? [progressTable(run.progress)] : []));
      if (!["PENDING", "RUNNING", "TERMINATING"].includes(run.state)) {
        stop();
        await logs.refresh();
      }
    } finally {
      busy = false;
    }
  }, 1000);
  const stop = () => { clearInterval(timer); logs.stop(); };
  stopFollowing = stop;
}

async function showRun(runId) {
  const run = await getJson("/api/air/runs/" + runId);
  const live = ["PENDING", "RUNNING", "TERMINATING"].includes(run.state);
  const badge = el("span", { id: "run-state" }, stateBadge(run.state));
  const parts = [el("h1", {}, "Run " + run.run_id + " ", badge)];
  parts.push(table(["experiment", "nodes", "backend", "created", "duration", "MLflow run"],
    [[run.experiment, String(run.num_nodes), run.backend || "", run.created || "",
      durationText(run.duration_s), run.tracking ? run.tracking.run_id : ""]]));
  const progressBox = el("div", { id: "progress-box" }, run.progress ? progressTable(run.progress) : null);
  if (run.progress || live) parts.push(el("h2", {}, "Progress"), progressBox);
  if (run.failure_summary) {
    parts.push(el("h2", {}, "Failure"), el("div", { class: "failure", id: "failure" }, run.failure_summary));
  }
  if ((run.alerts || []).length) {
    parts.push(el("h2", {}, "Alerts"), table(["time", "attempt", "node", "rank", "alert", "line"],
      run.alerts.map((a) => [a.time, String(a.attempt), String(a.node),
        a.rank === null ? "" : String(a.rank), a.headline, el("code", {}, a.line)]), "alerts"));
  }
  parts.push(el("h2", {}, "Timeline"), table(["time", "event", "attempt", "node", "message"],
    (run.events || []).map((e) => [e.ts, e.to ? (e.from || "") + " → " + e.to : e.kind,
      e.attempt === null ? "" : String(e.attempt), e.node === null ? "" : String(e.node), e.message]),
    "timeline"));
  parts.push(el("h2", {}, "Attempts"), table(["attempt", "state", "size", "nodes", "failure"],
    (run.attempt_details || []).map((a) => [String(a.attempt), stateBadge(a.state),
      a.num_nodes + (a.num_nodes === 1 ? " node" : " nodes") + " (world size " + a.world_size + ")",
      (a.nodes || []).map((n) => "node " + n.node_rank + " " + n.state +
        (n.exit_code !== null && n.exit_code !== undefined ? " (exit " + n.exit_code + ")" : "")).join(", "),
      a.failure_summary || ""]), "attempts"));
  const metrics = el("div", { class: "charts", id: "charts" });
  const params = el("div", { id: "params" });
  const compare = el("input", { id: "compare", placeholder: "air run ids, e.g. 3,4" });
  parts.push(el("h2", {}, "Metrics"), el("div", { class: "filters" }, el("label", {}, "compare with ", compare)), metrics);
  const system = el("div", { class: "charts", id: "system-charts" });
  parts.push(el("h2", {}, "System metrics"), system);
  parts.push(el("h2", {}, "Params"), params);
  const logs = logView(run.run_id, run.attempt_details || [], run.num_nodes, live);
  parts.push(el("h2", {}, "Logs"), logs.view);
  main.replaceChildren(...parts);
  if (live) followRun(run.run_id, badge, progressBox, logs);
  if (!run.tracking || run.tracking.external_uri) {
    metrics.append(el("p", { class: "muted" }, run.tracking ?
      "Tracked on " + run.tracking.external_uri : "This run has no tracking run."));
    return;
  }
  const mlflowRun = await getJson("/api/2.0/mlflow/runs/get?run_id=" + encodeURIComponent(run.tracking.run_id));
  const ps = (mlflowRun.run.data || {}).params || [];
  params.append(ps.length ? table(["param", "value"], ps.map((p) => [p.key, p.value]), "params-table")
                          : el("p", { class: "muted" }, "No params logged."));
  const series = [{ label: "run " + run.run_id, runId: run.tracking.run_id }];
  await drawCharts(metrics, series);
  await drawSystemCharts(system, run.tracking.run_id);
  compare.onchange = async () => {
    const others = [];
    for (const id of compare.value.split(",").map((s) => s.trim()).filter(Boolean)) {
      const other = await getJson("/api/air/runs/" + encodeURIComponent(id));
      if (other.tracking && !other.tracking.external_uri) others.push({ label: "run " + id, runId: other.tracking.run_id });
    }
    await drawCharts(metrics, series.concat(others));
  };
}

// --- MLflow's links: the mlflow client prints <server>/#/experiments/<E>/runs/<R> ---

async function showTrackingLink(experimentId, runId) {
  if (!runId) {
    const exp = await getJson("/api/2.0/mlflow/experiments/get?experiment_id=" +
                              encodeURIComponent(experimentId));
    history.replaceState(null, "", "/?experiment=" + encodeURIComponent(exp.experiment.name));
    return showRuns();
  }
  const got = await getJson("/api/2.0/mlflow/runs/get?run_id=" + encodeURIComponent(runId));
  const tags = (got.run.data || {}).tags || [];
  const airRun = tags.find((t) => t.key === "air.run_id");
  if (airRun) {
    history.replaceState(null, "", "/runs/" + encodeURIComponent(airRun.value));
    return showRun(airRun.value);
  }
  // A run logged straight to this server by an MLflow client: its own page.
  const info = got.run.info;
  const metrics = el("div", { class: "charts", id: "charts" });
  const ps = (got.run.data || {}).params || [];
  main.replaceChildren(
    el("h1", {}, "MLflow run " + (info.run_name || info.run_id) + " ", stateBadge(info.status)),
    table(["run id", "experiment", "status"], [[info.run_id, info.experiment_id, info.status]],
          "mlflow-run"),
    el("h2", {}, "Metrics"), metrics,
    el("h2", {}, "Params"),
    el("div", { id: "params" },
       ps.length ? table(["param", "value"], ps.map((p) => [p.key, p.value]), "params-table")
                 : el("p", { class: "muted" }, "No params logged.")));
  await drawCharts(metrics, [{ label: info.run_name || info.run_id, runId: info.run_id }]);
}

async function route() {
  stopFollowing();
  try {
    if (location.pathname === "/login") return await completeLogin(main);
    const link = location.hash.match(/^#\/experiments\/([^/?]+)(?:\/runs\/([^/?]+))?/);
    const m = location.pathname.match(/^\/runs\/(\d+)$/);
    if (link) await showTrackingLink(decodeURIComponent(link[1]), link[2] && decodeURIComponent(link[2]));
    else if (m) await showRun(m[1]); else await showRuns();
    document.body.dataset.ready = "1";
  } catch (err) {
    if (err instanceof LoginNeeded) return showLoginNeeded(main, err.message);
    main.replaceChildren(el("p", { class: "failure" }, "Error: " + err.message));
    document.body.dataset.ready = "error";
  }
}

route();
// A link pasted into a tab already showing the UI changes only the hash (the MLflow client's
// /#/experiments/E/runs/R): route again without a reload.
window.addEventListener("hashchange", () => {
  document.body.dataset.ready = "";
  route();
});
