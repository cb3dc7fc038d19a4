"""A self-contained HTML page for one answer: the evidence subgraph drawn as SVG, the answer and the trace.

No JavaScript or network: node positions come from a small spring layout computed here, so the page opens
anywhere. Start entities are drawn filled; every node and edge shows its graph id on hover.
"""

from __future__ import annotations

import html
import json

import numpy as np

from metakg.qa_engine.core import Answer, Question

WIDTH, HEIGHT, MARGIN = 960, 640, 70


def layout(
    nodes: list[str], edges: list[tuple[str, str]], *, seed: int = 0, steps: int = 300
) -> dict[str, tuple[float, float]]:
    """Fruchterman-Reingold positions in the drawing area (deterministic for a seed)."""
    n = len(nodes)
    if n == 0:
        return {}
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1, 1, (n, 2))
    index = {node: i for i, node in enumerate(nodes)}
    pairs = np.asarray([(index[a], index[b]) for a, b in edges if a in index and b in index], dtype=np.int64)
    k = np.sqrt(4.0 / n)
    temperature = 0.2
    for _ in range(steps if n > 1 else 0):
        delta = pos[:, None, :] - pos[None, :, :]
        dist = np.maximum(np.linalg.norm(delta, axis=2), 1e-3)
        force = (delta / dist[..., None] * (k * k / dist)[..., None]).sum(axis=1)
        if len(pairs):
            d = pos[pairs[:, 0]] - pos[pairs[:, 1]]
            length = np.maximum(np.linalg.norm(d, axis=1), 1e-3)
            pull = d / length[:, None] * (length * length / k)[:, None]
            np.add.at(force, pairs[:, 0], -pull)
            np.add.at(force, pairs[:, 1], pull)
        step = np.linalg.norm(force, axis=1)
        pos += force / np.maximum(step, 1e-9)[:, None] * np.minimum(step, temperature)[:, None]
        temperature *= 0.985
    low, high = pos.min(axis=0), pos.max(axis=0)
    span = np.where(high - low < 1e-9, 1.0, high - low)
    scaled = (pos - low) / span
    return {
        node: (MARGIN + float(x) * (WIDTH - 2 * MARGIN), MARGIN + float(y) * (HEIGHT - 2 * MARGIN))
        for node, (x, y) in zip(nodes, scaled, strict=True)
    }


def answer_page(question: Question, answer: Answer) -> str:
    """The HTML page of ``answer``."""
    names: dict[str, str] = {}
    edges: dict[str, tuple[str, str, str]] = {}
    for path in answer.evidence:
        for edge_id, (src, dst), (head, rel, tail) in zip(path.edges, path.ends, path.triples, strict=True):
            names.setdefault(src, head)
            names.setdefault(dst, tail)
            edges.setdefault(edge_id, (src, dst, rel))
        for node in path.nodes:
            names.setdefault(node, node)
    starts = {s["id"] for s in answer.trace.get("start_entities", [])}
    pos = layout(list(names), [(a, b) for a, b, _ in edges.values()])
    esc = html.escape
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="18" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#888"/></marker></defs>',
    ]
    for edge_id, (a, b, rel) in edges.items():
        (x1, y1), (x2, y2) = pos[a], pos[b]
        svg.append(
            f'<g><title>{esc(edge_id)}</title><line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="#888" marker-end="url(#arrow)"/><text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2 - 4:.1f}" '
            f'font-size="11" fill="#555" text-anchor="middle">{esc(rel)}</text></g>'
        )
    for node, (x, y) in pos.items():
        fill = "#2b6cb0" if node in starts else "#fff"
        svg.append(
            f'<g><title>{esc(node)}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="{fill}" stroke="#2b6cb0" '
            f'stroke-width="2"/><text x="{x:.1f}" y="{y + 22:.1f}" font-size="13" text-anchor="middle">'
            f"{esc(names[node])}</text></g>"
        )
    svg.append("</svg>")
    choices = "".join(
        f"<li{' class=chosen' if letter == answer.choice else ''}>{esc(letter)}: {esc(text)}</li>"
        for letter, text in question.choices
    )
    verdict = (
        f"<p><b>Answer:</b> {esc(answer.choice or '')} {esc(answer.text)}</p>"
        if answer.status == "ok"
        else f"<p><b>No answer:</b> {esc(answer.reason or '')}</p>"
    )
    usage = answer.usage
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>metakg answer</title><style>"
        "body{font-family:sans-serif;margin:2em;max-width:1000px} li.chosen{font-weight:bold}"
        "pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:12px}</style></head><body>"
        f"<h1>{esc(question.text)}</h1><ul>{choices}</ul>{verdict}"
        f"<p>strategy {esc(answer.strategy)}; {len(answer.evidence)} evidence paths, {len(names)} entities, "
        f"{len(edges)} edges; {usage.llm_calls} LLM calls, {usage.tokens} tokens, "
        f"retrieval {usage.retrieval_ms:.0f} ms, total {usage.total_ms:.0f} ms</p>"
        + "".join(svg)
        + f"<h2>Trace</h2><pre>{esc(json.dumps(answer.trace, indent=1, ensure_ascii=False))}</pre></body></html>\n"
    )
