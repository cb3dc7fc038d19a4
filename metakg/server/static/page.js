// The page of `metakg serve`: search and ask against the API of the same server, the evidence drawn as an
// interactive graph (cytoscape: pan, zoom, drag; click a node for its record and to expand it).
"use strict";

const cy = cytoscape({
  container: document.getElementById("graph"),
  style: [
    { selector: "node", style: { label: "data(label)", "font-size": 11, "text-wrap": "wrap", "text-max-width": 120,
      "min-zoomed-font-size": 6, "background-color": "#93c5fd", "text-valign": "bottom", "text-margin-y": 4,
      width: 18, height: 18 } },
    { selector: "node.start", style: { "background-color": "#f59e0b" } },
    { selector: "node.choice", style: { "border-width": 3, "border-style": "dashed", "border-color": "#16a34a" } },
    { selector: "node.answer", style: { "background-color": "#16a34a", width: 26, height: 26, "font-weight": "bold",
      "border-width": 3, "border-style": "solid", "border-color": "#14532d" } },
    // a halo, not a border: a selected choice keeps its dashed ring
    { selector: "node.selected", style: { "underlay-color": "#1d4ed8", "underlay-opacity": 0.3, "underlay-padding": 7,
      "underlay-shape": "ellipse" } },
    { selector: "edge", style: { label: "data(label)", "font-size": 9, "curve-style": "bezier",
      "target-arrow-shape": "triangle", width: 1.5, "line-color": "#9ca3af", "target-arrow-color": "#9ca3af",
      "text-rotation": "autorotate", color: "#444", "text-background-color": "#fff",
      "text-background-opacity": 0.85, "text-background-padding": 2 } },
    // the edges of a large expansion: straight (cheap to draw), labelled only once zoomed in
    { selector: "edge.bulk", style: { "curve-style": "straight", "min-zoomed-font-size": 9, width: 1 } },
    { selector: "edge.evidence", style: { width: 3, "line-color": "#2563eb", "target-arrow-color": "#2563eb" } },
  ],
  wheelSensitivity: 0.3,
  minZoom: 0.03, // room for a node expanded into thousands of neighbours
  maxZoom: 1.6, // a fit on a few nodes must not blow the labels up
});
window.metakgGraph = cy; // for tests and for the curious

// Offline (`metakg ask --html`): one answer's snapshot is embedded in the file and stands in for the API.
const SNAPSHOT = window.METAKG_SNAPSHOT || null;

// A server started with an API key wants it in X-API-Key on every data request: asked for once, kept for
// this tab only (sessionStorage), never put in a URL.
// On a server of several graphs each may have its own key: one is kept per graph (the page's path).
const KEY_SLOT = `metakgKey:${window.location.pathname}`;

async function keyed(path, options) {
  const send = () => fetch(path, { ...(options || {}), headers: { ...((options || {}).headers || {}),
    ...(sessionStorage.getItem(KEY_SLOT) ? { "X-API-Key": sessionStorage.getItem(KEY_SLOT) } : {}) } });
  let response = await send();
  if (response.status === 401) {
    const key = window.prompt("This metakg graph needs its API key:");
    if (key) {
      sessionStorage.setItem(KEY_SLOT, key);
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
  neighbours: async (id, limit) => {
    if (!(id in SNAPSHOT.neighbours)) throw new Error("this page holds the neighbours of the evidence nodes only");
    return SNAPSHOT.neighbours[id].slice(0, limit);
  },
  search: async (text, mode) => {
    const wanted = text.trim().toLowerCase();
    const found = mode === "exact" ? (n) => n.name.toLowerCase() === wanted : (n) => n.name.toLowerCase().includes(wanted);
    return Object.values(SNAPSHOT.nodes).filter(found).slice(0, 10)
      .map((node) => ({ node, match: "in this page", score: 1 }));
  },
} : {
  node: (id) => api(`api/nodes/${encodeURI(id)}`),
  neighbours: (id, limit) => api(`api/neighbours?id=${encodeURIComponent(id)}&limit=${limit}`),
  search: (text, mode) => api(`api/search?q=${encodeURIComponent(text)}&k=10&mode=${mode || "auto"}`),
};

// Neighbours asked for at the first expansion, and at most on "show all" (the server's own limit).
const FIRST_NEIGHBOURS = 200;
const ALL_NEIGHBOURS = 5000;

function addNode(id, label, classes) {
  if (cy.getElementById(id).empty()) cy.add({ group: "nodes", data: { id, label: label || id }, classes: classes || "" });
  else if (classes) cy.getElementById(id).addClass(classes);
}

function addEdge(id, src, dst, label, classes) {
  if (cy.getElementById(id).empty()) cy.add({ group: "edges", data: { id, source: src, target: dst, label }, classes: classes || "" });
  else if (classes) cy.getElementById(id).addClass(classes);
}

// The evidence: a force-directed layout that counts the labels as part of each node, then spread until no
// node (label included) lies on another or on an edge's label (the force layout knows nothing of those).
function layout() {
  cy.layout({ name: "cose", animate: false, nodeDimensionsIncludeLabels: true, nodeRepulsion: 12000,
              idealEdgeLength: 100, fit: false }).run();
  spreadOut();
  cy.fit(undefined, 30);
}

// The boxes of the drawing that must not overlap: each node with its label, each edge's label.
function drawnBoxes() {
  const boxes = cy.nodes().map((n) => ({ element: n, box: n.boundingBox({ includeLabels: true }) }));
  for (const e of cy.edges()) {
    if (!e.data("label")) continue;
    const box = e.boundingBox({ includeNodes: false, includeEdges: false, includeLabels: true });
    if (box.w > 0) boxes.push({ element: e, box });
  }
  return boxes;
}

// Pairs of boxes that overlap, one of them a node's (label included): a node on a node, or on an edge's label
// (its own edges' too: a short edge puts its label on its ends). Two edges' labels may touch where edges meet.
function overlapping(margin) {
  const boxes = drawnBoxes(), found = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      if (a.element.isEdge() && b.element.isEdge()) continue;
      const p = a.box, q = b.box;
      if (p.x1 - margin < q.x2 && q.x1 - margin < p.x2 && p.y1 - margin < q.y2 && q.y1 - margin < p.y2) found.push([a, b]);
    }
  return found;
}
window.metakgOverlaps = () => overlapping(0).map(([a, b]) => [a.element.id(), b.element.id()]); // for tests

// Spreads the drawing where it overlaps: of each overlapping pair, a node is pushed out of the other box, away
// from its centre (from its own edge's other end when the box is that edge's label, so the edge grows and
// its label moves off), round after round; the rest of the drawing, and so its scale, stays as laid out.
function spreadOut() {
  for (let round = 0; round < 200; round++) {
    const pairs = overlapping(4);
    if (!pairs.length) return;
    const extra = 4 + Math.floor(round / 25) * 4; // a little further as rounds go, so no two nodes trade places
    for (const [a, b] of pairs) {
      const [node, other] = b.element.isNode() ? [b.element, a] : [a.element, b];
      const own = node.boundingBox({ includeLabels: true }), box = other.box;
      const overlap = Math.min(own.x2 - box.x1, box.x2 - own.x1, own.y2 - box.y1, box.y2 - own.y1);
      let dx = (own.x1 + own.x2 - box.x1 - box.x2) / 2, dy = (own.y1 + own.y2 - box.y1 - box.y2) / 2;
      const ends = other.element.isEdge() ? other.element.connectedNodes() : null;
      if (ends && ends.contains(node) && ends.length === 2) {
        const far = ends.not(node).position(), at = node.position();
        dx = at.x - far.x; dy = at.y - far.y;
      }
      const length = Math.hypot(dx, dy);
      if (length < 0.5) { dx = Math.cos(round * 2.4); dy = Math.sin(round * 2.4); } // on top: any way out
      const scale = (overlap + extra) / Math.max(length, 1e-6);
      const p = node.position();
      node.position({ x: p.x + dx * scale, y: p.y + dy * scale });
    }
  }
}

// Occupied boxes on a coarse grid: whether a box is free is a look at the few cells it covers.
class Occupancy {
  constructor(cell) { this.cell = cell; this.cells = new Map(); }
  *keys(b) {
    for (let i = Math.floor(b.x1 / this.cell); i <= Math.floor(b.x2 / this.cell); i++)
      for (let j = Math.floor(b.y1 / this.cell); j <= Math.floor(b.y2 / this.cell); j++) yield `${i},${j}`;
  }
  free(b) {
    for (const key of this.keys(b))
      for (const o of this.cells.get(key) || [])
        if (b.x1 < o.x2 && o.x1 < b.x2 && b.y1 < o.y2 && o.y1 < b.y2) return false;
    return true;
  }
  take(b) { for (const key of this.keys(b)) (this.cells.get(key) || this.cells.set(key, []).get(key)).push(b); }
}

// Places ``added`` (nodes just added, all at the centre's position) on rings around ``centre``, nearest free
// places first and on the side facing away from the rest of the drawing: nothing drawn before moves, and no
// node's box, label included, overlaps another's. Linear in the nodes placed, so a node with thousands of
// neighbours opens at once.
function placeAround(centre, added) {
  const c = centre.position();
  const taken = new Occupancy(64);
  const rest = cy.nodes().not(added);
  for (const node of rest) taken.take(node.boundingBox({ includeLabels: true }));
  let away = -Math.PI / 2; // up, when the node stands alone
  const others = rest.not(centre);
  if (others.length) {
    const mid = others.boundingBox();
    const dx = c.x - (mid.x1 + mid.x2) / 2, dy = c.y - (mid.y1 + mid.y2) / 2;
    if (Math.hypot(dx, dy) > 1) away = Math.atan2(dy, dx);
  }
  const queue = added.toArray();
  const positions = new Map();
  let next = 0;
  for (let ring = 0; next < queue.length && ring < 5000; ring++) {
    const radius = 90 + ring * 30;
    const count = Math.max(6, Math.floor((2 * Math.PI * radius) / 30));
    for (let k = 0; k < count && next < queue.length; k++) {
      const turn = Math.ceil(k / 2) * (k % 2 ? 1 : -1); // 0, +1, -1, +2, -2 ... steps from the free side
      const angle = away + (turn * 2 * Math.PI) / count;
      const x = c.x + radius * Math.cos(angle), y = c.y + radius * Math.sin(angle);
      const own = queue[next].boundingBox({ includeLabels: true }); // drawn at the centre so far
      const box = { x1: own.x1 - c.x + x - 3, x2: own.x2 - c.x + x + 3, y1: own.y1 - c.y + y - 3, y2: own.y2 - c.y + y + 3 };
      if (!taken.free(box)) continue;
      taken.take(box);
      positions.set(queue[next].id(), { x, y });
      next += 1;
    }
  }
  cy.batch(() => { for (const node of queue) node.position(positions.get(node.id()) || c); });
}

// The choices of the question last answered, as compared (a node named as one is ringed wherever it appears).
let askedChoices = new Set();

// Adds nodes ({id, label}) not drawn yet beside ``centre`` (placeAround); returns them.
function addAround(centre, nodes, classes) {
  const at = centre && centre.nonempty() ? centre.position() : { x: 0, y: 0 };
  const added = cy.add(nodes.map((n) => ({ group: "nodes", data: { id: n.id, label: n.label }, position: { ...at },
                                           classes: `${classes || ""}${askedChoices.has(comparable(n.label)) ? " choice" : ""}` })));
  if (centre && centre.nonempty()) placeAround(centre, added);
  return added;
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

// A record or a step's details as a list of keys and readable values (nested ones indented), not JSON.
function plain(value) {
  if (value === null || value === undefined || value === "") return "—";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(Math.round(value * 1000) / 1000);
  return String(value);
}

function keyValues(object, depth) {
  const list = document.createElement("dl");
  list.className = "kv";
  for (const [key, value] of Object.entries(object)) {
    if (key === "elapsed_ms") continue; // shown beside the step's line
    const term = document.createElement("dt");
    term.textContent = key.replaceAll("_", " ");
    const description = document.createElement("dd");
    description.append(readable(key, value, depth || 0));
    list.append(term, description);
  }
  return list;
}

function readable(key, value, depth) {
  const flat = (v) => v === null || typeof v !== "object";
  if (Array.isArray(value)) {
    if (!value.length) return "none";
    if (value.every(flat)) return value.map(plain).join(/path$/.test(key) ? " → " : ", ");
    if (value.every((v) => Array.isArray(v) && v.every(flat))) return value.map((v) => v.map(plain).join(" ")).join("; ");
    if (depth > 3) return JSON.stringify(value);
    const items = document.createElement("ol");
    for (const v of value) {
      const item = document.createElement("li");
      item.append(flat(v) ? plain(v) : keyValues(v, depth + 1));
      items.append(item);
    }
    return items;
  }
  if (value && typeof value === "object") {
    const entries = Object.entries(value);
    if (!entries.length) return "none";
    if (entries.every(([, v]) => flat(v))) return entries.map(([k, v]) => `${k}: ${plain(v)}`).join("; ");
    return depth > 3 ? JSON.stringify(value) : keyValues(value, depth + 1);
  }
  return plain(value);
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
    const expand = document.createElement("button");
    expand.id = "expand-button";
    expand.textContent = "Expand its neighbours";
    expand.onclick = () => expandNode(id, FIRST_NEIGHBOURS);
    const shown = document.createElement("p");
    shown.id = "neighbour-count";
    box.append(title, expand, shown, keyValues(node));
    box.scrollIntoView({ block: "nearest" });
  } catch (error) {
    box.innerHTML = `<p class="error"></p>`;
    box.firstChild.textContent = error.message;
  }
}

function clearRecord() {
  document.getElementById("record").innerHTML = "";
  cy.nodes().removeClass("selected");
}

async function expandNode(id, limit) {
  let around;
  const note = document.getElementById("neighbour-count");
  note.textContent = "fetching the neighbours...";
  const asked = performance.now();
  try {
    around = await source.neighbours(id, limit);
  } catch (error) {
    note.className = "error";
    note.textContent = error.message;
    return;
  }
  const started = performance.now();
  const centre = cy.getElementById(id);
  const seen = new Set();
  const added = [];
  for (const nb of around) {
    if (cy.getElementById(nb.node.id).empty() && !seen.has(nb.node.id)) {
      seen.add(nb.node.id);
      added.push({ id: nb.node.id, label: nb.node.name });
    }
  }
  const bulk = around.length > 50 ? "bulk" : "";
  addAround(centre, added); // outside a batch: placing reads the new nodes' drawn sizes
  cy.batch(() => {
    for (const nb of around) addEdge(nb.edge.id, nb.edge.src, nb.edge.dst, nb.edge.display || nb.edge.rel, bulk);
  });
  // a small drawing is shown whole; a large one around the expanded node
  cy.fit(cy.nodes().length > 150 && added.length ? centre.closedNeighborhood() : undefined, 30);
  // the time a user waits: placing, adding and the first frame drawn with the new nodes
  requestAnimationFrame(() => requestAnimationFrame(() => {
    window.metakgLastExpansion = { neighbours: around.length, added: added.length, fetch_ms: started - asked,
                                   ms: performance.now() - started };
  }));
  note.className = "";
  note.textContent = `${around.length} neighbour(s) shown${added.length < around.length ? ` (${added.length} new)` : ""}`;
  if (around.length >= limit && limit < ALL_NEIGHBOURS) {
    const more = document.createElement("button");
    more.id = "more-button";
    more.textContent = `Show all (up to ${ALL_NEIGHBOURS.toLocaleString("en")})`;
    more.onclick = () => expandNode(id, ALL_NEIGHBOURS);
    note.append(" ", more);
  }
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
      item.onclick = () => {
        // drawn beside the graph and selected (its record shown); it is no start entity of a question
        if (cy.getElementById(hit.node.id).empty()) addAround(cy.nodes().first(), [{ id: hit.node.id, label: hit.node.name }]);
        cy.fit(undefined, 30);
        showRecord(hit.node.id);
      };
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

function milliseconds(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

function addStep(step) {
  const item = document.createElement("li");
  item.className = `step step-${step.kind}`;
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  summary.textContent = stepSummary(step);
  if (typeof step.elapsed_ms === "number") { // when the step was done, from the start of the answer
    const at = document.createElement("span");
    at.className = "elapsed";
    at.textContent = `at ${milliseconds(step.elapsed_ms)}`;
    summary.append(" ", at);
  }
  const { kind, ...rest } = step;
  details.append(summary, keyValues(rest));
  item.append(details);
  document.getElementById("trace").append(item);
  document.getElementById("trace-box").open = true;
}

// Text of a choice or a name as compared: case, blanks and a leading "A:" do not count.
function comparable(text) {
  return String(text || "").replace(/^\s*[A-Za-z][:.)]\s+/, "").trim().toLowerCase().replace(/\s+/g, " ");
}

// The nodes named as the choices get a dashed ring, the chosen one is filled green (added beside the evidence
// when the graph has a node of that name that is not drawn yet).
async function markChoices(answer, choices) {
  const wanted = new Set(choices.map(comparable));
  askedChoices = wanted;
  const chosen = answer.status === "ok" ? comparable(answer.text) : "";
  let found = false;
  for (const node of cy.nodes()) {
    const name = comparable(node.data("label"));
    if (wanted.has(name)) node.addClass("choice");
    if (chosen && name === chosen) { node.addClass("answer"); found = true; }
  }
  const box = document.getElementById("answer-node");
  if (!chosen) return;
  if (!found) {
    const hits = await source.search(answer.text, "exact").catch(() => []);
    const hit = hits.find((h) => comparable(h.node.name) === chosen);
    if (hit) {
      addAround(cy.nodes().first(), [{ id: hit.node.id, label: hit.node.name }], "answer choice");
      cy.fit(undefined, 30);
      found = true;
    }
  }
  box.textContent = found ? "The chosen answer's node is filled green." :
                            "The chosen answer is not a node of the graph.";
}

function showAnswer(answer, choices) {
  const box = document.getElementById("answer");
  box.innerHTML = "";
  const verdict = document.createElement("p");
  verdict.className = "verdict";
  if (answer.status === "ok") verdict.textContent = `Answer: ${answer.choice ? answer.choice + ": " : ""}${answer.text}`;
  else if ((answer.reason || "").startsWith("retrieval only")) {
    verdict.className = "verdict retrieval";
    verdict.textContent = "Retrieval only: no LLM was asked to choose. The evidence it would be given:";
  } else verdict.textContent = `No answer: ${answer.reason}`;
  const evidence = document.createElement("ol");
  evidence.id = "evidence";
  for (const path of answer.evidence || []) {
    const item = document.createElement("li");
    item.textContent = path.triples.map((t) => t.join(" ")).join("; ");
    // where the graph's inputs state these edges: "report.pdf p. 12, 3.2 Methods"
    const cited = new Map((answer.sources || []).map((s) => [s.edge, s.cited]));
    const stated = [...new Set(path.edges.flatMap((e) => cited.get(e) || []))];
    if (stated.length) {
      const from = document.createElement("span");
      from.className = "sources";
      from.textContent = ` (from ${stated.join("; ")})`;
      item.append(from);
    }
    evidence.append(item);
  }
  const usage = document.createElement("p");
  const spent = answer.usage;
  usage.textContent = `${answer.strategy}: ${spent.llm_calls} LLM call(s), retrieval ${milliseconds(spent.retrieval_ms)}` +
    `${spent.llm_ms ? `, LLM ${milliseconds(spent.llm_ms)}` : ""}${spent.setup_ms ? `, setting up ${milliseconds(spent.setup_ms)}` : ""}` +
    `, in all ${milliseconds(spent.total_ms || spent.retrieval_ms)}`;
  const marked = document.createElement("p");
  marked.id = "answer-node";
  box.append(verdict, evidence, usage, marked);
  const trace = document.getElementById("trace");
  if (!trace.children.length) { // a strategy that reports no steps: its short trace instead
    for (const line of answer.trace_lines || []) {
      const item = document.createElement("li");
      item.textContent = line;
      trace.append(item);
    }
  }
  drawEvidence(answer);
  return markChoices(answer, choices || []);
}
window.metakgShowAnswer = showAnswer; // for tests: an answer as the server would send it

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
  clearRecord(); // the record of a node of the last answer's drawing
  button.disabled = true;
  const choices = document.getElementById("choices").value.split("\n").map((c) => c.trim()).filter(Boolean);
  try {
    const answer = await askStreaming({ question: document.getElementById("question").value, choices,
                                        use_llm: document.getElementById("use-llm").checked }, addStep);
    await showAnswer(answer, choices);
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
  showAnswer(SNAPSHOT.answer, question.choices);
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
  // a server of several graphs: a picker, each graph's page at its own path (the first at /); asked for
  // after the graph's counts, so a server with a key asks for it once
  const pickGraphs = () => api("api/graphs").then((graphs) => {
    if (graphs.length < 2) return;
    const picker = document.getElementById("graph-picker");
    for (const g of graphs) {
      const option = document.createElement("option");
      option.value = g.path;
      option.textContent = g.name;
      option.selected = g.current;
      picker.append(option);
    }
    picker.addEventListener("change", () => { window.location.href = picker.value; });
    document.getElementById("graph-choice").hidden = false;
    document.title = `metakg: ${graphs.find((g) => g.current).name}`;
  }).catch(() => {});
  api("api/graph").then((info) => {
    document.getElementById("graph-info").textContent = `${info.counts.nodes} nodes, ${info.counts.edges} edges`;
    if (info.validation && info.validation.ok !== null && info.validation.ok !== undefined) {
      document.getElementById("report-link").hidden = false; // a validated bundle has its report at /report
    }
    return pickGraphs();
  }).catch(() => {});
}
