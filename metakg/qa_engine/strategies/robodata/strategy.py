"""``robodata``: RoboData (Musumeci, Suriani, Nardi, Wikidata workshop at ISWC 2025). An agent copies the facts
a question needs from a remote knowledge base (Wikidata by default, ``wikidata.endpoint``) into a new local
graph, then answers from that graph with a support set per sentence, each checked against it
(:mod:`metakg.qa_engine.strategies.robodata`).

The answer's ``support`` holds every claim with its cited ids, whether it is supported and why not; the trace
holds every step (state, reply, tool calls and results, transition or refusal), the memory summaries, the
metacognitive observations, the statistics and the local graph's node and edge ids.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import Field

from metakg.llm.usage import MeteredClient
from metakg.qa_engine.context import QAContext
from metakg.qa_engine.core import Answer, ClaimSupport, Question
from metakg.qa_engine.strategies.robodata.agent import Agent, AgentResult, AgentSettings, LocalGraph
from metakg.qa_engine.strategies.robodata.remote import remote_tools
from metakg.qa_engine.strategies.robodata.tools import local_tools
from metakg.qa_engine.strategies.robodata.update import update_tools
from metakg.qa_engine.strategy import Strategy, StrategySettings
from metakg.schemas.bundle import Bundle
from metakg.schemas.knowledge_source import Checkpointed, EntityFetcher
from metakg.schemas.tables import empty_edges, empty_nodes

STATS = ("iterations", "tool_calls", "remote_queries", "nodes_added", "edges_added", "refused_transitions")


def cited_part(local: LocalGraph, claims: list[ClaimSupport]) -> Bundle:
    """The nodes the claims cite that the local graph holds, and the edges among them (a supported claim's
    edges link nodes it cites, so they are all there)."""
    ids = sorted({n for c in claims for n in c.nodes if local.get_node(n) is not None})
    if not ids:
        return Bundle(empty_nodes(), empty_edges())
    part = local.subgraph(ids, hops=0)
    return Bundle(part.nodes, part.edges)


class RoboDataSettings(StrategySettings):
    """``[qa.robodata]``."""

    max_turns: int = Field(default=20, ge=1, le=200, description="Orchestrator turns before the answer is forced.")
    memory_size: int = Field(default=30, ge=4, le=500, description="Memory entries that trigger an LLM summary.")
    metacognition: bool = Field(default=False, description="A strategic assessment before each evaluation state.")
    graph_words: int = Field(default=1500, ge=50, description="Word budget of the local graph in a prompt.")


class RoboData(Strategy[RoboDataSettings]):
    """An agent grows a local graph from the remote knowledge base and answers with checked support sets."""

    name = "robodata"
    summary = "RoboData: an agent copies facts from Wikidata into a local graph and answers with checked support."
    Settings = RoboDataSettings
    uses_graph = False  # it answers over the graph it grows, not over the bundle or database given
    needs_llm = True
    metric_columns = (
        ("support_precision", "support precision"),
        ("iterations_per_question", "iterations/q"),
        ("tool_calls_per_question", "tool calls/q"),
        ("nodes_added_per_question", "nodes added/q"),
    )

    async def _run(
        self, question: Question, ctx: QAContext, client: MeteredClient, source: EntityFetcher, local: LocalGraph
    ) -> AgentResult:
        toolsets = {"local": local_tools(local), "remote": remote_tools(source), "update": update_tools(source, local)}
        s = self.settings
        settings = AgentSettings(max_turns=s.max_turns, memory_size=s.memory_size, metacognition=s.metacognition,
                                 graph_words=s.graph_words)  # fmt: skip
        choices = "".join(f"\n{letter}: {text}" for letter, text in question.choices)
        sent = getattr(source, "queries", None)  # the Wikidata source counts its queries
        result = await Agent(settings, ctx, client, local, toolsets).run(question.text.strip() + choices)
        if isinstance(sent, int):
            result.stats["remote_queries"] = int(getattr(source, "queries", sent)) - sent
        return result

    async def solve(self, question: Question, ctx: QAContext, client: MeteredClient | None, answer: Answer) -> None:
        """Run the agent on a new local graph (or on the one the context keeps across questions, written after
        the question); the answer is its supported and flagged sentences."""
        if client is None:
            answer.fail("robodata needs an LLM (the agent is driven by it)")
            return
        source = ctx.knowledge_source
        if not isinstance(source, EntityFetcher) or ctx.graph_factory is None:
            answer.fail("robodata needs a remote knowledge base that maps entities and a local graph factory")
            return
        kept = ctx.local_graph  # a graph kept across questions, owned by the context's maker
        store = kept if kept is not None else ctx.graph_factory()
        if not hasattr(store, "bundle"):
            if kept is None:
                store.close()
            answer.fail("the local graph's store cannot list its contents")
            return
        local = cast(LocalGraph, store)
        try:
            result = await self._run(question, ctx, client, source, local)
            # a graph of its own is the answer's whole local graph; of a kept one, the part the answer cites
            graph = local.bundle() if kept is None else cited_part(local, result.claims)
        finally:
            if kept is None:
                store.close()
            elif isinstance(kept, Checkpointed):
                kept.checkpoint()
        answer.local_graph = graph
        answer.support = result.claims
        answer.trace.update(result.trace)
        answer.trace["stats"] = result.stats
        answer.trace["local_graph"] = {"nodes": graph.nodes["id"].to_list(), "edges": graph.edges["id"].to_list()}
        if kept is not None:
            answer.trace["local_graph"]["kept"] = local.counts()
        if not result.claims:
            answer.fail("the agent's answer holds no sentence")
            return
        self.read_reply(answer, question, result.text, free_text=result.text)

    def metrics(self, answer: Answer) -> dict[str, float]:
        """The agent's statistics and the support-set precision of the answer."""
        stats = answer.trace.get("stats") or {}
        figures = {k: float(stats.get(k, 0)) for k in STATS}
        if stats.get("support_precision") is not None:
            figures["support_precision"] = float(stats["support_precision"])
        return figures

    @classmethod
    def summarise(cls, metrics: Any) -> dict[str, Any]:
        """Means per question, and the support precision over the answers that had claims."""
        rows = list(metrics)
        n = len(rows) or 1
        figures: dict[str, Any] = {f"{k}_per_question": round(sum(m.get(k, 0) for m in rows) / n, 2) for k in STATS}
        precisions = [m["support_precision"] for m in rows if "support_precision" in m]
        figures["support_precision"] = round(sum(precisions) / len(precisions), 4) if precisions else None
        return figures

    def trace_lines(self, answer: Answer) -> list[str]:
        """Statistics, the state sequence, and each claim's verdict."""
        stats = answer.trace.get("stats") or {}
        lines = [
            f"{stats.get('iterations', 0)} iterations, {stats.get('tool_calls', 0)} tool calls "
            f"{stats.get('tool_calls_by_tool', {})}, {stats.get('remote_queries', 0)} remote queries, "
            f"{stats.get('nodes_added', 0)} nodes and "
            f"{stats.get('edges_added', 0)} edges added, {stats.get('refused_transitions', 0)} refused transitions"
            + (", answer forced at the turn limit" if stats.get("forced_answer") else ""),
            "states: " + " > ".join(s["state"] for s in answer.trace.get("steps", [])),
        ]
        for claim in answer.support:
            verdict = "supported" if claim.verified else "NOT supported: " + "; ".join(claim.problems)
            lines.append(f"claim: {claim.claim} [{', '.join((*claim.nodes, *claim.edges))}] {verdict}")
        return lines
