"""The ``metakg`` script's entry point: imports the command line only once Ctrl-C is handled, so an interrupt
at any moment, while the libraries load too, ends with "interrupted" and exit status 130, never a traceback."""

from __future__ import annotations

import os
import sys

# nothing else is imported before main(): an interrupt while a module loads at the top here would end in a
# traceback (json, re and typing take tens of milliseconds to load); os and sys are loaded with the interpreter

#: the exit status of a command stopped by Ctrl-C (or SIGINT), as shells report it
INTERRUPTED = 130
#: the JSON line of an interrupted command under --json, written out (json is not loaded yet when it may be needed)
INTERRUPTED_JSON = '{"ok": false, "command": "", "error": "interrupted", "error_type": "Interrupted", "exit_code": 130}'


def main() -> None:
    """Run the ``metakg`` command line."""
    sys.unraisablehook = _unraisable
    try:
        from metakg.cli.main import main as run

        run()
    except SystemExit:
        # the command has finished and said so: an interrupt during the interpreter's teardown changes nothing
        # (imported here: nothing but the standard minimum may load before the interrupt is handled)
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise
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


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """An interrupt Python cannot raise where it lands (in a finaliser or a callback while a library loads: it
    would print "Exception ignored" and go on) ends the process at once, as an interrupt anywhere else does.
    Nothing has been written then that a later run would not tidy: bundles are replaced whole."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _say_interrupted()
        os._exit(INTERRUPTED)
    sys.__unraisablehook__(unraisable)


def _say_interrupted() -> None:
    sys.stderr.write("interrupted\n")
    if "--json" in sys.argv[1:]:
        sys.stdout.write(INTERRUPTED_JSON + "\n")
    sys.stdout.flush()
    sys.stderr.flush()


def interrupted() -> None:
    """Say so (with the JSON line under --json) and exit with :data:`INTERRUPTED`."""
    _say_interrupted()
    sys.exit(INTERRUPTED)
