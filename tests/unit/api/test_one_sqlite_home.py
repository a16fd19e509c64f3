"""A second `pier serve` on the SQLite store another one serves starts with a
warning saying so and what to do; the first says nothing; one on a store of
its own says nothing either."""

from __future__ import annotations

from tests.support.api_server import Server

FAKE = "tests.support.fleet_backend:backend"
WARNING = "already serves the SQLite store"


def test_a_second_server_on_one_sqlite_home_is_warned(tmp_path):
    home, other = tmp_path / "home", tmp_path / "other"
    home.mkdir()
    other.mkdir()
    settings = {"PIER_SANDBOX_BACKEND": FAKE}
    first = Server(home, f"sqlite:///{home / 'pier.db'}", settings=settings).start()
    second = alone = None
    try:
        second = Server(home, f"sqlite:///{home / 'pier.db'}", settings=settings).start()
        alone = Server(other, f"sqlite:///{other / 'pier.db'}", settings=settings).start()
        assert WARNING in second.log_tail(200)
        assert f"pid {first.proc.pid}" in second.log_tail(200)
        assert WARNING not in first.log_tail(200)
        assert WARNING not in alone.log_tail(200)
    finally:
        for server in (alone, second, first):
            if server is not None:
                server.stop()
