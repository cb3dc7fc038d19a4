"""The orchestrator's finite-state machine: six states, each with its own instructions and tool set, and the
successors the LLM may choose from.

::

    local_evaluation --> local_exploration <-> (itself)          --> local_evaluation
           |         --> remote_exploration <-> (itself)         --> remote_evaluation | local_evaluation
           |                                  remote_evaluation  --> local_update | remote_exploration
           |                                                         | local_evaluation
           |                                  local_update       --> local_evaluation
           +-------> answer (final)

The LLM names the next state in its reply; a name outside the allowed successors is refused (the agent
stays, is told the allowed list, and the refusal is counted). After the turn limit the answer is forced.
"""

from __future__ import annotations

import re
from enum import StrEnum

from metakg.qa_engine.primitives import json_values


class State(StrEnum):
    """An orchestrator state."""

    LOCAL_EVALUATION = "local_evaluation"
    LOCAL_EXPLORATION = "local_exploration"
    REMOTE_EXPLORATION = "remote_exploration"
    REMOTE_EVALUATION = "remote_evaluation"
    LOCAL_UPDATE = "local_update"
    ANSWER = "answer"


S = State
SUCCESSORS: dict[State, tuple[State, ...]] = {
    S.LOCAL_EVALUATION: (S.LOCAL_EXPLORATION, S.REMOTE_EXPLORATION, S.ANSWER),
    S.LOCAL_EXPLORATION: (S.LOCAL_EXPLORATION, S.LOCAL_EVALUATION),
    S.REMOTE_EXPLORATION: (S.REMOTE_EXPLORATION, S.REMOTE_EVALUATION, S.LOCAL_EVALUATION),
    S.REMOTE_EVALUATION: (S.LOCAL_UPDATE, S.REMOTE_EXPLORATION, S.LOCAL_EVALUATION),
    S.LOCAL_UPDATE: (S.LOCAL_EVALUATION,),
    S.ANSWER: (),
}
#: the states before which metacognition runs, and whose prompts carry its corrective plan
EVALUATION_STATES = frozenset({S.LOCAL_EVALUATION, S.REMOTE_EVALUATION})
#: the tool set each state may call (the others call none)
TOOLSETS: dict[State, str] = {S.LOCAL_EXPLORATION: "local", S.REMOTE_EXPLORATION: "remote", S.LOCAL_UPDATE: "update"}

INSTRUCTIONS: dict[State, str] = {
    S.LOCAL_EVALUATION: (
        "Decide whether the local knowledge graph already holds the facts the query needs. If it does, go to "
        "answer. If it is empty or facts are missing, go to remote_exploration. If it is too large to be shown "
        "whole, go to local_exploration to look inside it."
    ),
    S.LOCAL_EXPLORATION: (
        "Look inside the local knowledge graph with the local tools to find the facts the query needs. Do not "
        "repeat a call already made. Then go back to local_evaluation, or keep exploring."
    ),
    S.REMOTE_EXPLORATION: (
        "The local graph lacks facts. Use the remote tools to find the entities and relations the query is "
        "about in the remote knowledge base. Then go to remote_evaluation to judge what you found."
    ),
    S.REMOTE_EVALUATION: (
        "Judge whether the remote data found so far is relevant to the query. If it is, go to local_update to "
        "copy it into the local graph; if not, explore further or go back to local_evaluation."
    ),
    S.LOCAL_UPDATE: (
        "Copy the remote entities and relations the query needs into the local graph with the update tools "
        "(a node, or the statements of one property from or to a node). Then go to local_evaluation."
    ),
    S.ANSWER: (
        "Answer the query from the local graph only. Write the answer as sentences, each citing the local node "
        "and edge ids that back it."
    ),
}


def parse_transition(reply: str) -> str | None:
    """The next state a reply names: ``"next_state"`` in a JSON object, else a ``next state: NAME`` line,
    else the last state name in the text; None when it names none."""
    found = json_values(reply, "{", first=True)
    if found and isinstance(found[0].get("next_state"), str):
        return str(found[0]["next_state"]).strip().lower()
    line = re.search(r"next[ _]state\W+([a-z_]+)", reply, re.I)
    if line:
        return line.group(1).lower()
    names = re.findall("|".join(sorted((s.value for s in State), key=len, reverse=True)), reply.lower())
    return names[-1] if names else None


def check_transition(current: State, named: str | None) -> tuple[State | None, str | None]:
    """(the next state, None) when ``named`` is an allowed successor of ``current``; else (None, the refusal
    to show the LLM, naming the allowed states)."""
    allowed = SUCCESSORS[current]
    listed = ", ".join(s.value for s in allowed)
    if named is None:
        return None, f"Your reply named no next state. From {current.value} you may go to: {listed}."
    if named not in {s.value for s in allowed}:
        return None, f"{named!r} is not a state you may go to from {current.value}; choose one of: {listed}."
    return State(named), None


def urgency(turn: int, limit: int) -> str:
    """The turn-urgency note as turns run out (the last quarter, at least the last two): none before."""
    left = limit - turn
    if left > max(2, limit // 4):
        return ""
    return (
        f"Only {left} turn(s) left before an answer is forced: connect what the local graph holds (no isolated "
        "nodes, no separate pieces) and move toward an answer."
    )
