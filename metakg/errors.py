"""One exception root for the toolkit, one subclass per failure domain.

Every message states the cause and the fix (which setting, which file, which install extra). The CLI maps
``exit_code`` to the process exit status: 1 for data or validation failures, 2 for usage or configuration
errors.
"""

from __future__ import annotations


class MetakgError(Exception):
    """Root of every error metakg raises on purpose.

    The message says the cause and the fix in the library's terms; ``cli_fix`` is the command line that fixes
    it, which the ``metakg`` command prints after the message (a library caller may have no command line).
    """

    exit_code: int = 1

    def __init__(self, message: str = "", *, cli_fix: str | None = None) -> None:
        """``cli_fix``: the ``metakg ...`` command that fixes the cause, when there is one."""
        super().__init__(message)
        self.cli_fix = cli_fix


class ConfigError(MetakgError):
    """A setting is missing, malformed, or points at something that does not exist."""

    exit_code = 2


class UsageError(MetakgError):
    """The caller asked for something that cannot be done as asked (bad argument combination)."""

    exit_code = 2


class InputDataError(MetakgError):
    """An input file cannot be read at all (missing, unreadable, wrong format as a whole)."""

    exit_code = 1


class OntologyError(InputDataError):
    """An ontology cannot guide extraction: unreadable, no relations, a domain or range that is not a class, a
    subclass cycle. The message names the element."""


class BundleError(MetakgError):
    """A KG bundle directory is missing, incomplete, or written by an incompatible schema version."""

    exit_code = 1


class BundleNotWritten(BundleError):
    """A bundle could not be written (a full disk, no permission); its previous version is unchanged."""


class BundleChanged(BundleError):
    """The bundle holds another version than the one a writer read: the write is refused, nothing written."""


class ResourceBusy(MetakgError):
    """Another metakg process is writing the same bundle, folder or state file."""

    exit_code = 1


class OutputError(MetakgError):
    """An output cannot be written at all: a folder without write permission, a path that is a file."""

    exit_code = 1


class StoreError(MetakgError):
    """A graph store could not answer (unknown node, bad query parameters, backend failure)."""

    exit_code = 1


class NodeNotFound(StoreError):
    """A node id or name given to a store does not exist in it."""


class EmbeddingError(MetakgError):
    """The embedding model could not be found, downloaded or run."""

    exit_code = 2


class ExportError(MetakgError):
    """An export (RDF, admin-import files) could not be written."""

    exit_code = 1


class LLMError(MetakgError):
    """The model endpoint could not answer (after retries), or answered with something unusable."""

    exit_code = 1

    def __init__(self, message: str, *, attempts: int = 1, cli_fix: str | None = None) -> None:
        """``attempts``: how many times the request was sent before giving up."""
        super().__init__(message, cli_fix=cli_fix)
        self.attempts = attempts


class BatchPending(MetakgError):
    """A provider batch is submitted but not finished, and the run does not wait for it (``extract --batch
    ... --no-wait``, or vLLM's offline run still to do): nothing failed, the same command collects it later.
    ``batch_id`` names it; ``command`` is what to run first (vLLM), when anything."""

    exit_code = 75  # EX_TEMPFAIL: try again later

    def __init__(self, message: str, *, batch_id: str, command: str | None = None) -> None:
        super().__init__(message, cli_fix=command)
        self.batch_id = batch_id
        self.command = command
        self.notes: list[str] = []  # what the results collected so far held that no request asked for
