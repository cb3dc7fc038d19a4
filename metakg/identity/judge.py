"""The LLM judge: a model's yes or no on the name pairs a scorer is unsure of.

A scorer's threshold is a trade: below it lie pairs that are one entity and pairs that are not. With the
judge on, ``metakg resolve --names S --judge`` sends the pairs scored within :data:`JUDGE_BAND` below the
threshold to the configured LLM, with both names and types, and joins those it says are one entity. Every
call goes through the run's cached, metered client (a repeated run asks nothing; the usage is reported and
in the ledger); a reply that is neither yes nor no joins nothing and is counted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

from metakg.errors import LLMError
from metakg.llm.client import LLMClient, Message, request

#: how far below a scorer's threshold a pair is still asked about
JUDGE_BAND = 0.1

#: the version of the prompt below (part of every request, so a change of wording asks again)
JUDGE_VERSION = "identity-judge/1"

SYSTEM = (
    "You check entity resolution for a knowledge graph. Two records name things; say whether they name the "
    "same real-world thing (the same disease, drug, gene, place, person...). Spelling variants, synonyms, "
    "abbreviations and translations of one thing are the same; a broader or narrower thing, a part, a "
    "class and its member, or two things that only sound alike are not. Reply with one word: yes or no."
)

_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Verdict:
    """The judge's answer on one pair: True (one entity), False, or None (no usable reply), and the reply."""

    same: bool | None
    reply: str
    error: str | None = None  # the call failed after the client's retries: why


def judge_messages(a: str, a_type: str, b: str, b_type: str) -> list[Message]:
    """The two messages asking about one pair."""
    user = (
        f"[{JUDGE_VERSION}]\n"
        f"Record 1: {a!r} (type: {a_type})\n"
        f"Record 2: {b!r} (type: {b_type})\n"
        "Do they name the same thing? Answer yes or no."
    )
    return [Message("system", SYSTEM), Message("user", user)]


def parse_verdict(text: str) -> bool | None:
    """yes -> True, no -> False, from the reply's first word (case and punctuation ignored); else None."""
    first = _WORD.search(text.lower())
    if first is None:
        return None
    return {"yes": True, "no": False}.get(first.group())


async def judge_pairs(
    pairs: Sequence[tuple[str, str, str, str]], client: LLMClient, *, concurrency: int = 4, max_tokens: int = 4
) -> list[Verdict]:
    """The judge's verdict on each ``(name a, type a, name b, type b)``, in order; a call that fails after
    the client's retries gives ``None`` with the error."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(pair: tuple[str, str, str, str]) -> Verdict:
        asked = request(judge_messages(*pair), model=client.model, temperature=0.0, max_tokens=max_tokens)
        async with gate:
            try:
                reply = await client.complete(asked, tag="identity:judge")
            except LLMError as e:
                return Verdict(None, "", str(e))
        return Verdict(parse_verdict(reply.text), reply.text)

    return list(await asyncio.gather(*(one(p) for p in pairs)))
