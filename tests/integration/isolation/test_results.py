"""Results never lose a file silently, on the real engine: a second name of a
file (a hard link) is collected as a file; a fifo and a socket are not, and the
run's warning names them. The same whether collect reads the folders with one
tar in the sandbox or, in a sandbox without tar, with the engine's archives."""

from __future__ import annotations

import pytest
from tests.support.runs import run_folder

from pier.lifecycle.start import RunRequest, Services, run
from pier.runbook import parse
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

RUNBOOK = r"""---
agent: script
network_enabled: false
---
# Odd files
```bash
cd {{results_dir}}
echo "one file, two names" > first.txt
mkdir -p deep && ln first.txt deep/second.txt
mkfifo pipe
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('{{results_dir}}/sock')"
```
"""


@pytest.mark.parametrize("tar", ["tar", "no tar"])
def test_hard_links_are_kept_and_fifos_and_sockets_named(runtime, base_image, tar):
    runbook = RUNBOOK if tar == "tar" else RUNBOOK.replace("```\n", 'rm -f "$(command -v tar)"\n```\n', 1)
    assert tar == "tar" or "rm -f" in runbook
    request = RunRequest(collection="odd", task_name="odd", task=task_from_runbook(parse(runbook)),
                         run_params={"snapshot": "", "image": base_image})  # fmt: skip
    record = run(Services(get_settings()), request)

    assert record.status.value == "completed", record.error
    assert sorted(f.path for f in record.outputs.results_files) == ["deep/second.txt", "first.txt"]
    results = run_folder(record) / "results"
    assert (results / "deep" / "second.txt").read_text() == "one file, two names\n"
    [warning] = [w for w in record.outputs.warnings if w.startswith("not collected")]
    assert "/app/results/pipe: a named pipe (fifo)" in warning
    assert "/app/results/sock: a socket" in warning
