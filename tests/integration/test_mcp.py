"""``metakg mcp`` as an agent starts it: the MCP SDK's own client launches the real command over stdio,
lists the tools and calls them on a bundle."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from metakg import api
from metakg.config import load_settings
from metakg.schemas.bundle import Bundle
from tests.conftest import node_id, small_bundle

METAKG = Path(sys.executable).with_name("metakg")


def payload(result: Any) -> Any:
    """A tool result's structured content (the value the tool returned), else its text parsed as JSON."""
    if getattr(result, "structured_content", None) is not None:
        data = result.structured_content
        return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


def test_the_sdk_client_lists_the_tools_and_calls_search_paths_and_ask(tmp_path: Path, any_embedder: None) -> None:
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    aspirin, migraine = node_id(small_bundle(), "aspirin"), node_id(small_bundle(), "migraine")
    server = StdioServerParameters(command=str(METAKG), args=["mcp", "--bundle", str(bundle)], env=dict(os.environ))

    async def session() -> dict[str, Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            found = await client.call_tool("search", {"text": "pyrexia", "mode": "exact"})
            paths = await client.call_tool("paths", {"src": aspirin, "dst": migraine, "k": 2})
            around = await client.call_tool("neighbours", {"id": aspirin, "limit": 2})
            missing = await client.call_tool("node", {"id": "kg:test/nope"})
            too_many = await client.call_tool("paths", {"src": aspirin, "dst": migraine, "max_hops": 99})
            asked = await client.call_tool("ask", {"question": "What does aspirin treat?", "use_llm": False,
                                                   "strategy": "kg_rag"})  # fmt: skip
            loose = [  # coerced once, where the HTTP API refuses them (probe round 4)
                await client.call_tool("search", {"text": "aspirin", "k": True}),
                await client.call_tool("search", {"text": "aspirin", "k": "3"}),
                await client.call_tool(
                    "ask", {"question": "What does aspirin treat?", "strategy": "", "use_llm": False}
                ),
                await client.call_tool("ask", {"question": "What does aspirin treat?", "use_llm": 0}),
            ]
            return {"tools": tools, "found": found, "paths": paths, "around": around, "missing": missing,
                    "too_many": too_many, "asked": asked, "loose": loose}  # fmt: skip

    got = asyncio.run(session())
    assert {t.name for t in got["tools"].tools} == {"search", "node", "neighbours", "paths", "ask"}
    assert payload(got["found"])[0]["node"]["name"] == "fever"
    paths = payload(got["paths"])
    assert paths[0]["nodes"][0] == aspirin and paths[0]["nodes"][-1] == migraine
    assert len(payload(got["around"])) == 2
    assert got["missing"].is_error and "kg:test/nope" in got["missing"].content[0].text
    assert got["too_many"].is_error and "max_hops" in got["too_many"].content[0].text
    answer = payload(got["asked"])
    assert answer["evidence"] and answer["status"] == "fail" and "retrieval only" in answer["reason"]
    for refused, name in zip(got["loose"], ("k", "k", "strategy", "use_llm"), strict=True):
        assert refused.is_error and name in refused.content[0].text, refused.content[0].text


def test_one_server_of_two_graphs_reads_the_one_each_call_names(tmp_path: Path) -> None:
    first, second = tmp_path / "drugs", tmp_path / "trials"
    api.write_validated(first, small_bundle(), load_settings())
    other = small_bundle()
    api.write_validated(second, Bundle(other.nodes.head(4), other.edges.head(2)), load_settings())
    args = ["mcp", "--bundle", f"drugs={first}", "--bundle", f"trials={second}"]
    server = StdioServerParameters(command=str(METAKG), args=args, env=dict(os.environ))

    async def session() -> dict[str, Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            return {
                "tools": await client.list_tools(),
                "default": await client.call_tool("search", {"text": "warfarin", "mode": "exact"}),
                "trials": await client.call_tool("search", {"text": "warfarin", "mode": "exact", "graph": "trials"}),
                "nowhere": await client.call_tool("node", {"id": "aspirin", "graph": "nope"}),
            }

    got = asyncio.run(session())
    assert all("graph" in t.input_schema["properties"] for t in got["tools"].tools)
    assert [hit["node"]["name"] for hit in payload(got["default"])] == ["warfarin"]  # the first graph: drugs
    assert payload(got["trials"]) == []  # the 4 nodes of trials hold no warfarin
    assert got["nowhere"].is_error and "no graph 'nope' here; this server has drugs, trials" in (
        got["nowhere"].content[0].text
    )


@pytest.mark.parametrize("args", [["mcp"], ["mcp", "--bundle", "/nonexistent/kg"]])
def test_mcp_without_a_graph_is_a_usage_or_data_error(args: list[str]) -> None:
    import subprocess

    done = subprocess.run([str(METAKG), *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode in (1, 2) and done.stdout == ""  # stdout is the protocol's: nothing else goes there
    assert "--bundle" in done.stderr or "not a KG bundle" in done.stderr


def test_http_options_on_stdio_are_refused(tmp_path: Path) -> None:
    api.write_validated(tmp_path / "kg", small_bundle(), load_settings())
    for extra in (["--port", "9000"], ["--api-key", "k"]):  # an API key on stdio once went unused without a word
        done = subprocess.run([str(METAKG), "mcp", "--bundle", str(tmp_path / "kg"), *extra],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 2 and "are for --http" in done.stderr and done.stdout == ""


def test_the_sdk_client_over_streamable_http_with_the_api_key(tmp_path: Path, any_embedder: None) -> None:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tools.neo4j_server import free_port

    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    aspirin, migraine = node_id(small_bundle(), "aspirin"), node_id(small_bundle(), "migraine")
    refused = subprocess.run(
        [str(METAKG), "mcp", "--bundle", str(bundle), "--http", "--host", "0.0.0.0"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "METAKG_SERVER__API_KEY": ""},
    )  # fmt: skip
    assert refused.returncode == 2 and "needs an API key" in refused.stderr
    port = free_port()
    log = tmp_path / "mcp-http.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(METAKG), "mcp", "--bundle", str(bundle), "--http", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "METAKG_SERVER__API_KEY": "mcp-key-123"},
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                without_key = httpx.post(url, json={}, timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            raise AssertionError(log.read_text())
        assert without_key.status_code == 401
        # issue 56, item 15: the challenge says where the key goes (without one, Inspector guesses OAuth)
        assert without_key.headers["www-authenticate"] == 'APIKey realm="metakg", header="X-API-Key"'

        async def session() -> dict[str, Any]:
            keyed = create_mcp_http_client(headers={"X-API-Key": "mcp-key-123"})
            async with keyed, Client(streamable_http_client(url, http_client=keyed)) as client:
                tools = await client.list_tools()
                found = await client.call_tool("search", {"text": "pyrexia", "mode": "exact"})
                paths = await client.call_tool("paths", {"src": aspirin, "dst": migraine, "k": 2})
                return {"tools": tools, "found": found, "paths": paths}

        got = asyncio.run(session())
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert {t.name for t in got["tools"].tools} == {"search", "node", "neighbours", "paths", "ask"}
    assert payload(got["found"])[0]["node"]["name"] == "fever"
    assert payload(got["paths"])[0]["nodes"][-1] == migraine
    assert "mcp-key-123" not in log.read_text(encoding="utf-8")


def test_the_tools_tell_an_agent_what_they_take_and_that_they_only_read(tmp_path: Path, any_embedder: None) -> None:
    bundle = tmp_path / "kg"
    api.write_validated(bundle, small_bundle(), load_settings())
    server = StdioServerParameters(command=str(METAKG), args=["mcp", "--bundle", str(bundle)], env=dict(os.environ))

    async def session() -> dict[str, Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            return {
                "tools": (await client.list_tools()).tools,
                "by_name": await client.call_tool("paths", {"src": "aspirin", "dst": "migraine", "k": 1}),
                "node": await client.call_tool("node", {"id": "sumatriptn"}),  # a typo of a name
                "unknown": await client.call_tool("neighbours", {"id": "zzzz qqqq"}),
                # a misspelt argument: the SDK alone drops it and runs the default strategy
                "misspelt": await client.call_tool(
                    "ask", {"question": "What does aspirin treat?", "use_llm": False, "stratgy": "kg_rag"}
                ),
                "too_many": await client.call_tool("search", {"text": "aspirin", "k": 1000}),
            }

    got = asyncio.run(session())
    tools = {t.name: t for t in got["tools"]}
    for tool in tools.values():
        assert tool.annotations is not None and tool.annotations.read_only_hint is True, tool.name
        assert tool.annotations.destructive_hint is False and len(tool.description or "") > 150, tool.name
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), (tool.name, name)  # every parameter says what it is
    assert all(tool.input_schema.get("additionalProperties") is False for tool in tools.values())
    misspelt = got["misspelt"].content[0].text
    assert got["misspelt"].is_error and "stratgy" in misspelt and "not permitted" in misspelt
    # issue 56, item 15: one line naming the argument and its bound, no pydantic report with its links
    too_many = got["too_many"].content[0].text
    assert got["too_many"].is_error and too_many == (
        "bad arguments for search: k: Input should be less than or equal to 100"
    ), too_many
    assert "pydantic.dev" not in misspelt and "\n" not in misspelt
    ask = tools["ask"]
    assert ask.annotations is not None and ask.annotations.open_world_hint is True  # robodata reads Wikidata
    assert ".." not in (ask.description or "")
    search = tools["search"].input_schema["properties"]
    assert search["k"]["minimum"] == 1 and search["k"]["maximum"] == 100
    assert set(search["mode"]["enum"]) == {"exact", "normalised", "fuzzy", "embedding", "auto"}
    assert tools["paths"].input_schema["properties"]["max_hops"]["maximum"] == 6
    assert "kg_rag" in (tools["ask"].description or "") and "medcog" in (tools["ask"].description or "")
    assert '"A: text"' in json.dumps(tools["ask"].input_schema) or "A: text" in json.dumps(tools["ask"].input_schema)
    path = payload(got["by_name"])[0]  # names, not only ids
    assert path["nodes"][0] == node_id(small_bundle(), "aspirin") and path["nodes"][-1] == node_id(
        small_bundle(), "migraine"
    )
    assert payload(got["node"])["name"] == "sumatriptan"
    unknown = got["unknown"].content[0].text
    assert got["unknown"].is_error and "closest names" in unknown and "metakg " not in unknown  # no CLI command
