"""pier's exceptions: one root, leaves that also inherit the matching builtin.

Every message says what went wrong and what to do about it.
"""

from __future__ import annotations


class PierError(Exception):
    """Root of every error pier raises on purpose."""


class InputError(PierError, ValueError):
    """Bad input from the user: a runbook, a flag, a parameter. CLI exit code 2.

    `key` is the runbook key it is about (`agent`, `checks.1`, `vars.person`), or
    `line` the line of the runbook, when known: `pier validate` turns either into
    file:line:column."""

    key: str | None = None
    line: int | None = None
    column: int | None = None

    def at(self, key: str | None = None, line: int | None = None, column: int | None = None) -> InputError:
        """This error, placed at a runbook key or line (kept when already placed)."""
        if self.key is None and self.line is None:
            self.key, self.line, self.column = key, line, column
        return self


class Problems(InputError):
    """Several independent input errors found in one pass, so the user fixes them
    all at once. str() is every message, one a line."""

    def __init__(self, problems: list[InputError]):
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = tuple(problems)

    @staticmethod
    def raise_any(problems: list[InputError]) -> None:
        if len(problems) == 1:
            raise problems[0]
        if problems:
            raise Problems(problems)


class RunbookError(InputError):
    """A RUNBOOK.md that cannot be parsed. `line` and `column` are 1-based when known."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, column: int | None = None
    ):
        where = path or "runbook"
        if line is not None:
            where = f"{where}:{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.column = column
        self.message = message


class TaskError(InputError):
    """A task or init_params that does not validate."""


class AssetError(InputError):
    """An attached file that cannot be placed safely in /app/assets."""

    field = "files"  # what the API's 422 names


class NotFoundError(PierError, LookupError):
    """A run, task, collection or snapshot that does not exist."""


class SandboxError(PierError, RuntimeError):
    """The sandbox could not be created, reached or used (not a failed command)."""


class ImageError(SandboxError):
    """An image could not be pulled or built."""


class VolumeInUse(SandboxError):
    """A named volume cannot be removed: a sandbox mounts it (HTTP 409)."""


class CapabilityError(SandboxError):
    """The spec asks for something the sandbox backend cannot enforce (network off,
    an egress allow-list, GPUs...). Raised before anything is created; retrying
    cannot help."""


class ServiceUnavailable(PierError, ConnectionError):
    """A service pier needs (Temporal, the database, storage) does not answer
    now; trying again later may work. The API's 503 (with Retry-After when
    `retry_after` says how long)."""

    def __init__(self, *args: object, retry_after: int | None = None):
        super().__init__(*args)
        self.retry_after = retry_after


class StageError(PierError, RuntimeError):
    """A run stage failed; `stage` names it, the message says what to do, and
    `outcome` (a pier.lifecycle.outcomes.Outcome value) says whose failure it is
    when the stage alone does not (pier.lifecycle.outcomes.classify)."""

    def __init__(self, stage: str, message: str, outcome: str | None = None):
        super().__init__(message)
        self.stage = stage
        self.message = message
        self.outcome = outcome


class ConfigurationError(InputError):
    """PIER_* settings that do not validate: str() is one line per bad setting,
    naming the variable, its value and what is allowed."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = tuple(lines)


class DatabaseTooNew(PierError):
    """The database was migrated by a newer pier than this one: it says which
    migration, and what to do."""
