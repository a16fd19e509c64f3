"""No dead code in src/pier: vulture reads src/pier with the tests, scripts and
benches (what they use is used) and the whitelist of names a framework calls
(dead_code_whitelist.py), and finds no function, method, class, import or
unreachable line that nothing uses. Unused variables and attributes are left
out: pydantic fields and dataclass fields are read by name, not by code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHITELIST = Path(__file__).with_name("dead_code_whitelist.py")
# Decorators that register what they decorate with a framework (it calls them).
FRAMEWORK_DECORATORS = (
    "@route,@check,@atexit.register,@router.*,@app.*,@*.command,@*.group,@*.callback,@field_validator,"
    "@model_validator,@field_serializer,@*.exception_handler,@*.middleware,@workflow.*,"
    "@activity.*,@property,@cached_property,@computed_field,@*.setter"
)


def dead_code() -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "vulture", "src/pier", "tests", "scripts", "bench", str(WHITELIST),
         "--min-confidence", "60", "--ignore-decorators", FRAMEWORK_DECORATORS],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode in (0, 3), result.stderr  # 3: vulture found something
    return [
        line
        for line in result.stdout.splitlines()
        if line.startswith("src/pier/") and "unused variable" not in line and "unused attribute" not in line
    ]


def test_src_has_no_dead_code():
    found = dead_code()
    assert not found, "remove these, or name who calls them in dead_code_whitelist.py:\n" + "\n".join(found)
