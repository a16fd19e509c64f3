"""Checks: built-in checks, run by a small python3 program pier copies into
the sandbox, and code checks, a source placed in /app/checks/<name> plus a shell
command. Both run after the agent stopped, in a clean shell."""

from pier.checks.model import Check, CodeCheck, check_isolation, parse_checks
from pier.checks.report import ReportError, eval_summary
from pier.checks.runner import CheckOptions, run_checks
from pier.checks.sources import load_checks, required_tools, resolve_local

__all__ = [
    "Check",
    "CheckOptions",
    "CodeCheck",
    "ReportError",
    "check_isolation",
    "eval_summary",
    "load_checks",
    "parse_checks",
    "required_tools",
    "resolve_local",
    "run_checks",
]
