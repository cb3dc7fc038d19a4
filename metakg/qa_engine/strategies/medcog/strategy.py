"""``medcog``: MedCoG (Zhao et al., arXiv 2602.07905), a metacognitive regulator that spends only the reasoning
a question needs.

1. **Monitoring** (one call): complexity, familiarity and knowledge density in [0, 1]
   (:mod:`metakg.qa_engine.strategies.medcog.monitor`). An unparseable reply takes ``fallback_route`` and is counted.
2. **Planning**: the thresholds pick one of five routes: ``zero_shot``, ``scot``, ``scot_mem``, ``scot_kg``,
   ``scot_kg_mem``. ``route`` forces one of them (the harness runs all five as fixed strategies).
3. **Executing**: zero-shot answers directly; SCoT (:mod:`.scot`) elicits fact paths, then
   reasons, then answers. ``_kg`` first verifies against the graph: the LLM writes verification pairs
   (what the question asks, what an answer would claim; JSON asked as structured output, or lines; a reply
   with none falls back to the stem's graph names against each choice); each side's entities are grounded
   to the graph
   (the graph's names found in the text, else embedding search at ``tau_entity``; only nodes of
   ``node_types`` when set), and one call lets the
   LLM drop the grounded entities that do not fit the question; the shortest paths
   between every grounded query entity and every grounded hypothesis entity (``max_hops``, ``k_paths``
   each) are ranked by similarity to the question and the best ``top_k`` rendered ``a -[rel]-> b``.
4. **Evaluating** (``_kg``): one call judges whether the paths suffice; if not, its feedback refines the
   pairs, at most ``max_refinements`` times, before SCoT answers with the evidence.

The memory routes (``_mem``) show the ``cases`` past cases most like the question from the case bank
(:mod:`.casebank`, ``[qa.medcog] casebank``), each with its outcome; without a bank they
run without cases and the trace says so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from metakg.errors import InputDataError
from metakg.llm.client import LLMClient
from metakg.llm.usage import MeteredClient, price
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, EvidencePath, Question, path_records
from metakg.qa_engine.events import emit
from metakg.qa_engine.primitives import (
    allowed_types,
    ask_llm,
    json_values,
    match_entities,
)
from metakg.qa_engine.strategies.medcog.casebank import CaseBank
from metakg.qa_engine.strategies.medcog.monitor import (
    MONITOR_PROMPT,
    MONITOR_SCHEMA,
    ROUTES,
    Thresholds,
    parse_assessment,
    plan,
)
from metakg.qa_engine.strategies.medcog.scot import parse_scot, scot_prompt
from metakg.qa_engine.strategy import Strategy, StrategySettings, answer_with_evidence
from metakg.schemas.graph_store import GraphPath
from metakg.schemas.vocabulary import default_vocabulary
from metakg.text_processing import concept_phrases

Route = Literal["meta", "zero_shot", "scot", "scot_mem", "scot_kg", "scot_kg_mem"]


class MedCoGSettings(StrategySettings):
    """``[qa.medcog]``."""

    route: Route = Field(default="meta", description="meta: route by the monitoring scores; or force one route.")
    tau_c: float = Field(default=0.5, ge=0, le=1, description="Complexity above this turns structured reasoning on.")
    tau_f: float = Field(default=0.5, ge=0, le=1, description="Familiarity above this adds past cases (memory).")
    tau_k: float = Field(default=0.5, ge=0, le=1, description="Knowledge density above this adds graph verification.")
    fallback_route: Literal["zero_shot", "scot", "scot_mem", "scot_kg", "scot_kg_mem"] = Field(
        default="scot", description="Route taken when the monitoring reply holds no score."
    )
    max_pairs: int = Field(default=3, ge=1, le=10, description="Verification pairs kept per plan.")
    max_hops: int = Field(default=3, ge=1, le=6, description="Edges at most on a verification path.")
    k_paths: int = Field(default=2, ge=1, le=10, description="Shortest paths per grounded entity pair.")
    top_k: int = Field(default=5, ge=1, le=50, description="Verification paths kept, most question-like first.")
    max_refinements: int = Field(default=2, ge=0, le=5, description="Plan refinements after a failed evaluation.")
    node_types: list[str] = Field(
        default_factory=list,
        description="Ground the checks' entities only to nodes of these types, subtypes included (e.g. "
        "['disease', 'drug']); empty: any type.",
    )
    filter_groundings: bool = Field(
        default=True, description="Let the LLM drop grounded entities that do not fit the question (one call)."
    )
    casebank: Path | None = Field(
        default=None, description="Case bank folder for the memory routes (`metakg casebank build`)."
    )
    cases: int = Field(default=5, ge=1, le=20, description="Past cases shown on a memory route, most similar first.")

    @field_validator("node_types")
    @classmethod
    def _known_types(cls, value: list[str]) -> list[str]:
        """Types of the vocabulary only: checked with the settings (``config show`` refuses what ``ask`` would)."""
        names = default_vocabulary().names
        unknown = [t for t in value if t not in names]
        if unknown:
            raise ValueError(
                f"unknown node type(s) {', '.join(map(repr, unknown))}; the vocabulary has {', '.join(sorted(names))}"
            )
        return value


PLAN_PROMPT = (
    "To answer the question below you may check facts in a medical knowledge graph. Write up to {n} checks: "
    "each names the thing the question asks about (query) and a fact an answer would rest on (hypothesis). "
    'Reply with JSON like {{"checks": [{{"query": "...", "hypothesis": "..."}}]}}, with the dots replaced by '
    "words of the question, or one check per line as 'query | hypothesis'."
    "{feedback}\n\nQuestion: {question}{choices}"
)


def plan_schema(n: int) -> dict[str, Any]:
    """The JSON Schema of a planning reply with at most ``n`` checks (sent as structured output)."""
    check = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "hypothesis": {"type": "string"}},
        "required": ["query", "hypothesis"],
    }
    return {
        "type": "object",
        "properties": {"checks": {"type": "array", "items": check, "minItems": 1, "maxItems": n}},
        "required": ["checks"],
    }


FILTER_PROMPT = (
    "Question: {question}\n\nThese knowledge graph entities were matched to the question's checks:\n{entities}\n\n"
    "Which of them do not fit the question (a wrong sense, an unrelated thing)? Reply with their numbers, "
    "or 'none'."
)
EVALUATE_PROMPT = (
    "Question: {question}{choices}\n\nKnowledge graph paths found:\n{paths}\n\n"
    "Are these paths enough to answer the question? Reply 'yes', or 'no: ' followed by what is missing."
)


class MedCoG(Strategy[MedCoGSettings]):
    """Monitoring, planning, then zero-shot, SCoT, or SCoT with graph verification."""

    name = "medcog"
    summary = "MedCoG: rate the question, then answer zero-shot, by structured reasoning, or with graph checks."
    Settings = MedCoGSettings
    needs_llm = True  # every route starts by asking the LLM to rate the question
    metric_columns = (("monitor_fallbacks", "monitor fallbacks"),)

    def __init__(self, settings: MedCoGSettings | None = None) -> None:
        """The strategy; its case bank is read on first use."""
        super().__init__(settings)
        self._bank: CaseBank | None = None
        types = self.settings.node_types
        self._types = allowed_types(types, default_vocabulary()) if types else None

    @classmethod
    def switches(cls) -> tuple[str, ...]:
        """The five fixed routes, so ``eval --ablation all`` runs each as its own strategy."""
        return tuple(f"route={r}" for r in ROUTES)

    async def solve(self, question: Question, ctx: QAContext, client: MeteredClient | None, answer: Answer) -> None:
        """Monitor, plan, execute the route (a fail without an LLM: every route needs one)."""
        if client is None:
            answer.fail("medcog needs an LLM (every route asks one)")
            return
        route, trace = await self.choose_route(question, ctx, client)
        answer.trace.update(trace)
        emit("route", **{k: v for k, v in trace.items() if k != "monitor_reply"})
        cases: list[str] = []
        if "_mem" in route:
            cases = self.recall(question, ctx, answer.trace)
            emit("memory", cases=answer.trace.get("cases", []), note=answer.trace.get("memory"))
        if route == "zero_shot":
            await answer_with_evidence(question, None, ctx, client, answer)
            return
        evidence: list[EvidencePath] = []
        if "_kg" in route:
            evidence = await self.verify(question, ctx, client, answer.trace)
        answer.evidence = evidence
        lines = [render(p) for p in evidence]
        reply = await ask_llm(
            client,
            ctx,
            scot_prompt(question, lines, cases),
            max(ctx.settings.answer_max_tokens, 320),
            f"qa:{self.label}:scot",
        )
        parsed = parse_scot(reply.text)
        answer.trace.update({"reply": reply.text, "scot_paths": [list(p) for p in parsed.paths]})
        self.read_reply(answer, question, reply.text, free_text=parsed.answer)

    def recall(self, question: Question, ctx: QAContext, trace: dict[str, Any]) -> list[str]:
        """The ``cases`` past cases most like ``question`` (rendered), named in ``trace["cases"]``; none, and
        the trace says why, without a case bank."""
        if self.settings.casebank is None:
            trace["memory"] = "no case bank configured ([qa.medcog] casebank): the route runs without past cases"
            return []
        if self.settings.casebank.exists() and not self.settings.casebank.is_dir():
            raise InputDataError(f"[qa.medcog] casebank {self.settings.casebank} is a file; give a case bank folder.")
        if not (self.settings.casebank / "manifest.json").is_file():  # e.g. the first round of `eval --grow`
            trace["memory"] = f"the case bank {self.settings.casebank} is not built yet: no past cases"
            return []
        if self._bank is None:
            self._bank = CaseBank.read(self.settings.casebank, model=ctx.embedder.name)
        vector = ctx.services.similarity.vectors([question.text])[0]
        found = self._bank.top(vector, self.settings.cases)
        trace["cases"] = [{"id": c.id, "similarity": c.similarity, "reward": c.reward} for c in found]
        return [c.render() for c in found]

    async def choose_route(self, question: Question, ctx: QAContext, client: LLMClient) -> tuple[str, dict[str, Any]]:
        """The route and the monitoring trace (forced routes make no call)."""
        if self.settings.route != "meta":
            return self.settings.route, {"route": self.settings.route, "routed_by": "forced"}
        prompt = MONITOR_PROMPT.format(question=question.text.strip() + _choices(question))
        reply = await ask_llm(client, ctx, prompt, 200, f"qa:{self.label}:monitor", MONITOR_SCHEMA)
        # the monitoring call at list price: calibration adds it to the route a threshold triple picks
        cost = round(price(ctx.prices, reply.model, reply.usage.prompt_tokens, reply.usage.completion_tokens), 8)
        assessment = parse_assessment(reply.text)
        if assessment is None:
            fallback = self.settings.fallback_route
            return fallback, {
                "route": fallback,
                "routed_by": "fallback",
                "monitor_reply": reply.text[:500],
                "monitor_cost_usd": cost,
            }
        route = plan(assessment, Thresholds(self.settings.tau_c, self.settings.tau_f, self.settings.tau_k))
        return route, {"route": route, "routed_by": "scores", **assessment.as_dict(), "monitor_cost_usd": cost}

    async def verify(
        self, question: Question, ctx: QAContext, client: LLMClient, trace: dict[str, Any]
    ) -> list[EvidencePath]:
        """Plan verification pairs, ground them, find and rank paths; evaluate and refine at most
        ``max_refinements`` times. Each round is recorded in ``trace["verification"]``."""
        rounds: list[dict[str, Any]] = []
        trace["verification"] = rounds
        feedback = ""
        best: list[EvidencePath] = []
        for number in range(self.settings.max_refinements + 1):
            prompt = PLAN_PROMPT.format(
                n=self.settings.max_pairs,
                feedback=f"\nEarlier checks were not enough: {feedback}" if feedback else "",
                question=question.text.strip(),
                choices=_choices(question),
            )
            n = self.settings.max_pairs
            reply = await ask_llm(client, ctx, prompt, 200, f"qa:{self.label}:plan", plan_schema(n))
            placeholders: list[tuple[str, str]] = []
            pairs, source = parse_pairs(reply.text, n, placeholders), "llm"
            if pairs and not any(_grounds(p, ctx, self._types) for p in pairs):
                source = "question (the checks ground nothing)"
                pairs = []
            if not pairs:  # no usable check: the question's own entities against each choice
                pairs = question_pairs(question, ctx, n)
                source = "question" if source == "llm" else source
            grounding = await self.ground(pairs, question, ctx, client)
            found = self.paths_for(grounding, question, ctx)
            entry: dict[str, Any] = {
                "round": number + 1,
                "pairs": [list(p) for p in pairs],
                "pairs_from": source,
                "placeholder_checks": [list(p) for p in placeholders],
                "grounding": grounding,
            }
            entry["paths"] = [render(p) for p in found]
            rounds.append(entry)
            best = found or best
            grounded_any = any(g["query_ids"] or g["hypothesis_ids"] for g in grounding)
            if not found:
                feedback = "no graph path links the entities of these checks"
                entry["evaluation"] = feedback
                emit("verification", **entry)
                if not grounded_any:  # another plan round cannot find paths where nothing grounds
                    entry["stopped"] = "nothing grounded: no further plan rounds"
                    break
                continue
            prompt = EVALUATE_PROMPT.format(
                question=question.text.strip(), choices=_choices(question), paths="\n".join(entry["paths"])
            )
            judged = await ask_llm(client, ctx, prompt, 80, f"qa:{self.label}:evaluate")
            entry["evaluation"] = judged.text.strip()[:300]
            emit("verification", **entry)  # one round of planning, grounding and judging the paths
            if re.match(r"\s*\W*yes\b", judged.text, re.I):
                break
            feedback = re.sub(r"^\s*\W*no\W*", "", judged.text.strip(), flags=re.I)[:300] or "not enough"
        return best

    async def ground(
        self, pairs: list[tuple[str, str]], question: Question, ctx: QAContext, client: LLMClient
    ) -> list[dict[str, Any]]:
        """Each pair's entities grounded to graph nodes; with ``filter_groundings``, one call lets the LLM drop
        the grounded entities that do not fit the question (``dropped`` in each entry)."""
        grounding: list[dict[str, Any]] = []
        for query, hypothesis in pairs:
            left = {m.node.id: m.node.name for m in match_entities(_entities(query, ctx), ctx, self._types)}
            right = {m.node.id: m.node.name for m in match_entities(_entities(hypothesis, ctx), ctx, self._types)}
            grounding.append({"query": query, "hypothesis": hypothesis, "query_ids": list(left),
                              "hypothesis_ids": list(right), "names": left | right, "dropped": []})  # fmt: skip
        names = list(dict.fromkeys(n for g in grounding for n in g["names"].values()))
        if not self.settings.filter_groundings or not names:
            return grounding
        listed = "\n".join(f"{i}. {name}" for i, name in enumerate(names, start=1))
        prompt = FILTER_PROMPT.format(question=question.text.strip() + _choices(question), entities=listed)
        reply = await ask_llm(client, ctx, prompt, 40, f"qa:{self.label}:filter")
        drop = {names[int(n) - 1] for n in re.findall(r"\b(\d+)\b", reply.text) if 0 < int(n) <= len(names)}
        if len(drop) == len(names):  # a reply that drops everything is not taken at its word
            drop = set()
        for g in grounding:
            gone = {i for i, n in g["names"].items() if n in drop}
            g["query_ids"] = [i for i in g["query_ids"] if i not in gone]
            g["hypothesis_ids"] = [i for i in g["hypothesis_ids"] if i not in gone]
            g["dropped"] = sorted(g["names"][i] for i in gone)
        return grounding

    def paths_for(self, grounding: list[dict[str, Any]], question: Question, ctx: QAContext) -> list[EvidencePath]:
        """The ``top_k`` most question-like shortest paths between each pair's grounded entities."""
        candidates: dict[tuple[str, ...], GraphPath] = {}
        for entry in grounding:
            for src in entry["query_ids"]:
                for dst in entry["hypothesis_ids"]:
                    if src == dst:
                        continue
                    for path in ctx.store.shortest_paths(
                        src, dst, k=self.settings.k_paths, max_hops=self.settings.max_hops
                    ):
                        candidates.setdefault(tuple(e.id for e in path.edges), path)
        evidence = [_evidence(p, ctx) for p in candidates.values()]
        if not evidence:
            return []
        texts = [" ".join(" ".join(t) for t in e.triples) for e in evidence]
        sims = ctx.services.similarity.vectors(texts) @ ctx.services.similarity.vectors([question.text]).T
        order = sorted(range(len(evidence)), key=lambda i: -float(sims[i, 0]))
        return [evidence[i] for i in order[: self.settings.top_k]]

    def metrics(self, answer: Answer) -> dict[str, float]:
        """The route taken (one-hot) and whether monitoring fell back."""
        route = answer.trace.get("route")
        return {f"route_{r}": float(route == r) for r in ROUTES} | {
            "monitor_fallback": float(answer.trace.get("routed_by") == "fallback")
        }

    @classmethod
    def summarise(cls, metrics: Any) -> dict[str, Any]:
        """The route distribution and the count of monitoring fallbacks."""
        rows = list(metrics)
        return {
            "routes": {r: int(sum(m.get(f"route_{r}", 0) for m in rows)) for r in ROUTES},
            "monitor_fallbacks": int(sum(m.get("monitor_fallback", 0) for m in rows)),
        }

    def trace_lines(self, answer: Answer) -> list[str]:
        """Scores, route, each verification round, the elicited paths."""
        trace = answer.trace
        lines = [f"route {trace.get('route')} ({trace.get('routed_by')})"]
        if trace.get("routed_by") == "scores":
            lines.append(
                f"complexity {trace['complexity']}, familiarity {trace['familiarity']}, "
                f"knowledge density {trace['knowledge_density']}"
            )
        for entry in trace.get("verification", []):
            pairs = "; ".join(" | ".join(p) for p in entry["pairs"]) or "-"
            lines.append(
                f"check round {entry['round']}: {pairs} -> {len(entry['paths'])} paths; {entry.get('evaluation', '')}"
            )
        for path in trace.get("scot_paths", [])[:5]:
            lines.append("fact: " + " -> ".join(path))
        return lines


#: what a check echoing the prompt's form instead of the question looks like: no letter at all ("..."), a
#: slot in angle brackets, or the field's own name
_PLACEHOLDER = re.compile(r"^\W*$|^\s*<[^<>]*>\s*$|^\s*(?:query|hypothesis|question|fact|entity|answer)\s*$", re.I)


def is_placeholder(text: str) -> bool:
    """True for a check field that is the prompt's form, not content (``...``, ``<what is asked about>``)."""
    return bool(_PLACEHOLDER.match(text))


def parse_pairs(reply: str, limit: int, rejected: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """The checks of a planning reply, each pair once: JSON ``{"checks": [{"query", "hypothesis"}]}`` (or a
    bare list of such objects), else ``query | hypothesis`` lines (list marks dropped). A check with a
    placeholder field (:func:`is_placeholder`) is left out, and added to ``rejected``."""
    pairs: list[tuple[str, str]] = []
    rejected = rejected if rejected is not None else []

    def keep(pair: tuple[str, str]) -> None:
        if not all(pair) or pair in pairs or pair in rejected:
            return
        (rejected if any(is_placeholder(x) for x in pair) else pairs).append(pair)

    for item in _json_checks(reply):
        keep((str(item.get("query", "")).strip(), str(item.get("hypothesis", "")).strip()))
    if pairs:
        return pairs[:limit]
    for line in reply.splitlines():
        if "|" not in line:
            continue
        query, _, hypothesis = re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", line).partition("|")
        keep((query.strip().strip("'\""), hypothesis.strip().strip("'\"")))
    return pairs[:limit]


def _grounds(pair: tuple[str, str], ctx: QAContext, types: Any) -> bool:
    """True when either side of a check names a graph entity."""
    return any(match_entities(_entities(side, ctx), ctx, types) for side in pair)


def _json_checks(reply: str) -> list[dict[str, Any]]:
    found = json_values(reply, first=True)
    if not found:
        return []
    items = found[0].get("checks", []) if isinstance(found[0], dict) else found[0]
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def question_pairs(question: Question, ctx: QAContext, limit: int) -> list[tuple[str, str]]:
    """Checks made from the question when the planner wrote none: the graph names found in the stem (at most
    three; else its first concept phrase) as the query, against each choice (every choice, even beyond
    ``limit``); a free-text question pairs its first name with each other one."""
    names = ctx.services.phrases.find(question.text) or concept_phrases(question.text)[:1]
    if not names:
        return []
    if question.choices:
        query = ", ".join(names[:3])
        return [(query, text) for _, text in question.choices]
    return [(names[0], other) for other in names[1:]][:limit]


def _entities(text: str, ctx: QAContext) -> list[str]:
    return ctx.services.phrases.find(text) or concept_phrases(text)


def _evidence(path: GraphPath, ctx: QAContext) -> EvidencePath:
    nodes = [ctx.store.get_node(n) for n in path.nodes]
    return path_records([n for n in nodes if n is not None], list(path.edges))


def render(path: EvidencePath) -> str:
    """``a -[rel]-> b -[rel]-> c`` in walk order (an edge read against its direction shows ``<-[rel]-``)."""
    if not path.triples:
        return ""
    names = {}
    for (src, dst), (h, _, t) in zip(path.ends, path.triples, strict=True):
        names[src], names[dst] = h, t
    text = names.get(path.nodes[0], path.nodes[0])
    for node, (src, _dst), (_, rel, _) in zip(path.nodes[1:], path.ends, path.triples, strict=True):
        arrow = f" -[{rel}]-> " if src != node else f" <-[{rel}]- "
        text += arrow + names.get(node, node)
    return text


def _choices(question: Question) -> str:
    return "".join(f"\n{letter}: {text}" for letter, text in question.choices)
