"""The Wikidata sync's state file on a disk that refuses it (probe round 4: an OSError traceback, and its
temporary file left for good)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metakg.errors import OutputError
from metakg.ingest.wikidata.state import read_state, write_state


def test_a_state_file_that_cannot_be_written_is_a_clean_error_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "st.json"
    write_state(path, {"entities": {"Q42": {"rev": 1}}, "property_labels": {}})
    blocked = tmp_path / "blocked.json"
    blocked.mkdir()  # the rename onto it fails, as a full disk fails the write
    with pytest.raises(OutputError, match=r"cannot write the sync state file .*blocked\.json .*run the sync again"):
        write_state(blocked, {"entities": {}, "property_labels": {}})
    assert not list(tmp_path.glob(".blocked.json.tmp-*"))
    assert read_state(path)["entities"] == {"Q42": {"rev": 1}}  # the other state is untouched
