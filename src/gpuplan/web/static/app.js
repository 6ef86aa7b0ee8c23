// gpuplan's page. It does no arithmetic: every number and every formatted line comes from the JSON API
// (POST /api/plan, /api/summary, /api/report, /api/project; GET /api/catalog/models, /api/examples,
// /api/scenarios). The project being edited is one object; each form field edits one path of it, so keys the
// form does not show (LoRA targets, constraints, hardware...) survive a round trip through the page.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const state = { project: null, schemas: {}, summary: null, seq: 0, timer: null, pendingChange: null, exampleSeq: 0 };

// ---- paths in the project object ----
function getAt(obj, path) {
  return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}
function setAt(obj, path, value) {
  const keys = path.split(".");
  const parents = [obj];
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    if (typeof o[k] !== "object" || o[k] === null || Array.isArray(o[k])) o[k] = {};
    o = o[k];
    parents.push(o);
  }
  const last = keys[keys.length - 1];
  if (value === undefined) delete o[last]; else o[last] = value;
  for (let i = keys.length - 1; i > 0; i--) {  // drop sections left empty
    if (Object.keys(parents[i]).length === 0) delete parents[i - 1][keys[i - 1]]; else break;
  }
}

// ---- the project's JSON schema (from /openapi.json): choices for the selects ----
function fieldSchema(ref) {
  const [model, field] = ref.split(".");
  const schema = state.schemas["Project." + model] || {};
  return (schema.properties || {})[field] || {};
}
function enumOf(prop) {
  if (prop.enum) return prop.enum;
  if (prop.items && prop.items.enum) return prop.items.enum;
  for (const alt of prop.anyOf || []) { const e = enumOf(alt); if (e.length) return e; }
  return [];
}
function fillChoices() {
  for (const el of $$("[data-enum]")) {
    const prop = fieldSchema(el.dataset.enum);
    const values = enumOf(prop);
    if (el.tagName === "SELECT") {
      el.replaceChildren();
      if (el.dataset.path !== "workload.task") {
        const dflt = new Option(prop.default !== undefined ? `(default: ${prop.default})` : "(not set)", "");
        el.append(dflt);
      }
      for (const v of values) el.append(new Option(v, v));
    } else {  // a list of checkboxes
      el.replaceChildren(...values.map((v) => {
        const label = document.createElement("label");
        const box = document.createElement("input");
        box.type = "checkbox"; box.value = v;
        label.append(box, " " + v);
        return label;
      }));
    }
  }
}

// ---- form <-> project ----
function modelSource(model) {
  for (const k of ["preset", "hf_id", "config"]) if (model && model[k] !== undefined) return k;
  return null;
}
function showSource(source) {
  for (const el of $$("[data-source]")) el.hidden = el.dataset.source !== source;
  for (const r of $$("input[name=model-source]")) r.checked = r.value === source;
}
function showTask() {
  const task = getAt(state.project, "workload.task");
  for (const el of $$("[data-task=training]")) el.hidden = task === "inference";
  for (const el of $$("[data-task=inference]")) el.hidden = task !== "inference";
  for (const el of $$("[data-lora]")) el.hidden = !(task === "lora" || task === "qlora");
  for (const el of $$("[data-task=dpo]")) el.hidden = task !== "dpo";
  for (const el of $$("[data-task=grpo]")) el.hidden = task !== "grpo";
}
function fillForm() {
  const p = state.project;
  for (const el of $$("[data-path]")) {
    const v = getAt(p, el.dataset.path);
    if (el.dataset.type === "list") {
      const chosen = v === undefined ? enumOf(fieldSchema(el.dataset.enum)) : v;
      for (const box of $$("input", el)) box.checked = chosen.includes(box.value);
    } else if (el.type === "checkbox") {
      el.checked = Boolean(v);
    } else {
      el.value = v === undefined || v === null ? "" : String(v);
    }
  }
  const source = modelSource(p.model);
  const other = p.model && Object.keys(p.model).find((k) => !["preset", "hf_id", "config"].includes(k));
  if (other) showError({ field: "model." + other, detail: `the page takes a preset, a Hub id or a pasted ` +
                         `config.json; model.${other} is for the command line` });
  showSource(source || "preset");
  $("#model-config").value = source === "config" ? JSON.stringify(p.model.config, null, 2) : "";
  $("#scenario-name").value = p.name || "";
  showTask();
}
function readField(el) {
  if (el.dataset.type === "list") return $$("input", el).filter((b) => b.checked).map((b) => b.value);
  if (el.type === "checkbox") return el.checked;
  const raw = el.value.trim();
  if (raw === "") return undefined;
  if (el.dataset.type === "choice-bool") return raw === "true";
  if (el.dataset.type === "int" || el.dataset.type === "float") {
    const n = Number(raw);
    return Number.isFinite(n) ? n : raw;  // not a number: sent as typed, and the API says what is wrong
  }
  return raw;
}

// ---- errors next to the fields they concern ----
function clearErrors() {
  for (const el of $$(".err")) el.textContent = "";
  for (const el of $$("[aria-invalid]")) el.removeAttribute("aria-invalid");
}
function showError(err) {
  const slotFor = (f) => $(`[data-err-for="${CSS.escape(f)}"]`);
  let field = err.field || "";
  while (field && !slotFor(field)) field = field.split(".").slice(0, -1).join(".");
  const slot = field ? slotFor(field) : $("#form-error");
  slot.textContent = field ? (err.detail || err.message) + (err.allowed ? ` (allowed: ${err.allowed})` : "")
                           : err.message || err.detail;
  const input = field && $(`[data-path="${CSS.escape(field)}"]`);
  if (input) input.setAttribute("aria-invalid", "true");
}

// ---- the page's own labels, in the language chosen for the report ----
const FR = {
  "which GPU server to get, and why": "quel serveur GPU prendre, et pourquoi", "Start from": "Partir de",
  "Share link": "Lien à partager", "Download report": "Télécharger le rapport",
  "Download project": "Télécharger le projet", "Project": "Projet", "Name": "Nom", "Model": "Modèle",
  "preset": "préréglage", "Hugging Face id": "identifiant Hugging Face", "paste config.json": "coller config.json",
  "Preset": "Préréglage", "Hub id": "Identifiant Hub", "Task": "Tâche", "Precision": "Précision",
  "Optimizer": "Optimiseur", "Software": "Logiciel", "Micro-batch": "Micro-lot", "Global batch": "Lot global",
  "Sequence length": "Longueur de séquence", "gradient checkpointing": "recalcul des activations",
  "LoRA rank": "Rang LoRA", "Training tokens": "Jetons d'entraînement", "Epochs": "Époques",
  "Concurrent requests": "Requêtes simultanées", "Context length": "Longueur de contexte",
  "Output tokens": "Jetons générés", "Target latency (s)": "Latence visée (s)", "Data": "Données",
  "Samples": "Exemples", "Size (GB)": "Taille (Go)", "Modality": "Modalité", "Goals": "Objectifs",
  "Purpose": "Usage", "Rank by": "Classer par", "Deadline (days)": "Échéance (jours)", "Budget": "Budget",
  "Currency": "Devise", "Budget period": "Période du budget", "Growth": "Croissance",
  "Model size ×": "Taille du modèle ×", "Data ×": "Données ×", "Horizon (months)": "Horizon (mois)",
  "Deployment": "Déploiement", "datacenter GPUs only": "GPU de centre de données seulement",
  "Memory headroom": "Marge de mémoire", "Plan": "Planifier", "Scenarios": "Scénarios",
  "Save as": "Enregistrer sous", "Save scenario": "Enregistrer le scénario", "Compare selected": "Comparer la sélection",
  "Latency of the recommended servers at the project's load (seconds)":
    "Latence des serveurs recommandés à la charge du projet (secondes)",
  "objective": "objectif", "Users": "Utilisateurs", "Think time (s)": "Temps de réflexion (s)",
  "Arrival rate (requests/s)": "Débit d'arrivée (requêtes/s)", "Use case": "Cas d'usage", "Engine": "Moteur",
  "TTFT objective (s)": "Objectif TTFT (s)", "ITL objective (s)": "Objectif ITL (s)",
  "End-to-end objective (s)": "Objectif de bout en bout (s)", "Objective percentile": "Centile des objectifs",
  "Users ×": "Utilisateurs ×",
};
const VERBS = { en: { rent: "Rent", buy: "Buy" }, fr: { rent: "Louer", buy: "Acheter" } };
function relabel(lang) {
  for (const el of $$("legend, label, button, h1 small, h2, caption, th")) {
    for (const node of el.childNodes) {
      if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) continue;
      if (node.english === undefined) node.english = node.textContent.trim();  // the page's own (English) text
      const want = lang === "fr" ? (FR[node.english] || node.english) : node.english;
      node.textContent = node.textContent.replace(node.textContent.trim(), want);
    }
  }
  document.documentElement.lang = lang;
  showVerb();
}
function showVerb() {
  const verbs = VERBS[$("#lang").value] || VERBS.en;
  const verb = state.verb;
  $("#action-verb").textContent = verbs[verb] || ($("#lang").value === "fr" ? "Prendre" : "Get");
}

// ---- calls ----
async function call(method, url, body, as = "json") {
  const res = await fetch(url, { method, headers: body === undefined ? {} : { "Content-Type": "application/json" },
                                 body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    let error = { message: `${res.status} ${res.statusText}` };
    try { error = (await res.json()).error || error; } catch (_) { /* not JSON */ }
    error.status = res.status;
    throw error;
  }
  if (res.status === 204) return null;
  return as === "json" ? res.json() : res.text();
}
function query(extra = {}) {
  return new URLSearchParams({ lang: $("#lang").value, ...extra }).toString();
}

// ---- the plan ----
async function runPlan() {
  const seq = ++state.seq;
  const change = state.pendingChange;
  state.pendingChange = null;
  clearErrors();
  $("#status").textContent = "Planning…";
  const project = structuredClone(state.project);
  try {
    const plan = await call("POST", "/api/plan", project);
    const [summary, report] = await Promise.all([
      call("POST", "/api/summary?" + query(), project),
      call("POST", "/api/report?" + query({ format: "html" }), project, "text"),
    ]);
    if (seq !== state.seq) return;  // a newer change is being planned
    showPlan(project, plan, summary, report, change);
  } catch (err) {
    if (seq !== state.seq) return;
    $("#summary").hidden = true;
    $("#report").hidden = true;
    $("#change").hidden = true;
    if (err.status === 409) {
      $("#status").textContent = "Nothing satisfies this project: " + err.message;
    } else if (err.code === "hub-unavailable") {  // the Hub model could not be fetched: not a mistake in the form
      $("#status").textContent = "The model's config.json could not be fetched; paste it instead.";
      showError({ ...err, field: "model.hf_id", detail: err.message });
    } else if (err.status >= 500 || err.status === 413) {  // the server's limits (time, size) or its failure
      $("#status").textContent = err.message;
    } else {
      $("#status").textContent = "The project needs a correction (next to its field).";
      showError(err);
    }
    state.summary = null;
  }
}
// serving: the percentiles the API returned against the objectives (no arithmetic here)
function showLatency(inf) {
  const table = $("#serving-latency");
  if (!inf || !inf.ttft_s) { table.hidden = true; return; }
  const obj = inf.objectives || {};
  const rows = [["time to first token", inf.ttft_s, obj.ttft_s], ["inter-token latency", inf.itl_s, obj.itl_s],
                ["end to end", inf.e2e_s, obj.e2e_s]];
  table.tBodies[0].replaceChildren(...rows.map(([label, p, target]) => {
    const tr = document.createElement("tr");
    const cells = [label, p.p50.toPrecision(3), p.p90.toPrecision(3), p.p99.toPrecision(3),
                   target == null ? "none" : `${target} at p${obj.percentile}`];
    for (const text of cells) { const td = document.createElement("td"); td.textContent = text; tr.append(td); }
    return tr;
  }));
  table.hidden = false;
}

// serving: latency against load (issue #29), the recommendation's latency_curve drawn as it comes from the API
// (the only arithmetic is the drawing's scale); one panel per latency, the objective across, the planned load marked
const SVG_NS = "http://www.w3.org/2000/svg";
function svgEl(name, attrs, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}
function niceTop(v) {  // a round axis top at or above v
  const step = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * step).find((t) => t >= v) || v;
}
function latencyPanel(curve, metric, title) {
  const W = 260, H = 190, L = 42, R = 8, T = 18, B = 30;
  const pts = curve.points;
  const obj = curve.objectives || {};
  const target = obj[metric + "_s"];
  const xMax = pts[pts.length - 1].requests_per_s;
  const ys = pts.flatMap((p) => Object.values(p[metric + "_s"]));
  const yMax = niceTop(Math.max(...ys, target == null ? 0 : target * 1.1));
  const x = (v) => L + (W - L - R) * v / xMax;
  const y = (v) => H - B - (H - T - B) * Math.min(v, yMax) / yMax;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "data-metric": metric,
                             "aria-label": `${title} against the arrival rate` });
  svg.append(svgEl("text", { x: W / 2, y: 12, "text-anchor": "middle", class: "title" }, title));
  svg.append(svgEl("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }));
  svg.append(svgEl("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
  for (const f of [0, 0.5, 1]) {
    svg.append(svgEl("text", { x: L - 4, y: y(yMax * f) + 3, "text-anchor": "end", class: "tick" },
                     String(Number((yMax * f).toPrecision(2)))));
    svg.append(svgEl("text", { x: x(xMax * f), y: H - B + 12, "text-anchor": "middle", class: "tick" },
                     String(Number((xMax * f).toPrecision(2)))));
  }
  svg.append(svgEl("text", { x: (L + W - R) / 2, y: H - 3, "text-anchor": "middle", class: "tick" },
                   "arrival rate (requests/s)"));
  curve.percentiles.forEach((q, i) => {
    const d = pts.map((p, k) => `${k ? "L" : "M"}${x(p.requests_per_s).toFixed(1)},${y(p[metric + "_s"]["p" + q]).toFixed(1)}`);
    const path = svgEl("path", { d: d.join(" "), class: `series s${i}`, "data-percentile": q });
    path.append(svgEl("title", {}, `p${q}`));
    svg.append(path);
  });
  if (target != null) {
    const line = svgEl("line", { x1: L, x2: W - R, y1: y(target), y2: y(target), class: "slo", "data-value": target });
    line.append(svgEl("title", {}, `objective: ${target} s at p${obj.percentile}`));
    svg.append(line);
  }
  const planned = svgEl("line", { x1: x(curve.planned_requests_per_s), x2: x(curve.planned_requests_per_s), y1: T,
                                  y2: H - B, class: "planned", "data-value": curve.planned_requests_per_s });
  planned.append(svgEl("title", {}, `planned load: ${curve.planned_requests_per_s.toPrecision(3)} requests/s`));
  svg.append(planned);
  if (curve.capacity_requests_per_s) {
    svg.append(svgEl("line", { x1: x(curve.capacity_requests_per_s), x2: x(curve.capacity_requests_per_s), y1: T,
                               y2: H - B, class: "capacity", "data-value": curve.capacity_requests_per_s }));
  }
  return svg;
}
function showLatencyChart(curve) {
  const fig = $("#latency-chart");
  if (!curve || !curve.points || !curve.points.length) { fig.hidden = true; return; }
  const panels = [["ttft", "time to first token"], ["itl", "inter-token latency"], ["e2e", "end to end"]];
  $("#latency-panels").replaceChildren(...panels.map(([m, title]) => latencyPanel(curve, m, title)));
  const obj = curve.objectives || {};
  const colors = ["blue", "orange", "green"];
  $("#latency-legend").textContent = curve.percentiles.map((q, i) => `p${q} (${colors[i]})`).join(", ")
    + " against the arrival rate of "
    + `${curve.replicas} replica(s) (${curve.arrival} arrivals); dashed: the objective at p${obj.percentile || 90}; `
    + "solid vertical: the planned load; dotted: the capacity within the objectives.";
  fig.hidden = false;
}

function showPlan(project, plan, summary, report, change) {
  const rec = plan.recommendation;
  const gpu = $("#recommended-gpu");
  gpu.textContent = summary.rows.find((r) => r.key === "gpu").value;
  // the verb the cost comparison supports: rent when renting is the cheaper way, buy when owning is
  state.verb = rec.action && rec.action.verb;
  showVerb();
  gpu.dataset.gpuId = rec.gpu_id;
  gpu.dataset.gpusPerServer = rec.gpus_per_server;
  gpu.dataset.servers = rec.servers;
  $("#verdict").textContent = summary.verdict;
  $("#summary-rows").replaceChildren(...summary.rows.flatMap((r) => {
    const dt = document.createElement("dt"); dt.textContent = r.label;
    const dd = document.createElement("dd"); dd.textContent = r.value; dd.dataset.key = r.key;
    return [dt, dd];
  }));
  showLatency(plan.candidates[0] && plan.candidates[0].inference);
  showLatencyChart(rec.latency_curve);
  $("#summary").hidden = false;
  const box = $("#change");
  if (change && state.summary) {
    const before = Object.fromEntries(state.summary.rows.map((r) => [r.key, r]));
    const moved = summary.rows.filter((r) => before[r.key] && before[r.key].value !== r.value)
      .map((r) => `${r.label}: ${before[r.key].value} → ${r.value}`);
    box.textContent = `You changed ${change}. ` + (moved.length ? moved.join("; ") : "The recommendation is unchanged.");
    box.hidden = false;
  } else {
    box.hidden = true;
  }
  state.summary = summary;
  const frame = $("#report");
  frame.srcdoc = report;
  frame.hidden = false;
  $("#status").textContent = `Plan for ${plan.project}: ${plan.candidates.length} candidate(s), ranked by ${plan.objective}.`;
  history.replaceState(null, "", "#project=" + encodeProject(project));  // what was planned, not edited since
}
function schedule(change) {
  state.seq++;  // a plan in flight is now stale: its answer is not shown
  state.pendingChange = change || state.pendingChange;
  clearTimeout(state.timer);
  state.timer = setTimeout(runPlan, 350);
}

// ---- links: the project in the URL ----
function encodeProject(project) {
  const bytes = new TextEncoder().encode(JSON.stringify(project));
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function decodeProject(text) {
  const bin = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
}
function projectFromHash() {
  const m = location.hash.match(/^#project=(.+)$/);
  if (!m) return null;
  try {
    const p = decodeProject(m[1]);
    if (typeof p !== "object" || p === null || Array.isArray(p)) throw new Error("not an object");
    return p;
  } catch (e) {
    showError({ message: "This link's project could not be read (" + e.message + ")." });
    return undefined;
  }
}

// ---- downloads ----
function download(name, text, type) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
}
function fileStem() {
  return (state.project.name || "project").replace(/[^\w.-]+/g, "-");
}

// ---- scenarios ----
async function refreshScenarios() {
  const seq = state.listSeq = (state.listSeq || 0) + 1;
  const list = await call("GET", "/api/scenarios");
  if (seq !== state.listSeq) return;  // a newer listing is on its way
  $("#scenario-list").replaceChildren(...list.map((s) => {
    const li = document.createElement("li");
    li.dataset.id = s.id;
    const box = document.createElement("input");
    box.type = "checkbox"; box.value = s.id; box.setAttribute("aria-label", "compare " + s.name);
    const name = document.createElement("span"); name.textContent = `${s.name} (${s.saved_at})`;
    const load = document.createElement("button"); load.type = "button"; load.textContent = "Load";
    load.onclick = () => {  // a copy: editing it must not change the saved one the comparison shows
      state.project = structuredClone(s.project); state.summary = null; clearErrors(); fillForm(); runPlan();
    };
    const del = document.createElement("button"); del.type = "button"; del.textContent = "Delete";
    del.onclick = async () => { await call("DELETE", `/api/scenarios/${s.id}`); refreshScenarios(); };
    li.append(box, name, load, del);
    li.scenario = s;
    return li;
  }));
}
async function compare() {
  const chosen = $$("#scenario-list li").filter((li) => $("input", li).checked).map((li) => li.scenario);
  $("#compare-error").textContent = "";
  if (chosen.length < 2) { $("#compare-error").textContent = "Tick two or more saved scenarios to compare."; return; }
  const results = await Promise.all(chosen.map((s) => call("POST", "/api/summary?" + query(), s.project)
    .then((summary) => ({ summary }), (error) => ({ error }))));
  const table = $("#comparison");
  const head = document.createElement("tr");
  head.append(document.createElement("th"), ...chosen.map((s) => {
    const th = document.createElement("th"); th.textContent = s.name; return th;
  }));
  const labels = [];
  for (const r of results) for (const row of (r.summary ? r.summary.rows : [])) {
    if (!labels.some((l) => l.key === row.key)) labels.push(row);
  }
  const rows = labels.map((l) => {
    const tr = document.createElement("tr");
    tr.dataset.key = l.key;
    const th = document.createElement("th"); th.textContent = l.label;
    tr.append(th, ...results.map((r) => {
      const td = document.createElement("td");
      td.textContent = r.summary ? (r.summary.rows.find((x) => x.key === l.key) || { value: "-" }).value
                                 : r.error.message;
      return td;
    }));
    return tr;
  });
  table.replaceChildren(head, ...rows);
  table.hidden = false;
}

// ---- wiring ----
function onFieldChange(ev) {
  const el = ev.target.closest("[data-path]");
  if (!el) return;
  const path = el.dataset.path;
  const value = readField(el);
  setAt(state.project, path, value);
  if (path === "workload.task" && !["lora", "qlora"].includes(value)) setAt(state.project, "workload.lora", undefined);
  for (const task of ["dpo", "grpo"])  // a post-training section belongs to its own task only
    if (path === "workload.task" && value !== task) setAt(state.project, `workload.${task}`, undefined);
  if (path === "goals.budget.amount" && value === undefined) {  // no amount, no budget: its currency and period go
    setAt(state.project, "goals.budget", undefined);            // too, and the form shows it
    fillForm();
  }
  showTask();
  schedule(`${path} to ${value === undefined ? "its default" : JSON.stringify(value)}`);
}
function onSourceChange(ev) {
  const source = ev.target.value;
  showSource(source);
  const keep = source === "config" ? undefined : $(`[data-path="model.${source}"]`).value.trim() || undefined;
  state.project.model = keep === undefined ? {} : { [source]: keep };
  if (source === "config") onConfigInput();
  else if (keep !== undefined) schedule(`the model to ${source} ${keep}`);
}
function onConfigInput() {
  const text = $("#model-config").value.trim();
  $('[data-err-for="model.config"]').textContent = "";
  if (!text) return;
  try {
    state.project.model = { config: JSON.parse(text) };
  } catch (e) {
    $('[data-err-for="model.config"]').textContent = "not valid JSON: " + e.message;
    return;
  }
  schedule("model.config");
}

async function start() {
  const openapi = await call("GET", "/openapi.json");
  state.schemas = openapi.components.schemas;
  fillChoices();
  const [models, examples] = await Promise.all([call("GET", "/api/catalog/models"), call("GET", "/api/examples")]);
  $("#presets").replaceChildren(...models.map((m) => new Option(m.name, m.id)));
  $("#example").append(...examples.map((e) => new Option(`${e.name}: ${e.title}`, e.name)));
  refreshScenarios();

  $("#project").addEventListener("change", (ev) => {
    if (ev.target.name === "model-source") onSourceChange(ev);
    else if (ev.target.id !== "model-config") onFieldChange(ev);
  });
  $("#model-config").addEventListener("change", onConfigInput);
  $("#project").addEventListener("submit", (ev) => { ev.preventDefault(); clearTimeout(state.timer); runPlan(); });
  $("#example").addEventListener("change", async (ev) => {
    if (!ev.target.value) return;
    const asked = ++state.exampleSeq;
    const project = await call("GET", "/api/examples/" + encodeURIComponent(ev.target.value));
    if (asked !== state.exampleSeq) return;  // another example was picked meanwhile
    state.project = project;
    state.summary = null;
    clearErrors();
    fillForm();
    runPlan();
  });
  $("#lang").addEventListener("change", () => { relabel($("#lang").value); if (state.summary) runPlan(); });
  $("#share").addEventListener("click", async () => {
    const link = location.origin + location.pathname + "#project=" + encodeProject(state.project);
    const box = $("#share-link");
    box.value = link; box.hidden = false; box.select();
    try { await navigator.clipboard.writeText(link); } catch (_) { /* the link stays selected in the box */ }
  });
  $("#download-report").addEventListener("click", async () => {
    try {
      download(`${fileStem()}-plan.html`, await call("POST", "/api/report?" + query({ format: "html" }),
                                                     state.project, "text"), "text/html");
    } catch (err) { showError(err); }
  });
  $("#download-project").addEventListener("click", async () => {
    try {
      download(`${fileStem()}.yaml`, await call("POST", "/api/project", state.project, "text"), "application/yaml");
    } catch (err) { showError(err); }
  });
  $("#save-scenario").addEventListener("click", async () => {
    const name = $("#scenario-name").value.trim() || state.project.name || "scenario";
    try {
      await call("POST", "/api/scenarios?" + new URLSearchParams({ name }), state.project);
      await refreshScenarios();
    } catch (err) { showError(err); }
  });
  $("#compare").addEventListener("click", compare);

  const linked = projectFromHash();
  if (linked) {
    state.project = linked;
  } else {
    const first = (examples.find((e) => e.name === "llama3-8b-qlora") || examples[0]).name;
    state.project = await call("GET", "/api/examples/" + first);
    $("#example").value = first;
  }
  fillForm();
  if (linked === undefined) {  // a broken link: say so, and plan nothing until asked
    $("#status").textContent = "The form shows an example instead; press Plan to plan it.";
    return;
  }
  runPlan();
}

document.addEventListener("DOMContentLoaded", () => start().catch((err) => {
  $("#status").textContent = "The page could not start: " + (err.message || err);
}));
