"""Parse what real models reply into triples: every reply line becomes a triple or a reject with a reason.

Tolerated: numbered or bulleted lines, code fences, the separators ``\\``, ``|``, tab, ``->``, ``;`` and
``,`` (in that order of preference), parenthesised ``(s, p, o)`` tuples, JSON (a list of 3-element lists or
of objects with subject/predicate/object keys, possibly inside prose, with ``subject_type`` and ``object_type``
where the reply types them; a reply cut short keeps the triple objects it completed), prose lines around the
triples, and
two-part lines whose second part starts with a copula (``fridge\\is used for food storage`` reads as
``fridge / is used for / food storage``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)]|\(\d+\))\s*")
_FENCE = re.compile(r"^\s*```")
_SEPARATORS = ["\\", "|", "\t", "->", ";", ","]
_JSON_BLOCK = re.compile(r"(\[.*\]|\{.*\})", re.DOTALL)
_PROSE_START = re.compile(r"^(here (are|is)|the following|triples?:|sure|note:|i (have|will|can))", re.IGNORECASE)
MAX_PART_CHARS = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # left in a part after whitespace is folded: never a name


@dataclass(frozen=True)
class Triple:
    """One extracted statement; a typed reply (ontology-guided JSON) also gives the subject's and the
    object's type as the model named them ("" when not given)."""

    subject: str
    predicate: str
    object: str
    subject_type: str = ""
    object_type: str = ""


@dataclass
class ParseResult:
    """The triples found in a reply and the lines refused, each with its reason."""

    triples: list[Triple] = field(default_factory=list)
    rejects: list[tuple[str, str]] = field(default_factory=list)  # (line, reason)
    repaired: int = 0  # two-part lines read as subject + "predicate object" (see _split_predicate)
    cut: str | None = None  # a JSON reply cut short: what follows its last complete triple


def _clean(part: str) -> str:
    return " ".join(part.strip().strip("\"'`[](){}<>").strip().split())


_PREPOSITION = r"(?:by|in|for|at|on|of|to|with|from|as|into|about)"
# "is used for food storage": a copula or auxiliary, then optionally an article, a participle and/or a
# preposition, then the object. Small models often write the predicate and the object as one part.
_COPULA_SPLIT = re.compile(
    rf"^(?P<predicate>(?:is|are|was|were|has|have|had|can|may|will|does|do)(?: not)?"
    rf"(?: (?:a|an|the)\b| (?:used|found|located|made|part|kind|type|form|caused|known)(?: {_PREPOSITION})?"
    rf"| \w+(?:ed|en) {_PREPOSITION}| {_PREPOSITION})?)\s+(?P<object>\S.*)$",
    re.IGNORECASE,
)


def _split_predicate(part: str) -> list[str] | None:
    """``is used for food storage`` -> ``[is used for, food storage]``, or None when it does not read so."""
    match = _COPULA_SPLIT.match(part.strip())
    return [match.group("predicate"), match.group("object")] if match else None


def _from_parts(parts: list[str], line: str, result: ParseResult, types: tuple[str, str] = ("", "")) -> None:
    if len(parts) == 2 and (split := _split_predicate(parts[1])) is not None:
        parts = [parts[0], *split]
        result.repaired += 1
    cleaned = [_clean(p) for p in parts]
    if len(cleaned) != 3:
        result.rejects.append((line, f"expected 3 parts, found {len(cleaned)}"))
    elif not all(cleaned):
        result.rejects.append((line, "a part is empty"))
    elif any(len(p) > MAX_PART_CHARS for p in cleaned):
        result.rejects.append((line, f"a part is longer than {MAX_PART_CHARS} characters"))
    elif found := next((m for p in cleaned if (m := _CONTROL.search(p))), None):
        # a NUL or another control character would make a node id that validation refuses later
        result.rejects.append((line, f"a part holds the control character U+{ord(found.group(0)):04X}"))
    else:
        result.triples.append(Triple(*cleaned, *(" ".join(t.split()) for t in types)))


def _from_json(value: object, result: ParseResult) -> bool:
    items = value.get("triples") if isinstance(value, dict) else value
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list):
        return False
    for item in items:
        if isinstance(item, list | tuple):
            _from_parts([str(x) for x in item], json.dumps(item, ensure_ascii=False), result)
        elif isinstance(item, dict):
            keys = {k.lower(): v for k, v in item.items()}
            parts = [
                keys.get("subject", keys.get("head")),
                keys.get("predicate", keys.get("relation")),
                keys.get("object", keys.get("tail")),
            ]
            if any(p is None for p in parts):
                result.rejects.append((json.dumps(item, ensure_ascii=False), "object without subject/predicate/object"))
            else:
                types = (str(keys.get("subject_type") or ""), str(keys.get("object_type") or ""))
                _from_parts([str(p) for p in parts], json.dumps(item, ensure_ascii=False), result, types)
        else:
            result.rejects.append((json.dumps(item, ensure_ascii=False), "not a triple"))
    return True


_TRIPLE_OBJECT = re.compile(r"\{[^{}\[\]]*\}")


def _salvaged(text: str, result: ParseResult) -> bool:
    """A JSON reply cut short (at max_tokens): the triple objects it completed, and what is left as one reject.
    False when it holds no complete triple object (then it is read line by line)."""
    start = text.find('{"triples"') if '{"triples"' in text else text.find("[")
    if start < 0 or '"subject"' not in text:
        return False
    found = 0
    end = start
    for match in _TRIPLE_OBJECT.finditer(text, start):
        try:
            item = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "subject" in {k.lower() for k in item}:
            _from_json([item], result)
            found += 1
            end = match.end()
    if not found:
        return False
    rest = text[end:].strip().lstrip(",").strip()
    if rest.rstrip("]} \n"):
        result.cut = rest
    return True


def parse_reply(reply: str) -> ParseResult:
    """Triples and rejected lines of one model reply: every non-blank line is one or the other (code fences
    excepted), so prose around the triples is accounted for as a reject with its reason."""
    result = ParseResult()
    text = reply.strip()
    if not text:
        return result
    block = _JSON_BLOCK.search(text)
    if (block and text.lstrip().startswith(("[", "{", "```"))) or (block and '"subject"' in text):
        try:  # strict=False: a raw line break inside a string, as small models write, is no reason to refuse
            if block and _from_json(json.loads(block.group(1), strict=False), result):
                return result
        except json.JSONDecodeError:
            if _salvaged(text, result):
                return result
            # not JSON after all: read it line by line
    for raw in text.splitlines():
        if not raw.strip() or _FENCE.match(raw):
            continue
        line = _BULLET.sub("", raw).strip()
        if line.startswith("(") and line.endswith(")"):
            line = line[1:-1]
        separator = next((s for s in _SEPARATORS if s in line), None)
        if separator is None:
            prose = _PROSE_START.match(line) or line.endswith((":", ".", "!")) or len(line.split()) > 3
            reason = "prose, not a triple" if prose else "no separator between subject, predicate and object"
            result.rejects.append((raw, reason))
            continue
        _from_parts(line.split(separator), raw, result)
    return result
