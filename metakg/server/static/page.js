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
      "text-rotation": "autorotate", color: "#555" } },
    { selector: "edge.evidence", style: { width: 3, "line-color": "#2563eb", "target-arrow-color": "#2563eb" } },
  ],
  wheelSensitivity: 0.3,
  minZoom: 0.2,
  maxZoom: 1.6, // a fit on a few nodes must not blow the labels up
});
window.metakgGraph = cy; // for tests and for the curious

async function api(path, options) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = body.error || (Array.isArray(body.detail) ? body.detail.map((d) => `${d.loc.join(".")}: ${d.msg}`).join("; ") : body.detail);
    throw new Error(detail || `HTTP ${response.status}`);
  }
  return body;
}

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
    const node = await api(`api/nodes/${encodeURI(id)}`);
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
  const around = await api(`api/neighbours?id=${encodeURIComponent(id)}&limit=25`);
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
    const hits = await api(`api/search?q=${encodeURIComponent(document.getElementById("search-text").value)}&k=10`);
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

document.getElementById("ask-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const box = document.getElementById("answer");
  const trace = document.getElementById("trace");
  const button = document.getElementById("ask-button");
  box.textContent = "answering...";
  trace.innerHTML = "";
  button.disabled = true;
  const choices = document.getElementById("choices").value.split("\n").map((c) => c.trim()).filter(Boolean);
  try {
    const answer = await api("api/ask", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ question: document.getElementById("question").value, choices,
                             use_llm: document.getElementById("use-llm").checked }),
    });
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
    for (const line of answer.trace_lines || []) {
      const item = document.createElement("li");
      item.textContent = line;
      trace.append(item);
    }
    drawEvidence(answer);
  } catch (error) {
    box.innerHTML = `<p class="error"></p>`;
    box.firstChild.textContent = error.message;
  } finally {
    button.disabled = false;
  }
});

api("api/graph").then((info) => {
  document.getElementById("graph-info").textContent = `${info.counts.nodes} nodes, ${info.counts.edges} edges`;
  if (info.validation && info.validation.ok !== null && info.validation.ok !== undefined) {
    document.getElementById("report-link").hidden = false; // a validated bundle has its report at /report
  }
}).catch(() => {});
