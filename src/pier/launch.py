"""The `pier` command's entry point. A local `pier run` is handed to a resident
pier process when one answers (pier.resident; PIER_RESIDENT, off in CI jobs);
everything else, and a run no resident took, goes to the command tree
(pier.cli). This module imports nothing but os and sys: every `pier` call
starts here, `pier --help` included."""

from __future__ import annotations

import os
import sys

OFF = ("false", "0", "no", "off")
# Set in CI jobs (CI by most services, JENKINS_URL and BUILD_ID by Jenkins, TF_BUILD by
# Azure Pipelines): a job's clean-up kills what the job started, so a resident one
# job started would take the next job's runs down with it.
CI_VARIABLES = ("CI", "JENKINS_URL", "BUILD_ID", "TF_BUILD")


def main() -> None:
    """`pier`: a local `pier run` through the resident when one answers."""
    argv = sys.argv[1:]
    if argv[:1] == ["run"] and "--remote" not in argv and enabled():
        from pier import resident

        path = resident.socket_path()  # names this pier's source: a walk of its files, once
        code = resident.hand_over(argv, path)
        if code is not None:
            sys.exit(code)
        if path is not None:
            import atexit

            atexit.register(
                resident.start_resident, path
            )  # once this run is done: its imports would slow this one
    from pier.cli import main as cli_main

    cli_main()


def enabled() -> bool:
    """PIER_RESIDENT when set; unset, on except in a CI job."""
    value = os.environ.get("PIER_RESIDENT", "").strip().lower()
    if value:
        return value not in OFF
    return not any(os.environ.get(name, "").strip().lower() not in ("", *OFF) for name in CI_VARIABLES)


if __name__ == "__main__":
    main()
