"""Dataset readers: QA sets and documents into records for extraction (one polars frame, one row a record).

Formats: MedAgentsBench/MedQA jsonl (``question``, ``options``, ``answer_idx``), CommonsenseQA (the official
schema and the Hugging Face layout), the MetaKGRAG pilot format (``{"question": "stem\\nA: ...", "answer":
"A"}``; free-text answers too), MetaQA (``question with [topic entity] TAB answer1|answer2``, or a TSV with
a header naming ``question`` and ``answers`` columns; several gold answers), and plain text, jsonl or csv
with a field mapping. Every input line ends up a
record or a reject with its reason. Chunking of long texts happens in the extraction stage.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from metakg.documents.reader import DEFAULT_MAX_BYTES, chunk_ids, provenance, read_files
from metakg.errors import InputDataError, UsageError
from metakg.textfiles import as_utf8, strip_bom

DatasetFormat = Literal[
    "medagents", "csqa", "pilot", "metaqa", "simplequestions", "robodata", "text", "jsonl", "csv",
    "auto", "pdf", "docx", "html", "markdown",
]  # fmt: skip


@dataclass(frozen=True)
class Reader:
    """One dataset format :func:`read_dataset` reads: its name, whether its records are questions (what
    ``eval``, ``tune``, ``calibrate`` and ``casebank build`` take; every format can be extracted), and what it
    reads, in a line."""

    name: DatasetFormat
    questions: bool
    reads: str


#: every format, in the order the help texts and docs list them; the CLI's choices, the server's validator,
#: the help texts and the docs' table (docs/formats.md) come from here
READERS: tuple[Reader, ...] = (
    Reader("medagents", True, "MedAgentsBench / MedQA JSON Lines: `question`, `options`, `answer_idx`"),
    Reader("csqa", True, "CommonsenseQA JSON Lines, the official schema or the Hugging Face layout"),
    Reader("pilot", True, "the MetaKGRAG authors' pilot JSON: multiple choice, or free text"),
    Reader("metaqa", True, "MetaQA: `question with [topic entity] TAB answer1|answer2`, or a TSV whose header "
           "names `question` and `answers`"),
    Reader("simplequestions", True, "SimpleQuestions-Wikidata: `Qsubject TAB Pxxx|Rxxx TAB Qobject TAB question`"),
    Reader("robodata", True, "the RoboData authors' experiments, one JSON object `{\"experiments\": [...]}`"),
    Reader("text", False, "plain text, one document per file"),
    Reader("jsonl", False, "documents as JSON Lines (`--text-field`, `--id-field`, `--time-field`)"),
    Reader("csv", False, "documents as CSV rows (`--text-field`, `--id-field`, `--time-field`)"),
    Reader("auto", False, "a document or a folder of them, each file's format by its extension and first bytes "
           "(the default): PDF, Word, HTML, Markdown, plain text"),
    Reader("pdf", False, "PDF, its text layer page by page (a scan needs OCR first)"),
    Reader("docx", False, "Word .docx: paragraphs, headings, lists and tables"),
    Reader("html", False, "web pages: the main text, headings, lists and tables (navigation left out)"),
    Reader("markdown", False, "Markdown (CommonMark with tables)"),
)  # fmt: skip
#: the formats read as documents: chunked along their structure, each chunk a record naming its file and page
DOCUMENT_FORMATS: tuple[DatasetFormat, ...] = ("auto", "pdf", "docx", "html", "markdown")
FORMATS: tuple[DatasetFormat, ...] = tuple(r.name for r in READERS)
#: the formats whose records are questions
QUESTION_FORMATS: tuple[DatasetFormat, ...] = tuple(r.name for r in READERS if r.questions)


def formats_help(*, questions: bool = False) -> str:
    """The formats (only those of questions with ``questions``) as a help text lists them: ``a | b | c``."""
    return " | ".join(QUESTION_FORMATS if questions else FORMATS)


def formats_table() -> str:
    """The formats as the Markdown table of docs/formats.md."""
    rows = [f"| `{r.name}` | {'yes' if r.questions else 'no'} | {r.reads} |" for r in READERS]
    return "\n".join(["| format | questions | reads |", "|---|---|---|", *rows]) + "\n"


#: the labels file a SimpleQuestions-Wikidata file may have beside it (``id TAB label ...``, with a header)
SIMPLEQUESTIONS_LABELS = "simplequestions_wd_labels_en.tsv"

RECORD_SCHEMA: dict[str, pl.DataType] = {
    "record_id": pl.String(),
    "kind": pl.String(),  # qa | text
    "question": pl.String(),
    "option_labels": pl.List(pl.String()),
    "option_texts": pl.List(pl.String()),
    "answer": pl.String(),  # the correct label, or a free-text answer
    "answer_text": pl.String(),
    "answers": pl.List(pl.String()),  # every gold answer text (free-text questions may have several)
    "concept": pl.String(),
    "text": pl.String(),
    "time": pl.Datetime("us", "UTC"),  # the record's own time (jsonl/csv documents with --time-field)
    # a document's chunk (kind "chunk"): its file, pages ("12" or "12-13"), section path (" > " between
    # headings) and character offsets in the document's text, and how it is cited
    "source": pl.String(),
    "pages": pl.String(),
    "section": pl.String(),
    "start": pl.Int64(),
    "end": pl.Int64(),
    "provenance": pl.String(),
}


def input_reject(record: str, check: str, reason: str, payload: str) -> dict[str, str]:
    """A row of :data:`REJECT_SCHEMA` for an input record refused before any work (stage ``ingest``)."""
    return {"stage": "ingest", "table": "input", "record": record, "check": check, "reason": reason, "payload": payload}


REJECT_SCHEMA: dict[str, pl.DataType] = {
    "stage": pl.String(), "table": pl.String(), "record": pl.String(), "check": pl.String(), "reason": pl.String(),
    "payload": pl.String(),
}  # fmt: skip
_OPTION_LINE = re.compile(r"^\s*([A-Z])\s*[:.)]\s*(.+?)\s*$")


class RecordError(ValueError):
    """One input record cannot be read; the message is the reason stored with the reject."""


def _record_time(row: dict[str, Any], field: str | None) -> datetime | None:
    """The record's time from ``field``: ISO 8601 text (UTC unless it has an offset) or Unix seconds; None
    when no field is set or the record has no value there.

    Raises:
        RecordError: the value is not a time.
    """
    value = row.get(field) if field else None
    if value is None or value == "":
        return None
    try:
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(?:\.\d+)?\s*", value):
            value = float(value)  # Unix seconds written as text (every CSV field is)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(float(value), UTC)
        stamp = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise RecordError(f"{field} {value!r} is not an ISO 8601 time or Unix seconds") from None
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


@dataclass
class DatasetRead:
    """The records of a dataset and the input lines refused."""

    records: pl.DataFrame
    rejects: pl.DataFrame
    read: int
    #: documents: per input file its ``path``, ``format``, ``pages``, ``units`` (chunks), ``rejected`` (the
    #: reason, or None) and ``same_as`` (a link to a file read under that name); None for other formats
    files: list[dict[str, Any]] | None = None

    @property
    def accepted(self) -> int:
        """How many records were read successfully."""
        return self.records.height


MAX_QUESTION_CHARS = 100_000
"""A longer question is refused (the sentence splitter reads at most a million characters)."""


def _kind(value: Any) -> str:
    """How a JSON value that is not what a field needs reads in a reason: "a number", "null", ..."""
    names = {dict: "an object", list: "a list", bool: "true or false", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _shape(kind: str, e: Exception) -> RecordError:
    """The reason a record of ``kind`` is refused, from the error its reader met: a missing field by name."""
    if isinstance(e, KeyError):
        return RecordError(f"not a {kind} item: the field {e.args[0]!r} is missing")
    return RecordError(f"not a {kind} item: {e}")


def _qa(
    record_id: str,
    question: str,
    options: dict[str, str],
    answer: str,
    concept: str | None,
    answers: list[str] | None = None,
) -> dict[str, Any]:
    if not isinstance(question, str):
        raise RecordError(f"the question is {_kind(question)}, not text")
    if not question.strip():
        raise RecordError("question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise RecordError(f"the question is {len(question):,} characters long; at most {MAX_QUESTION_CHARS:,} are read")
    labels = list(options)
    if options and answer not in options:
        raise RecordError(f"answer {answer!r} is not one of the options {labels}")
    return {
        "record_id": record_id,
        "kind": "qa",
        "question": question.strip(),
        "option_labels": labels,
        "option_texts": [str(options[label]) for label in labels],
        "answer": answer,
        "answer_text": str(options[answer]) if options else answer,
        "answers": [str(options[answer])] if options else (answers or [answer]),
        "concept": concept,
        "text": None,
    }


def _medagents(row: dict[str, Any], record_id: str) -> dict[str, Any]:
    try:
        if not isinstance(row["options"], dict):
            raise RecordError(f'options is {_kind(row["options"])}; it must be an object of label: text ({{"A": ...}})')
        options = _multiple_choice({str(k): str(v) for k, v in row["options"].items()}, "MedAgentsBench")
        return _qa(str(row.get("realidx", record_id)), str(row["question"]), options, str(row["answer_idx"]), None)
    except (KeyError, TypeError, ValueError) as e:
        raise e if isinstance(e, RecordError) else _shape("MedAgentsBench", e) from e


def _multiple_choice(options: dict[str, str], kind: str) -> dict[str, str]:
    """``options``, refused when empty: an item of a multiple-choice set without choices would be scored as a
    free-text question, its answer letter matched by any reply naming it."""
    if not options:
        raise RecordError(f"no choices: a {kind} item is multiple choice")
    return options


def _csqa(row: dict[str, Any], record_id: str) -> dict[str, Any]:
    try:
        question = row["question"]
        if isinstance(question, dict):  # the official schema
            options = _multiple_choice({c["label"]: c["text"] for c in question["choices"]}, "CommonsenseQA")
            return _qa(str(row["id"]), question["stem"], options, row["answerKey"], question.get("question_concept"))
        choices = row["choices"]  # the Hugging Face layout
        options = _multiple_choice(dict(zip(choices["label"], choices["text"], strict=True)), "CommonsenseQA")
        return _qa(str(row["id"]), str(question), options, row["answerKey"], row.get("question_concept"))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise e if isinstance(e, RecordError) else _shape("CommonsenseQA", e) from e


def _pilot(row: dict[str, Any], record_id: str) -> dict[str, Any]:
    try:
        lines = str(row["question"]).strip().splitlines()
        answer = str(row["answer"]).strip()
    except (KeyError, TypeError) as e:
        raise _shape("pilot", e) from e
    options: dict[str, str] = {}
    stem: list[str] = []
    for number, line in enumerate(lines):
        match = _OPTION_LINE.match(line) if number > 0 else None
        if match:
            options[match.group(1)] = match.group(2)
        elif not options:
            stem.append(line)
    # the letter of a multiple-choice answer may be followed by its explanation on the next lines (ExplainCPE)
    letter = answer.splitlines()[0].strip().rstrip(".:)") if answer else ""
    if options and letter in options:
        return _qa(record_id, "\n".join(stem), options, letter, None)
    if options and len(letter) == 1 and letter.isalpha():
        raise RecordError(f"answer {letter!r} is not one of the options {list(options)}")
    return _qa(record_id, "\n".join(lines), {}, answer, None)  # a dialogue with a free-text answer


_TOPIC = re.compile(r"\[([^\[\]]+)\]")


def _metaqa(question: str, answers: str, record_id: str) -> dict[str, Any]:
    """A MetaQA question: the topic entity's brackets are dropped (kept as the record's concept)."""
    gold = [a.strip() for a in answers.split("|") if a.strip()]
    if not gold:
        raise RecordError("no gold answer after the tab")
    topic = _TOPIC.search(question)
    return _qa(record_id, _TOPIC.sub(r"\1", question), {}, gold[0], topic.group(1) if topic else None, gold)


def _metaqa_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | RecordError, str]]:
    """(line number, record or the reason it is refused, the line) of a MetaQA file: ``question TAB answers``
    lines, or a TSV whose header names ``question`` and ``answers`` columns."""
    columns: list[str] | None = None
    for number, line in _json_lines(path):
        if line.startswith("\x00invalid utf-8\x00"):
            yield number, RecordError("the line is not valid UTF-8"), line.split("\x00", 2)[2]
            continue
        cells = line.rstrip("\r\n").split("\t")
        if number == 1 and "question" in cells and "answers" in cells:
            columns = cells
            continue
        try:
            if columns is not None:
                if len(cells) != len(columns):
                    raise RecordError(f"{len(cells)} columns, the header has {len(columns)}")
                row = dict(zip(columns, cells, strict=True))
                record_id = f"{path.name}:{row['line_no']}" if row.get("line_no") else f"{path.name}:{number}"
                yield number, _metaqa(row["question"], row["answers"], record_id), line
            elif len(cells) != 2:
                raise RecordError("a MetaQA line is 'question TAB answer1|answer2'")
            else:
                yield number, _metaqa(cells[0], cells[1], f"{path.name}:{number}"), line
        except RecordError as e:
            yield number, e, line


def _simplequestions_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | RecordError, str]]:
    """(line number, record or the reason it is refused, the line) of a SimpleQuestions-Wikidata file:
    ``subject TAB property TAB object TAB question`` (``Rxxx`` is the inverse of ``Pxxx``); the gold answers
    are the object's id and, with a labels file beside it, its English label."""
    labels: dict[str, str] = {}
    beside = path.parent / SIMPLEQUESTIONS_LABELS
    if beside.is_file():
        try:
            text = beside.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputDataError(f"cannot read the labels file beside the questions, {beside}: {e}") from e
        for row in text.splitlines()[1:]:
            cells = row.split("\t")
            if len(cells) >= 2:
                labels[cells[0]] = cells[1]
    for number, line in _json_lines(path):
        if line.startswith("\x00invalid utf-8\x00"):
            yield number, RecordError("the line is not valid UTF-8"), line.split("\x00", 2)[2]
            continue
        cells = line.rstrip("\r\n").split("\t")
        if len(cells) != 4 or not re.match(r"^Q\d+$", cells[0]) or not re.match(r"^[PR]\d+$", cells[1]):
            yield (
                number,
                RecordError("a SimpleQuestions line is 'Qsubject TAB Pxxx|Rxxx TAB Qobject TAB question'"),
                line,
            )
            continue
        subject, _, answer, question = cells
        gold = [labels[answer], answer] if answer in labels else [answer]
        try:
            yield number, _qa(f"{path.name}:{number}", question, {}, gold[0], labels.get(subject, subject), gold), line
        except RecordError as e:
            yield number, e, line


def _robodata_records(path: Path) -> Iterator[tuple[int, dict[str, Any] | RecordError, str]]:
    """(experiment number, record or the reason it is refused, the experiment as JSON) of the RoboData
    authors' experiment file (``{"experiments": [{"paper_query_id", "query", "reported_status",
    "reported_answer", "support_graph", ...}]}``). The id is the paper's query id (A1-A7, B1-B3, C1-C7); the
    gold answers of a run the paper reports as OK are the support-graph entities its answer names and the
    question does not (no word of four letters or more in common; the other runs have none);
    ``answer_text`` keeps the paper's answer."""
    try:
        experiments = json.loads(strip_bom(path.read_bytes()).decode("utf-8"))["experiments"]
        if not isinstance(experiments, list):
            raise TypeError("experiments is not a list")
    except (ValueError, KeyError, TypeError) as e:
        raise InputDataError(f"{path} is not a RoboData experiment file ({e}).") from e
    for number, item in enumerate(experiments, start=1):
        raw = json.dumps(item, ensure_ascii=False)[:2000]
        try:
            if not isinstance(item, dict) or not str(item.get("paper_query_id") or "").strip():
                raise RecordError("an experiment needs a paper_query_id")
            query, said = str(item.get("query") or ""), str(item.get("reported_answer") or "")
            gold: list[str] = []
            asked = set(re.findall(r"[\w']{4,}", query.lower()))
            graph = item.get("support_graph") or {}
            nodes = graph.get("nodes", []) if isinstance(graph, dict) else None
            if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
                raise RecordError("support_graph must be an object whose nodes are a list of objects")
            if item.get("reported_status") == "OK":
                for node in nodes:
                    label = str(node.get("label") or "")
                    named = bool(label) and label.lower() in said.lower()
                    in_question = bool(asked & set(re.findall(r"[\w']{4,}", label.lower())))
                    if named and not in_question and re.match(r"^Q\d+$", str(node.get("id"))) and label not in gold:
                        gold.append(label)
            record = _qa(str(item["paper_query_id"]), query, {}, gold[0] if gold else "", None, gold)
            yield (
                number,
                record | {"answer": gold[0] if gold else None, "answer_text": said or None, "answers": gold},
                raw,
            )
        except RecordError as e:
            yield number, e, raw


def _csv_rows(path: Path) -> tuple[list[str], Iterator[tuple[int, dict[str, str] | RecordError, str]]]:
    """The header of a CSV file (comma-separated, double-quoted fields may hold commas and line breaks) and
    its rows as (line number, row or the reason it is refused, the row as read): a row with another number
    of fields than the header, or with bytes that are not UTF-8, is refused alone; a quote left open runs to
    the end of the file, which is then one refused record.

    Raises:
        InputDataError: the file cannot be read or has no header.
    """
    try:
        data = strip_bom(as_utf8(path.read_bytes(), path))
    except OSError as e:
        raise InputDataError(f"cannot read {path}: {e.strerror or e}.") from e
    text = data.decode("utf-8", errors="surrogateescape")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as e:
        raise InputDataError(f"{path} has no CSV header line{f' ({e})' if str(e) else ''}.") from None

    def rows() -> Iterator[tuple[int, dict[str, str] | RecordError, str]]:
        line = reader.line_num
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as e:  # the rest of the file is the one record refused, kept whole
                rest = "\n".join(text.split("\n")[line:])
                yield line + 1, RecordError(f"not CSV from here to the end of the file ({e})"), _shown(rest)
                return
            raw = _shown(",".join(cells))
            start, line = line + 1, reader.line_num
            if not any(cell.strip() for cell in cells):
                continue
            if any("\udc80" <= ch <= "\udcff" for cell in cells for ch in cell):
                yield start, RecordError("the row is not valid UTF-8"), raw
            elif len(cells) != len(header):
                yield start, RecordError(f"{len(cells)} fields, the header has {len(header)}"), raw
            else:
                yield start, dict(zip(header, cells, strict=True)), raw

    return header, rows()


def _shown(text: str) -> str:
    """Text decoded with its bad bytes kept (``surrogateescape``) as a reject stores it: those bytes escaped."""
    return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="backslashreplace")


def _storable(record: dict[str, Any]) -> dict[str, Any]:
    """The record, when its text can be written as UTF-8: JSON may spell a lone UTF-16 surrogate
    (``\\ud800``), which is no character."""
    try:
        json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError as e:
        half = e.object[e.start : e.end]
        raise RecordError(f"the text holds {half!r}, half of a UTF-16 pair, not a character") from None
    return record


def _json_lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = (strip_bom(raw) if number == 1 else raw).decode("utf-8")
            except UnicodeDecodeError:
                yield number, "\x00invalid utf-8\x00" + raw.decode("utf-8", errors="backslashreplace")
                continue
            if line.strip():
                yield number, line


def _refuse_json_array(path: Path, fmt: str) -> None:
    with path.open("rb") as fh:
        head = strip_bom(fh.read(4096)).lstrip()
    if head.startswith(b"["):
        raise InputDataError(
            f"{path} is a JSON array; the {fmt} format reads JSON Lines, one object per line. "
            f"Convert it first into a new file, e.g. `jq -c '.[]' {_shell_path(path)} > "
            f"{_shell_path(converted_name(path))}`, and read that."
        )


def _shell_path(path: Path) -> str:
    """``path`` for a shell command line: quoted, and never read as an option (``-x.json`` -> ``./-x.json``)."""
    text = str(path)
    return shlex.quote(f"./{text}" if text.startswith("-") else text)


def converted_name(path: Path) -> Path:
    """A name for the JSON Lines copy of ``path`` where nothing is yet (following a printed fix must neither
    truncate the input before it is read, through a link or not, nor overwrite another file): ``x.json`` ->
    ``x.jsonl``, else ``x.lines.jsonl``, else ``x.lines-2.jsonl``, and so on."""
    candidates = [path.with_suffix(".jsonl"), path.with_suffix(".lines.jsonl")]
    candidates += [path.with_suffix(f".lines-{n}.jsonl") for n in range(2, 100)]
    for target in candidates:
        if not target.exists() and not target.is_symlink():
            return target
    return path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.jsonl")


def read_dataset(
    path: Path,
    fmt: DatasetFormat,
    *,
    limit: int | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    time_field: str | None = None,
    max_chars: int = 1500,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> DatasetRead:
    """Read ``path`` in ``fmt``; ``limit`` keeps the first N accepted records.

    Args:
        path: the dataset file.
        fmt: one of :data:`FORMATS`.
        limit: stop after this many accepted records.
        text_field: the text column of jsonl/csv documents.
        id_field: the id column of jsonl/csv documents (default: the line number).
        time_field: the column of jsonl/csv documents with each record's time (the ``valid_from`` of the
            edges it states); a value that is not a time rejects the record.
        max_chars: documents (:data:`DOCUMENT_FORMATS`): the largest chunk.
        max_bytes: documents: a larger file is refused unread.

    Raises:
        UsageError: unknown format.
        InputDataError: the file cannot be read, a csv lacks ``text_field``, or a JSON Lines format is given a
            JSON array.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown dataset format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    if fmt in DOCUMENT_FORMATS:
        return read_documents(path, fmt, limit=limit, max_chars=max_chars, max_bytes=max_bytes)
    if path.is_dir():
        raise InputDataError(f"dataset {path} is a folder: give one file of it (extract reads one file a run).")
    if path.exists() and not path.is_file():
        raise InputDataError(f"dataset {path} is not a regular file (a FIFO, device or socket): give a file.")
    if not path.is_file():
        raise InputDataError(f"dataset file {path} does not exist.")
    records: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    read = 0
    name = path.name

    def reject(number: int, reason: str, payload: str) -> None:
        rejects.append(input_reject(f"{name}:{number}", "bad_record", reason, payload))

    if fmt == "text":
        read = 1
        data = strip_bom(as_utf8(path.read_bytes(), path))
        try:
            if b"\x00" in data:
                raise RecordError(f"binary data, not text (it starts {data[:8].hex(' ')})")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise RecordError(
                    f"the file is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); convert it, "
                    f"e.g. iconv -f latin1 -t utf-8"
                ) from None
            if not text.strip():
                raise RecordError("the file is empty")
            records.append({"record_id": name, "kind": "text", "text": text})
        except RecordError as e:
            reject(1, str(e), "")
    elif fmt == "csv":
        header, rows = _csv_rows(path)
        if text_field not in header:
            raise InputDataError(f"{path} has no column {text_field!r} (columns: {header}); set --text-field.")
        for number, found, raw in rows:
            read += 1
            if isinstance(found, RecordError):
                reject(number, str(found), raw)
                continue
            row = found
            body = row[text_field]
            if not body.strip():
                reject(number, f"{text_field} is empty", json.dumps(row, ensure_ascii=False))
                continue
            record_id = row[id_field] if id_field and row.get(id_field) else f"{name}:{number}"
            try:
                when = _record_time(row, time_field)
            except RecordError as e:
                reject(number, str(e), json.dumps(row, ensure_ascii=False))
                continue
            records.append({"record_id": record_id, "kind": "text", "text": body, "time": when})
            if limit is not None and len(records) >= limit:
                break
    elif fmt in ("metaqa", "simplequestions", "robodata"):
        lines = {"metaqa": _metaqa_lines, "simplequestions": _simplequestions_lines, "robodata": _robodata_records}[
            fmt
        ](path)
        for number, found, line in lines:
            read += 1
            try:
                if isinstance(found, RecordError):
                    raise found
                records.append(_storable(found))
            except RecordError as e:
                reject(number, str(e), line.rstrip("\n"))
                continue
            if limit is not None and len(records) >= limit:
                break
    else:
        parsers: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
            "medagents": _medagents, "csqa": _csqa, "pilot": _pilot,
        }  # fmt: skip
        _refuse_json_array(path, fmt)
        for number, line in _json_lines(path):
            read += 1
            if line.startswith("\x00invalid utf-8\x00"):
                reject(number, "the line is not valid UTF-8", line.split("\x00", 2)[2])
                continue
            line = line.rstrip("\r\n")
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise RecordError("the line is not a JSON object")
                if fmt == "jsonl":
                    value = row.get(text_field)
                    if value is None or not str(value).strip():
                        raise RecordError(f"{text_field} is missing or empty")
                    record_id = str(row[id_field]) if id_field and row.get(id_field) is not None else f"{name}:{number}"
                    when = _record_time(row, time_field)
                    record = {"record_id": record_id, "kind": "text", "text": str(value), "time": when}
                    records.append(_storable(record))
                else:
                    records.append(_storable(parsers[fmt](row, f"{name}:{number}")))
            except json.JSONDecodeError as e:
                reject(number, f"invalid JSON ({e.msg} at column {e.colno})", line)
            except RecursionError:
                reject(number, "the JSON is nested too deeply to read", line[:2000])
            except RecordError as e:
                reject(number, str(e), line)
            if limit is not None and len(records) >= limit:
                break
    records = _first_of_each_id(records, rejects, name)
    frame = pl.DataFrame(records, schema=RECORD_SCHEMA) if records else pl.DataFrame(schema=RECORD_SCHEMA)
    return DatasetRead(records=frame, rejects=pl.DataFrame(rejects, schema=REJECT_SCHEMA), read=read)


def _first_of_each_id(records: list[dict[str, Any]], rejects: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """``records`` with a record id given before kept once: each later one becomes a reject (two records of one
    id once both went to the model while the summary counted them twice)."""
    seen: set[str] = set()
    kept = []
    for record in records:
        record_id = str(record["record_id"])
        if record_id in seen:
            reason = f"the record id {record_id!r} was given to an earlier record (ids name one record each)"
            payload = json.dumps(record, ensure_ascii=False, default=str)
            rejects.append(input_reject(f"{name}: id {record_id}", "repeated_id", reason, payload))
            continue
        seen.add(record_id)
        kept.append(record)
    return kept


def read_documents(
    path: Path, fmt: DatasetFormat = "auto", *, limit: int | None = None, max_chars: int = 1500,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> DatasetRead:  # fmt: skip
    """The chunks of the document at ``path``, or of every document in the folder ``path``, as records of kind
    ``chunk`` (:mod:`metakg.documents`): each names its file and page (``report.pdf#p12``) and carries its
    section and offsets. A file that cannot be read is a reject (check ``bad_document``) with its reason; a
    link to a file the run reads is read once. ``read`` counts the files.

    Raises:
        InputDataError: ``path`` does not exist.
    """
    if not path.exists():
        raise InputDataError(f"dataset {path} does not exist.")
    records: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    for read in read_files(path, "auto" if fmt == "auto" else fmt, max_chars=max_chars, max_bytes=max_bytes):
        entry: dict[str, Any] = {
            "path": read.name, "format": read.format, "pages": read.pages, "units": 0, "rejected": read.rejected,
        }  # fmt: skip
        if read.same_as:
            entry["same_as"] = read.same_as
        files.append(entry)
        if read.rejected is not None:
            rejects.append(input_reject(read.name, "bad_document", read.rejected, ""))
            continue
        for record_id, chunk in zip(chunk_ids(read.name, read.chunks), read.chunks, strict=True):
            if limit is not None and len(records) >= limit:
                break
            entry["units"] += 1
            records.append({
                "record_id": record_id, "kind": "chunk", "text": chunk.text, "source": read.name,
                "pages": chunk.pages, "section": " > ".join(chunk.section) or None, "start": chunk.start,
                "end": chunk.end, "provenance": provenance(read.name, chunk),
            })  # fmt: skip
    frame = pl.DataFrame(records, schema=RECORD_SCHEMA) if records else pl.DataFrame(schema=RECORD_SCHEMA)
    counted = [f for f in files if "same_as" not in f]
    return DatasetRead(frame, pl.DataFrame(rejects, schema=REJECT_SCHEMA), len(counted), files)
