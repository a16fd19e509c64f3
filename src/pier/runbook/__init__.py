from pier.runbook.model import Frontmatter, SecretDecl
from pier.runbook.parse import RUNBOOK_FILENAME, Runbook, load, locate, parse
from pier.runbook.render import Rendered, render, variables

__all__ = [
    "RUNBOOK_FILENAME",
    "Frontmatter",
    "Rendered",
    "Runbook",
    "SecretDecl",
    "load",
    "locate",
    "parse",
    "render",
    "variables",
]
