"""`pier`: run runbooks, look at runs, keep the machine clean.

This package is the command tree: `pier X` and its subcommands are the module
pier.cli.X (`pier logs` sits beside `pier runs` in pier.cli.runs), put together
below in the order `pier --help` lists them. Its other modules are what the
commands share (the console, options) or load once they run (the live
progress, `pier run --remote`, the runbook linter); no command imports another
(docs/architecture.md, "Adding a command").
"""

from __future__ import annotations

import copy
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

from pier.cli import (
    audit,
    collection,
    db,
    experiment,
    routine,
    run,
    runs,
    sandbox,
    serve,
    snapshot,
    storage,
    sweep,
    task,
    validate,
    volume,
    worker,
)
from pier.errors import ConfigurationError, DatabaseTooNew

# Start-up: this package is imported by every `pier` call, `pier --help` included,
# so it and its command modules import only typer, pier.errors and the CLI's light
# modules (console, options, orphans, summary); each command imports what it
# needs (SQLAlchemy, pydantic models, the docker SDK, rich) in its body.
# tests/unit/cli/test_cli_imports.py keeps it that way. Help and usage errors are
# click's plain text (rich_markup_mode=None on every command group): typer's rich
# formatting alone costs more than the rest of `pier --help`.


def _no_type_for_flags() -> None:
    """typer's help shows `<bool>` after every flag, as if it took a value: a
    flag's type column is left empty (an option that takes a value keeps it)."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign,assignment]


_no_type_for_flags()


class CommandTree(typer.Typer):
    """A Typer that, called with a command's name (`pier runs ...`), builds
    only that command under its groups: typer reads every command function's
    signature to build a click command, and for a command that only reads that
    was a good part of its start-up. Everything else (no command, an unknown
    or misspelt one, a shell's completion) sees the whole tree."""

    def __call__(self, args: Sequence[str] | None = None, **kwargs: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
        if "--install-completion" in argv or "--show-completion" in argv:
            _completion_for_uv_run()
        tree = self if completing else _only_path(self, argv)
        try:
            return typer.Typer.__call__(tree, argv if args is not None else None, **kwargs)
        except ConfigurationError as exc:  # a bad PIER_* setting: one line each, no traceback
            for line in exc.lines:
                print(f"error: {line}", file=sys.stderr)
            print("error: fix the settings above (docs/settings.md lists each)", file=sys.stderr)
            raise SystemExit(2) from None
        except DatabaseTooNew as exc:  # an older pier on a newer database: say so, not a traceback
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(1) from None


def _only_path(typer_app: typer.Typer, argv: list[str]) -> typer.Typer:
    """typer_app with only the command or group argv[0] names (and in that group,
    only what argv[1] names, and so on); typer_app itself when argv[0] is none."""
    if not argv:
        return typer_app
    commands = [c for c in typer_app.registered_commands if c.name == argv[0]]
    groups = [g for g in typer_app.registered_groups if g.name == argv[0]]
    if len(commands) + len(groups) != 1:
        return typer_app
    pruned = copy.copy(typer_app)
    pruned.registered_commands = commands
    pruned.registered_groups = groups
    if groups and groups[0].typer_instance is not None:
        group = copy.copy(groups[0])
        group.typer_instance = _only_path(groups[0].typer_instance, argv[1:])
        pruned.registered_groups = [group]
    return pruned


app = CommandTree(
    help="pier: run AI agents on runbooks in isolated sandboxes.", no_args_is_help=True, rich_markup_mode=None
)


# What `--install-completion` adds for bash and zsh beside typer's completion
# of `pier`: the same completion after `uv run pier` (the docs' way to call it,
# with no `pier` on PATH), and uv's own completion, if it has one, elsewhere.
_UV_RUN_BASH = r"""

# `uv run %(prog_name)s ...`: %(prog_name)s's completion; any other uv command: uv's own, if any.
%(complete_func)s_uv_before="$(complete -p uv 2>/dev/null | sed -n 's/.* -F \([^ ]*\) .*/\1/p')"
%(complete_func)s_uv() {
    local i
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == %(prog_name)s && ${COMP_WORDS[i-1]} == run ]]; then
            local IFS=$'\n'
            COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]:i}" COMP_CWORD=$((COMP_CWORD - i)) \
                           %(autocomplete_var)s=complete_bash uv run %(prog_name)s 2>/dev/null ) )
            return 0
        fi
    done
    if [[ -n $%(complete_func)s_uv_before && $%(complete_func)s_uv_before != %(complete_func)s_uv ]]; then
        "$%(complete_func)s_uv_before" "$@"
    fi
}
complete -o default -F %(complete_func)s_uv uv
"""
_UV_RUN_ZSH = r"""

# `uv run %(prog_name)s ...`: %(prog_name)s's completion; any other uv command: uv's own, if any.
%(complete_func)s_uv() {
  local i
  for ((i = 3; i < CURRENT; i++)); do
    if [[ ${words[i]} == %(prog_name)s && ${words[i-1]} == run ]]; then
      eval $(env _TYPER_COMPLETE_ARGS="${words[i,$CURRENT]}" %(autocomplete_var)s=complete_zsh uv run %(prog_name)s 2>/dev/null)
      return
    fi
  done
  (( $+functions[_uv] )) && _uv "$@"
}

compdef %(complete_func)s_uv uv
"""


def _completion_for_uv_run() -> None:
    from typer import _completion_shared as shared

    for shell, extra in (("bash", _UV_RUN_BASH), ("zsh", _UV_RUN_ZSH)):
        script = shared._completion_scripts[shell]
        if extra not in script:
            shared._completion_scripts[shell] = script.rstrip("\n") + extra


@app.callback()
def _private_files() -> None:
    """Everything pier creates (under PIER_HOME: the database, storage, scratch,
    keys) is its owner's alone: 0600 files, 0700 folders (pier.settings.PRIVATE_UMASK)."""
    os.umask(0o077)
    if os.environ.get("PIER_LOG_FORMAT", "").strip().lower() == "json":  # the CLI's own logging, as JSON
        from pier.telemetry import logs

        logs.configure(logging.WARNING, "json")


app.command("run")(run.run_command)
app.command("runs")(runs.runs_command)
app.command("logs")(runs.logs_command)
app.command("sweep")(sweep.sweep_command)
app.command("validate")(validate.validate_command)
app.command("serve")(serve.serve)
app.command("worker")(worker.worker)
app.add_typer(snapshot.snapshot_app, name="snapshot")
app.add_typer(collection.collection_app, name="collection")
app.add_typer(task.task_app, name="task")
app.add_typer(routine.routine_app, name="routine")
app.add_typer(experiment.experiment_app, name="experiment")
app.add_typer(sandbox.sandbox_app, name="sandbox")
app.add_typer(volume.volume_app, name="volume")
app.add_typer(storage.storage_app, name="storage")
app.add_typer(db.db_app, name="db")
app.add_typer(audit.audit_app, name="audit")


def main() -> None:  # pragma: no cover
    app(prog_name="pier")
