// The page of `metakg serve`: search and ask against the API of the same server, the evidence drawn as an
// interactive graph (cytoscape: pan, zoom, drag; click a node for its record and to expand it).
"use strict";

const cy = cytoscape({
  container: document.getElementById("graph"),
  style: [
    { selector: "node", style: { label: "data(label)", "font-size": 11, "text-wrap": "wrap", "text-max-width": 120,
      "background-color": "#93c5fd", "text-valign": "bottom", "text-margin-y": 4, width: 18, height: 18 } },
    { selector: "node.start", style: { "background-color": "#f59e0b" } },
    { selector: "node.selected", style: { "border-width": 3, "border-color": "#1d4ed8" } },
    { selector: "edge", style: { label: "data(label)", "font-size": 9, "curve-style": "bezier",
      "target-arrow-shape": "triangle", width: 1.5, "line-color": "#9ca3af", "target-arrow-color": "#9ca3af",
      "text-rotation": "autorotate", color: "#444", "text-background-color": "#fff",
      "text-background-opacity": 0.85, "text-background-padding": 2 } },
    { selector: "edge.evidence", style: { width: 3, "line-color": "#2563eb", "target-arrow-color": "#2563eb" } },
  ],
  wheelSensitivity: 0.3,
  minZoom: 0.2,
  maxZoom: 1.6, // a fit on a few nodes must not blow the labels up
});
window.metakgGraph = cy; // for tests and for the curious

// Offline (`metakg ask --html`): one answer's snapshot is embedded in the file and stands in for the API.
const SNAPSHOT = window.METAKG_SNAPSHOT || null;

// A server started with an API key wants it in X-API-Key on every data request: asked for once, kept for
// this tab only (sessionStorage), never put in a URL.
async function keyed(path, options) {
  const send = () => fetch(path, { ...(options || {}), headers: { ...((options || {}).headers || {}),
    ...(sessionStorage.getItem("metakgKey") ? { "X-API-Key": sessionStorage.getItem("metakgKey") } : {}) } });
  let response = await send();
  if (response.status === 401) {
    const key = window.prompt("This metakg server needs its API key:");
    if (key) {
      sessionStorage.setItem("metakgKey", key);
      response = await send();
    }
  }
  return response;
}

async function api(path, options) {
  const response = await keyed(path, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(errorText(body, response.status));
  return body;
}

function errorText(body, status) {
  const detail = body.error || (Array.isArray(body.detail) ? body.detail.map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; ") : body.detail);
  return detail || `HTTP ${status}`;
}

// Where records, neighbours and search hits come from: the server's API, or the snapshot.
const source = SNAPSHOT ? {
  node: async (id) => {
    if (!(id in SNAPSHOT.nodes)) throw new Error(`${id} is not in this page (only the evidence and its neighbours are)`);
    return SNAPSHOT.nodes[id];
  },
  neighbours: async (id) => {
    if (!(id in SNAPSHOT.neighbours)) throw new Error("this page holds the neighbours of the evidence nodes only");
    return SNAPSHOT.neighbours[id];
  },
  search: async (text) => {
    const wanted = text.trim().toLowerCase();
    return Object.values(SNAPSHOT.nodes).filter((n) => n.name.toLowerCase().includes(wanted)).slice(0, 10)
      .map((node) => ({ node, match: "in this page", score: 1 }));
  },
} : {
  node: (id) => api(`api/nodes/${encodeURI(id)}`),
  neighbours: (id) => api(`api/neighbours?id=${encodeURIComponent(id)}&limit=25`),
  search: (text) => api(`api/search?q=${encodeURIComponent(text)}&k=10`),
};

function addNode(id, label, classes) {
  if (cy.getElementById(id).empty()) cy.add({ group: "nodes", data: { id, label: label || id }, classes: classes || "" });
  else if (classes) cy.getElementById(id).addClass(classes);
}

function addEdge(id, src, dst, label, classes) {
  if (cy.getElementById(id).empty()) cy.add({ group: "edges", data: { id, source: src, target: dst, label }, classes: classes || "" });
  else if (classes) cy.getElementById(id).addClass(classes);
}

function layout() {
  cy.layout({ name: "cose", animate: false, nodeRepulsion: 9000, idealEdgeLength: 90, fit: true, padding: 30 }).run();
}

function drawEvidence(answer) {
  cy.elements().remove();
  for (const path of answer.evidence || []) {
    path.edges.forEach((edgeId, i) => {
      const [src, dst] = path.ends[i];
      const [head, relation, tail] = path.triples[i];
      addNode(src, head);
      addNode(dst, tail);
      addEdge(edgeId, src, dst, relation, "evidence");
    });
    if (path.nodes.length) addNode(path.nodes[0], null, "start");
  }
  layout();
}

async function showRecord(id) {
  const box = document.getElementById("record");
  cy.nodes().removeClass("selected");
  cy.getElementById(id).addClass("selected");
  try {
    const node = await source.node(id);
    box.innerHTML = "";
    const title = document.createElement("h3");
    title.textContent = node.name;
    const pre = document.createElement("pre");
    pre.textContent = JSON.stringify(node, null, 1);
    const expand = document.createElement("button");
    expand.id = "expand-button";
    expand.textContent = "Expand its neighbours";
    expand.onclick = () => expandNode(id);
    box.append(title, expand, pre);
  } catch (error) {
    box.innerHTML = `<p class="error"></p>`;
    box.firstChild.textContent = error.message;
  }
}

async function expandNode(id) {
  let around;
  try {
    around = await source.neighbours(id);
  } catch (error) {
    const note = document.createElement("p");
    note.className = "error";
    note.textContent = error.message;
    document.getElementById("record").append(note);
    return;
  }
  for (const nb of around) {
    addNode(nb.node.id, nb.node.name);
    addEdge(nb.edge.id, nb.edge.src, nb.edge.dst, nb.edge.display || nb.edge.rel);
  }
  layout();
}

cy.on("tap", "node", (event) => showRecord(event.target.id()));

document.getElementById("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const list = document.getElementById("search-results");
  list.innerHTML = "";
  try {
    const hits = await source.search(document.getElementById("search-text").value);
    for (const hit of hits) {
      const item = document.createElement("li");
      item.textContent = `${hit.node.name} (${hit.match}, ${hit.score.toFixed(2)})`;
      item.onclick = () => { addNode(hit.node.id, hit.node.name, "start"); layout(); showRecord(hit.node.id); };
      list.append(item);
    }
    if (!hits.length) list.innerHTML = "<li>no match</li>";
  } catch (error) {
    list.innerHTML = `<li class="error"></li>`;
    list.firstChild.textContent = error.message;
  }
});

// One step of the trace as a line of the timeline; its details fold out.
function stepSummary(step) {
  const names = (items) => (items || []).join(", ");
  switch (step.kind) {
    case "concepts": return `Concepts (${step.method}): ${names(step.concepts)}; start entities: ${names(step.starts) || "none"}`;
    case "path": return `Path from ${step.start}: ${(step.cycles || []).length} correction cycle(s), ${step.refined ? "refined" : "kept"}; ${step.stop || ""}`;
    case "retrieved": return `Retrieved ${(step.triples || []).length} triples`;
    case "route": return `Route ${step.route} (${step.routed_by}${step.routed_by === "scores" ? `: complexity ${step.complexity}, familiarity ${step.familiarity}, knowledge density ${step.knowledge_density}` : ""})`;
    case "memory": return `Memory: ${(step.cases || []).length} past case(s)${step.note ? ` (${step.note})` : ""}`;
    case "verification": return `Verification round ${step.round}: ${(step.pairs || []).length} check(s), ${(step.paths || []).length} path(s); ${step.evaluation || ""}`;
    case "state": return `Turn ${step.turn}: ${step.state}${step.next_state ? ` → ${step.next_state}` : ""}${step.refused ? ` (refused: ${step.refused})` : ""}, ${(step.tool_calls || []).length} tool call(s)`;
    default: return step.kind;
  }
}

function addStep(step) {
  const item = document.createElement("li");
  item.className = `step step-${step.kind}`;
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = stepSummary(step);
  const body = document.createElement("pre");
  const { kind, ...rest } = step;
  body.textContent = JSON.stringify(rest, null, 1);
  details.append(summary, body);
  item.append(details);
  document.getElementById("trace").append(item);
  document.getElementById("trace-box").open = true;
}

function showAnswer(answer) {
  const box = document.getElementById("answer");
  box.innerHTML = "";
  const verdict = document.createElement("p");
  verdict.className = "verdict";
  verdict.textContent = answer.status === "ok" ? `Answer: ${answer.choice ? answer.choice + ": " : ""}${answer.text}`
                                               : `No answer: ${answer.reason}`;
  const evidence = document.createElement("ol");
  evidence.id = "evidence";
  for (const path of answer.evidence || []) {
    const item = document.createElement("li");
    item.textContent = path.triples.map((t) => t.join(" ")).join("; ");
    evidence.append(item);
  }
  const usage = document.createElement("p");
  usage.textContent = `${answer.strategy}: ${answer.usage.llm_calls} LLM calls, retrieval ${Math.round(answer.usage.retrieval_ms)} ms`;
  box.append(verdict, evidence, usage);
  const trace = document.getElementById("trace");
  if (!trace.children.length) { // a strategy that reports no steps: its short trace instead
    for (const line of answer.trace_lines || []) {
      const item = document.createElement("li");
      item.textContent = line;
      trace.append(item);
    }
  }
  drawEvidence(answer);
}

// POST /api/ask/stream: server-sent events, each step as it is taken, then the answer (or an error).
async function askStreaming(body, onStep) {
  const response = await keyed("api/ask/stream", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(errorText(await response.json().catch(() => ({})), response.status));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the server closed the stream before the answer");
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const kind = (block.match(/^event: (.*)$/m) || [])[1];
      const data = JSON.parse((block.match(/^data: (.*)$/m) || [])[1] || "{}");
      if (kind === "step") onStep(data);
      else if (kind === "answer") return data;
      else if (kind === "error") throw new Error(data.error);
    }
  }
}

document.getElementById("ask-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const box = document.getElementById("answer");
  const button = document.getElementById("ask-button");
  box.textContent = "answering...";
  document.getElementById("trace").innerHTML = "";
  button.disabled = true;
  const choices = document.getElementById("choices").value.split("\n").map((c) => c.trim()).filter(Boolean);
  try {
    const answer = await askStreaming({ question: document.getElementById("question").value, choices,
                                        use_llm: document.getElementById("use-llm").checked }, addStep);
    showAnswer(answer);
  } catch (error) {
    box.innerHTML = `<p class="error"></p>`;
    box.firstChild.textContent = error.message;
  } finally {
    button.disabled = false;
  }
});

if (SNAPSHOT) { // the answer this file was written for; no server behind it
  const question = SNAPSHOT.question;
  document.getElementById("question").value = question.text;
  document.getElementById("choices").value = question.choices.join("\n");
  document.getElementById("ask-form").classList.add("offline");
  for (const field of document.querySelectorAll("#ask-form textarea, #ask-form input, #ask-form button")) field.disabled = true;
  document.getElementById("graph-info").textContent =
    `one answer over a graph of ${SNAPSHOT.counts.nodes} nodes and ${SNAPSHOT.counts.edges} edges (written by metakg ask --html)`;
  for (const step of SNAPSHOT.steps) addStep(step);
  showAnswer(SNAPSHOT.answer);
} else {
  document.getElementById("report-link").addEventListener("click", async (event) => {
    event.preventDefault(); // fetched with the key, then shown from memory
    const opened = window.open("", "_blank");
    const response = await keyed("report");
    const html = await response.text();
    opened.document.open();
    opened.document.write(response.ok ? html : `<p>${response.status}: no validation report</p>`);
    opened.document.close();
  });
  api("api/graph").then((info) => {
    document.getElementById("graph-info").textContent = `${info.counts.nodes} nodes, ${info.counts.edges} edges`;
    if (info.validation && info.validation.ok !== null && info.validation.ok !== undefined) {
      document.getElementById("report-link").hidden = false; // a validated bundle has its report at /report
    }
  }).catch(() => {});
}
