"""Who may do what over the API: bearer tokens, the admin token, and a
collection token's scope. A small app with one route per dependency, on a real
SQLite store, called through HTTP (no server process, no Docker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from pier.api import errors
from pier.api.auth import AdminDep, CallerDep, CollectionDep
from pier.db import Store
from pier.server.tokens import KnownTokens, hash_token, issue_token, new_token

ADMIN = "admin-" + "a" * 40


class CountingStore:
    """The real store, counting token look-ups."""

    def __init__(self, store: Store):
        self._store = store
        self.lookups = 0

    def collection_for_token_hash(self, token_hash: str) -> str | None:
        self.lookups += 1
        return self._store.collection_for_token_hash(token_hash)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


def make_app(store: CountingStore, admin_token: str | None) -> FastAPI:
    app = FastAPI()
    errors.install(app)
    secret = SecretStr(admin_token) if admin_token is not None else None
    app.state.pier = SimpleNamespace(
        settings=SimpleNamespace(admin_token=secret), tokens=KnownTokens(), store=store
    )

    @app.get("/whoami")
    def whoami(caller: CallerDep) -> dict:
        return {"collection": caller.collection, "admin": caller.admin}

    @app.get("/admin")
    def admin_only(caller: AdminDep) -> dict:
        return {"admin": caller.admin}

    @app.get("/c/{collection}")
    def in_collection(collection: CollectionDep) -> dict:
        return {"collection": collection}

    return app


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    with Store.open(f"sqlite:///{tmp_path / 'pier.db'}") as opened:
        opened.create_collection("alpha")
        opened.create_collection("beta")
        yield CountingStore(opened)


@pytest.fixture
def client(store: CountingStore) -> TestClient:
    return TestClient(make_app(store, ADMIN))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer "}, {"Authorization": "Bearer"}],
)
def test_no_bearer_token_is_401_saying_how_to_send_one(client: TestClient, headers: dict):
    r = client.get("/whoami", headers=headers)
    assert r.status_code == 401
    assert r.json()["detail"] == "missing bearer token: send `Authorization: Bearer <token>`"
    assert r.headers["WWW-Authenticate"] == "Bearer"


def test_the_admin_token_is_the_admin_and_a_near_miss_is_not(client: TestClient):
    assert client.get("/whoami", headers=bearer(ADMIN)).json() == {"collection": None, "admin": True}
    assert client.get("/admin", headers=bearer(ADMIN)).json() == {"admin": True}
    for near in (ADMIN[:-1] + "b", ADMIN + "a", ADMIN[:-1], ADMIN.upper()):
        r = client.get("/whoami", headers=bearer(near))
        assert r.status_code == 401 and r.json()["detail"].startswith("unknown bearer token"), near


def test_without_an_admin_token_configured_nothing_is_admin(store: CountingStore):
    client = TestClient(make_app(store, None))
    assert client.get("/whoami", headers=bearer(ADMIN)).status_code == 401
    assert client.get("/whoami", headers=bearer("")).status_code == 401


def test_a_collection_token_grants_its_collection_only(client: TestClient, store: CountingStore):
    token = issue_token(store._store, "alpha")
    assert client.get("/whoami", headers=bearer(token)).json() == {"collection": "alpha", "admin": False}
    assert client.get("/c/alpha", headers=bearer(token)).json() == {"collection": "alpha"}
    other = client.get("/c/beta", headers=bearer(token))
    assert other.status_code == 403
    assert other.json()["detail"] == (
        "this token does not grant collection 'beta': use a token of that collection"
    )
    admin_only = client.get("/admin", headers=bearer(token))
    assert admin_only.status_code == 403
    assert admin_only.json()["detail"] == "this needs the admin token (PIER_ADMIN_TOKEN)"


def test_the_admin_may_use_any_existing_collection_and_gets_404_for_others(client: TestClient):
    assert client.get("/c/beta", headers=bearer(ADMIN)).json() == {"collection": "beta"}
    missing = client.get("/c/gamma", headers=bearer(ADMIN))
    assert missing.status_code == 404 and "gamma" in missing.json()["detail"]


def test_an_unknown_token_is_401_and_a_known_one_is_looked_up_once(client: TestClient, store: CountingStore):
    r = client.get("/whoami", headers=bearer(new_token()))
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert r.json()["detail"] == (
        "unknown bearer token: use a token from `pier collection create` (or a new one from the admin)"
    )
    token = issue_token(store._store, "beta")
    store.lookups = 0
    for _ in range(3):
        assert client.get("/c/beta", headers=bearer(token)).status_code == 200
    assert store.lookups == 1, "a token seen valid is remembered"


def test_tokens_are_random_prefixed_and_stored_only_as_their_sha256(store: CountingStore):
    token = issue_token(store._store, "alpha", label="ci")
    assert token.startswith("pier_") and len(token) == len("pier_") + 43  # 32 random bytes, base64url
    assert token != issue_token(store._store, "alpha")
    assert len(hash_token(token)) == 64 and hash_token(token) != hash_token(token + "x")
    assert store._store.collection_for_token_hash(hash_token(token)) == "alpha"
    assert store._store.collection_for_token_hash(token) is None, "the token itself is not a key"


def test_known_tokens_remember_up_to_their_size_then_start_over():
    known = KnownTokens(size=2)
    known.add("h1", "alpha")
    known.add("h2", "beta")
    assert (known.get("h1"), known.get("h2"), known.get("h3")) == ("alpha", "beta", None)
    known.add("h2", "beta")  # full: starts over, keeping the newest
    assert known.get("h1") is None and known.get("h2") == "beta"


def test_a_token_revoked_through_one_replica_is_refused_by_another_within_its_memory(store: CountingStore):
    """Two `pier serve` replicas on one database (docs/fleet.md), each with
    its own memory of tokens seen valid. Mallory's token is revoked through
    replica A; replica B, which had just served her, must stop honouring it
    within KnownTokens' memory (REMEMBER_SEC), not for as long as it runs. On
    the code before, B remembered the token for ever."""
    clock = [1000.0]
    replica_a, replica_b = make_app(store, ADMIN), make_app(store, ADMIN)
    for replica in (replica_a, replica_b):
        replica.state.pier.tokens = KnownTokens(clock=lambda: clock[0])
    a, b = TestClient(replica_a), TestClient(replica_b)
    token = issue_token(store._store, "alpha", label="mallory")
    assert a.get("/c/alpha", headers=bearer(token)).status_code == 200
    assert b.get("/c/alpha", headers=bearer(token)).status_code == 200
    [stored] = [t for t in store._store.list_tokens("alpha") if t.label == "mallory"]
    store._store.revoke_token("alpha", stored.id)  # through replica A: A forgets at once, B cannot know
    replica_a.state.pier.tokens.forget(hash_token(token))
    assert a.get("/c/alpha", headers=bearer(token)).status_code == 401
    clock[0] += KnownTokens.REMEMBER_SEC / 2  # inside B's memory: still honoured, and used again
    assert b.get("/c/alpha", headers=bearer(token)).status_code == 200
    clock[0] += KnownTokens.REMEMBER_SEC / 2 + 0.1  # past it, counted from B's look-up, not from the last use
    assert b.get("/c/alpha", headers=bearer(token)).status_code == 401, (
        "replica B still honours a revoked token"
    )
    store.lookups = 0
    fresh = issue_token(store._store, "alpha")
    for _ in range(3):
        assert b.get("/c/alpha", headers=bearer(fresh)).status_code == 200
    assert store.lookups == 1, "within its memory a valid token is still looked up once"
