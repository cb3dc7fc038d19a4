"""Ctrl-C at any moment of a real process, while the libraries load too: "interrupted", exit 130, the JSON line
under --json, never a traceback, and the bundle left whole."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metakg.schemas.bundle import read_bundle, write_bundle
from tests.conftest import small_bundle

METAKG = [sys.executable, "-c", "from metakg.cli.entry import main; main()"]
#: the same, saying on stderr when the interpreter has started and runs the entry module: a SIGINT during
#: CPython's own start-up (the site module's imports) ends in "Fatal Python error: init_import_site" before any
#: program runs, so the delays count from there (on a busy machine 0.05 s had fallen inside it)
STARTED = [sys.executable, "-c", "import sys; print('started', file=sys.stderr, flush=True); "
           "from metakg.cli.entry import main; main()"]  # fmt: skip


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.8, 1.5, 3.0])
def test_ctrl_c_at_any_moment_is_exit_130_with_the_json_line(tmp_path: Path, delay: float) -> None:
    bundle = tmp_path / "b"
    write_bundle(bundle, small_bundle())
    process = subprocess.Popen(
        [*STARTED, "validate", str(bundle), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stderr is not None and process.stderr.readline() == "started\n"
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert "Traceback" not in err, err
    if process.returncode == 130:  # interrupted (a late signal may find the command done: then it exits 0)
        assert err.strip().splitlines()[-1] == "interrupted"
        assert json.loads(out.strip().splitlines()[-1])["error_type"] == "Interrupted"
    else:
        assert process.returncode == 0, (process.returncode, err)
    assert read_bundle(bundle).nodes.height == small_bundle().nodes.height


def test_the_entry_point_loads_no_module_before_it_handles_an_interrupt() -> None:
    # an interrupt that lands while the entry module's own imports load ends in a traceback: it loads nothing
    # the interpreter has not (json, re and typing took tens of milliseconds, and a Ctrl-C at 0.05 s landed there)
    probe = "import sys; before = set(sys.modules); import metakg.cli.entry; print(sorted(set(sys.modules) - before))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['metakg', 'metakg.cli', 'metakg.cli.entry']"


def interrupted_where(bundle: Path, condition: str) -> subprocess.CompletedProcess[str]:
    """Run `metakg validate BUNDLE --json` raising Ctrl-C at the first call where ``condition`` (Python over
    ``frame``) holds; it must end as an interrupt: status 130, no traceback, the JSON line."""
    script = (
        "import sys\n"
        "fired = [False]\n"
        "def at(frame, event, arg):\n"
        f"    if not fired[0] and event == 'call' and {condition}:\n"
        "        fired[0] = True\n"
        "        raise KeyboardInterrupt\n"
        f"sys.argv = ['metakg', 'validate', {str(bundle)!r}, '--json']\n"
        "sys.setprofile(at)\n"
        "from metakg.cli.entry import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["error_type"] == "Interrupted"
    return done


def test_an_interrupt_python_wraps_while_a_class_is_made_is_still_an_interrupt(tmp_path: Path) -> None:
    """Ctrl-C while a settings class is being made reaches the program as a RuntimeError (Python wraps it):
    still "interrupted" and 130, reproduced by raising the interrupt exactly there."""
    bundle = tmp_path / "b"
    write_bundle(bundle, small_bundle())
    interrupted_where(bundle, "frame.f_code.co_name == '__set_name__'")


def test_an_interrupt_before_the_commands_guard_is_still_said(tmp_path: Path) -> None:
    """Ctrl-C while a command reads its settings, before its body's guard: typer turns it into a bare exit
    status 130, which must still say "interrupted" (with the JSON line), as anywhere else. This is where a
    signal sent 0.8 s after the start landed on a loaded machine."""
    bundle = tmp_path / "b"
    write_bundle(bundle, small_bundle())
    done = interrupted_where(
        bundle, "frame.f_code.co_name == 'settings' and frame.f_globals.get('__name__') == 'metakg.cli._common'"
    )
    assert done.stderr.strip().splitlines()[-1] == "interrupted"
    assert read_bundle(bundle).nodes.height == small_bundle().nodes.height
