"""Write the settings reference into docs/settings.md (between its markers)
from the settings themselves: one table per concern (pier.settings.GROUPS),
each setting's variable, default and description. A unit test fails when the
page and the code disagree: run this after changing a setting.

    uv run python scripts/settings_reference.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic.fields import FieldInfo

from pier.settings import GROUPS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
START, END = (
    "<!-- settings:start (scripts/settings_reference.py writes this part) -->",
    "<!-- settings:end -->",
)


def default_of(field: FieldInfo) -> str:
    if field.default_factory is not None:
        name = getattr(field.default_factory, "__name__", "")
        return {"_default_home": "`$XDG_DATA_HOME/pier`", "_default_concurrency": "the CPU count",
                "detect_host_ca_bundle": "the host's bundle, when SSL_CERT_FILE & co. name one",
                "list": "none", "dict": "none"}.get(name, "computed")  # fmt: skip
    value = field.default
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"`{value}`"


TITLES = {
    "files": "State: the database, outputs, scratch",
    "sandbox": "Sandboxes: images, engine, runtime, isolation, warm pool",
    "runs": "A run's limits, attached files, variables and outputs",
    "network": "The model gateway, egress and the outbound policy",
    "server": "pier serve: tokens, slots, limits before routes, quotas, webhooks",
    "fleet": "The fleet (Temporal) and riding out faults",
    "observability": "Metrics, traces and the audit log",
}


def reference() -> str:
    parts = []
    for group in GROUPS:
        module = group.__module__.rsplit(".", 1)[-1]
        doc = " ".join((group.__doc__ or "").split())
        parts.append(f"### {TITLES.get(module, group.__name__)}\n\n{doc} (`pier/settings/{module}.py`)\n")
        parts.append("| variable | default | what |\n| --- | --- | --- |")
        for name, field in group.model_fields.items():
            description = (field.description or "").replace("|", "\\|")
            parts.append(f"| `PIER_{name.upper()}` | {default_of(field)} | {description} |")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def page_with(text: str, body: str) -> str:
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n\n{body}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/settings.md is out of date")
    args = parser.parse_args()
    text = PAGE.read_text()
    if START not in text:
        text = text.rstrip() + f"\n\n## Every setting\n\n{START}\n{END}\n"
    wanted = page_with(text, reference())
    if args.check:
        return 0 if wanted == PAGE.read_text() else 1
    PAGE.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
