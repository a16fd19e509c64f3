# ruff: noqa: B018  (each line is an attribute read on purpose)
"""Names in src/pier that something outside Python's sight calls, for vulture
(tests/unit/test_dead_code.py reads this file; nothing imports it): each line
uses one name, so vulture counts it as used.

A new entry says who calls the name; a name nobody calls is dead code to remove."""

_ = object()

_.on_broken_pipe  # rich's Console calls it when stdout's reader goes away (cli/console.py)
_.connect_unix_socket  # httpcore's network backend interface (gateway/connect.py)
_.writable  # io.RawIOBase's interface, read by the zip writer (storage/archive.py)
_.rated_backend  # named as a string in pier.sandbox._BUILTIN ("fake-rated")
_.downgrade  # alembic calls each migration's downgrade()
_.load_dialect_impl  # SQLAlchemy's TypeDecorator interface (db/types.py)
_.process_bind_param
_.process_result_value
