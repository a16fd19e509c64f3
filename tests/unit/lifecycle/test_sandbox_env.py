from __future__ import annotations

import pytest

from pier.errors import InputError
from pier.lifecycle.sandbox_env import sandbox_env
from pier.runbook import parse
from pier.tasks import resolve, task_from_runbook

RUNBOOK = """---
agent: script
secrets:
  API_KEY: {required: true}
  Optional: {env: OPTIONAL_VAR}
---
```bash
echo hi
```
"""


def step():
    return resolve(task_from_runbook(parse(RUNBOOK)), {})


def test_only_declared_collection_variables_and_every_secret_param():
    env = sandbox_env(
        step(),
        {"API_KEY": "k", "OPTIONAL_VAR": "o", "Optional": "wrong-name", "UNRELATED": "u"},
        {"PER_RUN": "p", "API_KEY": "override"},
    )
    assert env == {"API_KEY": "override", "OPTIONAL_VAR": "o", "PER_RUN": "p"}


def test_a_missing_required_variable_is_named_with_the_fix():
    with pytest.raises(InputError, match=r"requires API_KEY.*environment.*secret_params"):
        sandbox_env(step(), {"OPTIONAL_VAR": "o"})
