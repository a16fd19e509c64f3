import pytest

from pier.agents.script import build_script, shell_blocks
from pier.errors import InputError

DOC = """# Title
```bash
echo one
```
Some text
```python
print("not run")
```
~~~sh
echo two
~~~
````bash
echo ```nested fence text```
````
```
echo untyped, not run
```
"""


def test_only_bash_and_sh_blocks_in_order():
    assert shell_blocks(DOC) == ["echo one", "echo two", "echo ```nested fence text```"]


def test_script_runs_in_app_and_fails_without_blocks():
    script = build_script(DOC)
    assert script.startswith("cd /app\n") and script.index("echo one") < script.index("echo two")
    with pytest.raises(InputError, match="no ```bash"):
        build_script("# nothing to run\n```python\nx\n```")
