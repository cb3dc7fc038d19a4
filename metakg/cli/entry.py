"""The ``metakg`` script's entry point: imports the command line only once Ctrl-C is handled, so an interrupt
at any moment, while the libraries load too, ends with "interrupted" and exit status 130, never a traceback."""

from __future__ import annotations

import json
import sys

#: the exit status of a command stopped by Ctrl-C (or SIGINT), as shells report it
INTERRUPTED = 130


def main() -> None:
    """Run the ``metakg`` command line."""
    try:
        from metakg.cli.main import main as run

        run()
    except KeyboardInterrupt:
        interrupted()
    except Exception as e:  # Python wraps an interrupt raised while a class is made (in RuntimeError)
        if _caused_by_interrupt(e):
            interrupted()
        raise


def _caused_by_interrupt(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def interrupted() -> None:
    """Say so (with the JSON line under --json) and exit with :data:`INTERRUPTED`."""
    sys.stderr.write("interrupted\n")
    if "--json" in sys.argv[1:]:
        payload = {"ok": False, "command": "", "error": "interrupted", "error_type": "Interrupted", "exit_code": 130}
        sys.stdout.write(json.dumps(payload) + "\n")
        sys.stdout.flush()
    sys.exit(INTERRUPTED)
