"""The RoboData orchestrator: the LLM walks the state machine of :mod:`.fsm`, calling each state's tools,
until it answers (or the turn limit forces it to) from the local graph, with a support set per sentence
that is checked against that graph.

Per turn the prompt holds the state's instructions, its tools, the allowed next states, the agentic memory
(tool calls and transitions, summarised by the LLM when it grows past ``memory_size`` entries), the local
graph (nodes and relation types, then triples, cut to a word budget), the turn-urgency note as turns run
out and, with metacognition on, the latest corrective plan. Every call, result, transition, refusal and
summary is in the trace; the statistics follow the paper's tables (iterations, tool calls by tool, nodes
and edges added; the time is the answer's ``usage``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from metakg.llm.client import LLMClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import ClaimSupport
from metakg.qa_engine.events import emit
from metakg.qa_engine.primitives import ask_llm
from metakg.qa_engine.strategies.robodata.fsm import (
    EVALUATION_STATES,
    INSTRUCTIONS,
    SUCCESSORS,
    TOOLSETS,
    State,
    check_transition,
    parse_transition,
    urgency,
)
from metakg.qa_engine.strategies.robodata.support import ANSWER_SCHEMA, parse_support, precision, verify
from metakg.qa_engine.strategies.robodata.tools import ToolBox, ToolResult, parse_calls
from metakg.schemas.bundle import Bundle
from metakg.schemas.graph_store import GraphStore


class LocalGraph(GraphStore, Protocol):
    """The agent's local graph: a writable store that can hand over all it holds (the embedded store)."""

    def bundle(self) -> Bundle:
        """Every node and edge."""
        ...


class AgentSettings(BaseModel):
    """How the orchestrator runs."""

    max_turns: int = Field(default=20, ge=1, le=200, description="Turns before the answer is forced.")
    memory_size: int = Field(default=30, ge=4, le=500, description="Memory entries that trigger a summary.")
    metacognition: bool = Field(default=False, description="A strategic assessment before each evaluation state.")
    graph_words: int = Field(default=1500, ge=50, description="Word budget of the local graph in a prompt.")


@dataclass
class Memory:
    """The agent's record of tool calls and transitions; older entries are summarised by the LLM."""

    entries: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)

    def add(self, entry: str) -> None:
        """Append one entry."""
        self.entries.append(entry)

    def render(self) -> str:
        """The memory as prompt text (the latest summary first)."""
        head = [f"Summary of earlier steps: {self.summaries[-1]}"] if self.summaries else []
        return "\n".join(head + self.entries) or "(nothing yet)"


@dataclass
class AgentResult:
    """What the agent produced: the checked claims, whether the answer was forced, the trace and the
    per-question statistics."""

    claims: list[ClaimSupport]
    forced: bool
    trace: dict[str, Any]
    stats: dict[str, Any]

    @property
    def text(self) -> str:
        """The answer: the claims' sentences joined."""
        return " ".join(c.claim for c in self.claims)


SUMMARY_PROMPT = (
    "Summarise these steps of an agent answering a query in a few sentences: which entities and relations "
    "it looked up, what it found, and what failed.\n\n{entries}"
)
META_PROMPT = (
    "You oversee an agent that answers a query by copying facts from a remote knowledge base into a local "
    "graph. Query: {query}\n\nStates visited: {states}\nTool use: {tools}\nLocal graph: {nodes} nodes, "
    "{edges} edges.\nPrevious observation: {previous}\n\nIn two or three sentences: is the strategy working, "
    "what is it doing wrong compared with the previous observation, and what should it do next?"
)


def turn_schema(tools: ToolBox | None, allowed: Sequence[State]) -> dict[str, Any]:
    """The JSON Schema of one turn's reply, sent as structured output where the endpoint takes one: the tool
    calls (each a tool of the state with that tool's own argument schema, at most three) then the next state
    (one of ``allowed``)."""
    properties: dict[str, Any] = {}
    if tools is not None:
        calls = [
            {
                "type": "object",
                "properties": {"tool": {"const": name}, "args": _loose(tool.args.model_json_schema())},
                "required": ["tool", "args"],
            }
            for name, tool in tools.tools.items()
        ]
        properties["tool_calls"] = {"type": "array", "items": {"anyOf": calls}, "maxItems": 3}
    properties["next_state"] = {"type": "string", "enum": [s.value for s in allowed]}
    return {"type": "object", "properties": properties, "required": list(properties)}


#: the function a model calls to choose the next state, under function calling
NEXT_STATE = "next_state"


def turn_functions(tools: ToolBox | None, allowed: Sequence[State]) -> list[dict[str, Any]]:
    """One turn's tools as OpenAI function definitions, for endpoints with function calling: the state's
    tools, and ``next_state`` whose ``state`` is one of ``allowed`` (the model calls it to move on)."""
    choose = {
        "type": "function",
        "function": {
            "name": NEXT_STATE,
            "description": "Choose the state to go to next (call it once, after any other tool call).",
            "parameters": {
                "type": "object",
                "properties": {"state": {"type": "string", "enum": [s.value for s in allowed]}},
                "required": ["state"],
                "additionalProperties": False,
            },
        },
    }
    return [*(tools.openai_tools() if tools is not None else []), choose]


def _loose(schema: Any) -> Any:
    """``schema`` without string length bounds: a grammar built from ``maxLength: 5000`` repeats a character
    rule 5,000 times (llama-cpp-python's server fell over); the tool's own validation still checks them. Id
    patterns stay, so a constrained model writes ids shaped like ``Q42``."""
    if isinstance(schema, dict):
        return {k: _loose(v) for k, v in schema.items() if k not in ("maxLength", "minLength")}
    if isinstance(schema, list):
        return [_loose(v) for v in schema]
    return schema


#: how many times one call may fail the same way before it is no longer run
SAME_FAILURES = 2

#: what to do instead of repeating a failing call, by tool and by what its error says
INSTEAD = [
    ("remote_sparql", "not a SPARQL query", "to find an entity by its name call remote_search with the name"),
    ("remote_sparql", "", "look the entity up with remote_entity or remote_neighbours instead of a query"),
    ("", "invalid arguments", "read the tool's arguments in the list above and give each as it is named"),
    ("", "", "change the arguments, use another tool, or choose the next state"),
]


def instead(tool: str, error: str) -> str:
    """What to do instead of repeating a call of ``tool`` that failed with ``error``."""
    return next(advice for name, says, advice in INSTEAD if name in ("", tool) and says in error)


@dataclass
class Failures:
    """The calls that failed, by tool and by the kind of error (its text up to the first colon): a call
    failing the same way a second time is told what to do instead, and a call that would fail that way a
    third time (the same arguments, or a query the same check refuses) is not run."""

    seen: Counter[tuple[str, str]] = field(default_factory=Counter)
    failed_args: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    blocked: int = 0

    def call(self, tools: ToolBox, name: str, args: Any) -> ToolResult:
        """Run the call unless it would fail :data:`SAME_FAILURES` + 1 times the same way (then a refusal)."""
        given = args if isinstance(args, dict) else {}
        key = (name, failure_kind(name, self._predicted(name, given)))
        written = json.dumps(given, sort_keys=True, default=str)
        for (tool, kind), n in self.seen.items():
            if (
                tool == name
                and n >= SAME_FAILURES
                and ((kind == key[1] and kind) or written in self.failed_args[(tool, kind)])
            ):
                self.blocked += 1
                return ToolResult(
                    name, given, False, f"not run: {name} failed {n} times with '{kind}'; {instead(name, kind)}"
                )
        result = tools.call(name, args)
        if result.ok:
            return result
        key = (name, failure_kind(name, result.text))
        self.seen[key] += 1
        self.failed_args.setdefault(key, set()).add(written)
        if self.seen[key] == SAME_FAILURES:
            advice = f" (the same failure twice: do not repeat it; {instead(name, result.text)})"
            return ToolResult(result.tool, result.args, False, result.text + advice)
        return result

    @staticmethod
    def _predicted(name: str, args: dict[str, Any]) -> str:
        """The error a call will give, where its arguments tell without running it (a SPARQL query the
        read-only check refuses); ``""`` otherwise."""
        if name != "remote_sparql":
            return ""
        from metakg.schemas.knowledge_source import check_select

        try:
            check_select(str(args.get("query", "")), ask=True)
        except ValueError as e:
            return str(e)
        return ""


def failure_kind(tool: str, text: str) -> str:
    """The kind of a failure: its text, without the tool's prefix, up to the first colon."""
    return text.removeprefix(f"{tool} failed: ").split(":", 1)[0].strip()[:80] if text else ""


_IDS = re.compile(r"\b[QP]\d+\b|\b[a-z][\w.]*:[\w.\-/]+\w")


def kept_facts(entries: Sequence[str]) -> str:
    """The ids and labels the successful calls among ``entries`` returned (``-> ok:`` entries), once each."""
    found: dict[str, None] = {}
    for entry in entries:
        if "-> ok:" not in entry:
            continue
        result = entry.split("-> ok:", 1)[1]
        for label in re.findall(r'"(?:label|name)":\s*"([^"]{1,80})"', result):
            found.setdefault(label)
        for ident in _IDS.findall(result):
            found.setdefault(ident)
    return ", ".join(list(found)[:60])


class Agent:
    """One orchestrator run per question over a local graph, with a tool box per tool set."""

    def __init__(
        self,
        settings: AgentSettings,
        ctx: QAContext,
        llm: LLMClient,
        local: LocalGraph,
        toolsets: dict[str, ToolBox],
    ) -> None:
        """The agent; ``toolsets`` holds ``local``, ``remote`` and ``update`` tool boxes (missing: none)."""
        self.settings, self.ctx, self.llm, self.local, self.toolsets = settings, ctx, llm, local, toolsets

    async def run(self, query: str) -> AgentResult:
        """Walk the state machine from local evaluation to an answer."""
        memory, steps, calls, failures = Memory(), [], Counter[str](), Failures()
        start_counts = self.local.counts()
        state, refusals, observation, forced = State.LOCAL_EVALUATION, 0, "", False
        for turn in range(1, self.settings.max_turns + 1):
            if state is State.ANSWER:
                break
            step: dict[str, Any] = {"turn": turn, "state": state.value}
            steps.append(step)
            if state is State.LOCAL_EVALUATION and self.local.counts()["nodes"] == 0:
                step.update(next_state=State.REMOTE_EXPLORATION.value, reason="the local graph is empty")
                memory.add(f"turn {turn}: {state.value} -> remote_exploration (the local graph is empty)")
                state = State.REMOTE_EXPLORATION
                emit("state", **step)
                continue
            if self.settings.metacognition and state in EVALUATION_STATES:
                observation = await self._metacognition(query, steps, calls, observation)
                step["meta_observation"] = observation
            tools = self.toolsets.get(TOOLSETS.get(state, ""))
            prompt = self._prompt(state, query, memory, tools, urgency(turn, self.settings.max_turns), observation)
            schema = turn_schema(tools, SUCCESSORS[state])
            functions = turn_functions(tools, SUCCESSORS[state])
            reply = await ask_llm(self.llm, self.ctx, prompt, 400, f"qa:robodata:{state.value}", schema, functions)
            made = parse_calls(reply.text)
            chosen = [args for name, args in made if name == NEXT_STATE]  # the transition, as a function call
            results: list[ToolResult] = (
                [failures.call(tools, name, args) for name, args in made if name != NEXT_STATE]
                if tools is not None
                else []
            )
            calls.update(r.tool for r in results)
            step.update(reply=reply.text[:2000], tool_calls=[r.as_dict() for r in results])
            for r in results:
                memory.add(f"turn {turn}: {r.tool}({r.args}) -> {'ok' if r.ok else 'error'}: {r.text[:300]}")
            named = (
                str(chosen[-1].get("state", "")).strip().lower() or None
                if chosen and isinstance(chosen[-1], dict)
                else parse_transition(reply.text)
            )
            nxt, refusal = check_transition(state, named)
            if nxt is None:
                refusals += 1
                step["refused"] = refusal
                memory.add(f"turn {turn}: transition refused: {refusal}")
            else:
                step["next_state"] = nxt.value
                memory.add(f"turn {turn}: {state.value} -> {nxt.value}")
                state = nxt
            emit("state", **step)  # one turn of the walk, as soon as it is taken
            if len(memory.entries) >= self.settings.memory_size:
                await self._summarise(memory)
        else:
            forced = state is not State.ANSWER
        claims, answer_reply = await self._answer(query, memory, forced)
        counts = self.local.counts()
        stats = {
            "iterations": len(steps),
            "tool_calls": sum(calls.values()),
            "tool_calls_by_tool": dict(calls),
            "refused_transitions": refusals,
            "nodes_added": counts["nodes"] - start_counts["nodes"],
            "edges_added": counts["edges"] - start_counts["edges"],
            "memory_summaries": len(memory.summaries),
            "repeated_failures_blocked": failures.blocked,
            "support_precision": precision(claims),
            "forced_answer": forced,
        }
        trace = {"steps": steps, "memory_summaries": memory.summaries, "answer_reply": answer_reply[:4000]}
        return AgentResult(claims, forced, trace, stats)

    def _prompt(
        self, state: State, query: str, memory: Memory, tools: ToolBox | None, note: str, observation: str
    ) -> str:
        allowed = ", ".join(s.value for s in SUCCESSORS[state])
        parts = [f"You are in the state {state.value}. {INSTRUCTIONS[state]}"]
        if tools is not None:
            parts.append(
                "Tools:\n" + tools.describe() + '\nCall them as JSON: {"tool_calls": [{"tool": "name", "args": '
                "{...}}]}."
            )
        parts.append(
            f'Next states you may choose: {allowed}. End your reply with {{"next_state": "<one of them>"}}.'
            " Reflect on what earlier steps achieved before choosing."
        )
        if observation and state in EVALUATION_STATES:
            parts.append(f"Corrective plan from the last assessment: {observation}")
        if note:
            parts.append(note)
        parts += [f"Memory:\n{memory.render()}", f"Local graph:\n{self.graph_view()}", f"Query: {query}"]
        return "\n\n".join(parts)

    def graph_view(self) -> str:
        """Nodes with their types and the relation types, then triples with ids, within the word budget;
        a graph that does not fit says so (local exploration then looks inside it)."""
        data = self.local.bundle()
        if data.nodes.height == 0:
            return "(empty)"
        names = dict(zip(data.nodes["id"].to_list(), data.nodes["name"].to_list(), strict=True))
        lines = [f"{i}: {n} ({t})" for i, n, t in data.nodes.select("id", "name", "type").iter_rows()]
        lines.append("relations: " + ", ".join(sorted(set(data.edges["rel"].to_list()))))
        lines += [
            f"{names.get(s, s)} -[{r}]-> {names.get(d, d)} ({e}: {s} -> {d})"
            for e, s, r, d in data.edges.select("id", "src", "rel", "dst").iter_rows()
        ]
        shown, words = [], 0
        for line in lines:
            words += len(line.split())
            if words > self.settings.graph_words:
                shown.append(
                    f"... the graph is larger than shown ({data.nodes.height} nodes, {data.edges.height} edges)"
                )
                break
            shown.append(line)
        return "\n".join(shown)

    async def _summarise(self, memory: Memory) -> None:
        half = len(memory.entries) // 2
        old, memory.entries = memory.entries[:half], memory.entries[half:]
        prompt = SUMMARY_PROMPT.format(entries="\n".join(([memory.summaries[-1]] if memory.summaries else []) + old))
        reply = await ask_llm(self.llm, self.ctx, prompt, 200, "qa:robodata:memory")
        facts = kept_facts(old)  # what the calls found, word for word: a summary may drop it
        memory.summaries.append(reply.text.strip()[:1200] + (f"\nFound so far: {facts}" if facts else ""))

    async def _metacognition(self, query: str, steps: list[dict[str, Any]], calls: Counter[str], previous: str) -> str:
        counts = self.local.counts()
        prompt = META_PROMPT.format(
            query=query,
            states=" > ".join(s["state"] for s in steps),
            tools=", ".join(f"{t} {n}" for t, n in calls.items()) or "none",
            nodes=counts["nodes"],
            edges=counts["edges"],
            previous=previous or "none",
        )
        reply = await ask_llm(self.llm, self.ctx, prompt, 200, "qa:robodata:metacognition")
        return reply.text.strip()[:1000]

    async def _answer(self, query: str, memory: Memory, forced: bool) -> tuple[list[ClaimSupport], str]:
        note = "The turn limit is reached: answer now with what the local graph holds. " if forced else ""
        prompt = (
            f"{note}{INSTRUCTIONS[State.ANSWER]} Reply with JSON: "
            '{"sentences": [{"text": "...", "nodes": ["<node id>"], "edges": ["<edge id>"]}]}.'
            f"\n\nMemory:\n{memory.render()}\n\nLocal graph:\n{self.graph_view()}\n\nQuery: {query}"
        )
        reply = await ask_llm(self.llm, self.ctx, prompt, 400, "qa:robodata:answer", ANSWER_SCHEMA)
        return verify(parse_support(reply.text), self.local), reply.text
