"""`python -m pier.cli`: the `pier` command (the tests and benches start it so)."""

from pier.cli import main

main()
