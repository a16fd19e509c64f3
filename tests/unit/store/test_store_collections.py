from __future__ import annotations

import pytest

from pier.errors import InputError, NotFoundError
from pier.store import Store


def test_collections_create_get_list(store: Store) -> None:
    assert store.list_collections() == []
    created = store.create_collection("beta")
    assert created.name == "beta"
    assert created.created_at.tzinfo is not None
    assert store.create_collection("beta") == created  # idempotent, keeps created_at
    store.create_collection("alpha")
    assert [c.name for c in store.list_collections()] == ["alpha", "beta"]
    assert store.get_collection("beta") == created


def test_get_missing_collection(store: Store) -> None:
    with pytest.raises(NotFoundError, match="collection 'nope' not found"):
        store.get_collection("nope")


def test_tokens_map_hashes_to_collections(store: Store) -> None:
    store.create_collection("c1")
    store.create_collection("c2")
    first = store.add_token("c1", "hash-1", label="ci")
    second = store.add_token("c2", "hash-2")
    assert first != second
    assert store.add_token("c1", "hash-3") not in (first, second)
    assert store.collection_for_token_hash("hash-1") == "c1"
    assert store.collection_for_token_hash("hash-2") == "c2"
    assert store.collection_for_token_hash("hash-3") == "c1"
    assert store.collection_for_token_hash("unknown") is None


def test_token_needs_its_collection_and_a_unique_hash(store: Store) -> None:
    with pytest.raises(NotFoundError, match="collection 'ghost'"):
        store.add_token("ghost", "h")
    store.create_collection("c1")
    store.add_token("c1", "h")
    with pytest.raises(InputError, match="already registered"):
        store.add_token("c1", "h")


def test_tasks_put_get_list_and_replace(store: Store) -> None:
    definition = {"init_params": {"agent": "script", "vars": {"n": 1}}, "steps": ["run"]}
    first = store.put_task("c1", "summarise", definition)
    assert first.definition == definition
    assert (first.collection, first.name) == ("c1", "summarise")
    store.put_task("c1", "alpha", {"steps": ["run"]})
    store.put_task("c2", "other", {"steps": ["run"]})

    changed = store.put_task("c1", "summarise", {"steps": ["run"], "step_configs": {}})
    assert changed.definition == {"steps": ["run"], "step_configs": {}}
    assert changed.created_at == first.created_at
    assert changed.updated_at >= first.updated_at
    assert store.get_task("c1", "summarise") == changed
    assert [t.name for t in store.list_tasks("c1")] == ["alpha", "summarise"]
    assert store.list_tasks("empty") == []


def test_get_missing_task(store: Store) -> None:
    store.put_task("c1", "t", {})
    with pytest.raises(NotFoundError, match="task 't' not found in collection 'c2'"):
        store.get_task("c2", "t")


def test_environment_set_replace_delete(store: Store) -> None:
    assert store.list_env_names("c1") == []
    assert store.get_env_encrypted("c1") == {}
    store.set_env("c1", "B_KEY", "enc-b")
    store.set_env("c1", "A_KEY", "enc-a")
    store.set_env("c2", "A_KEY", "other")
    store.set_env("c1", "B_KEY", "enc-b2")
    assert store.list_env_names("c1") == ["A_KEY", "B_KEY"]
    assert store.get_env_encrypted("c1") == {"A_KEY": "enc-a", "B_KEY": "enc-b2"}
    assert store.delete_env("c1", "A_KEY") is True
    assert store.delete_env("c1", "A_KEY") is False
    assert store.get_env_encrypted("c1") == {"B_KEY": "enc-b2"}
    assert store.get_env_encrypted("c2") == {"A_KEY": "other"}


def test_task_description_is_kept_unless_given_and_delete_removes_the_task(store: Store) -> None:
    store.create_collection("c")
    store.put_task("c", "t", {"init_params": {}}, description="first")
    assert store.put_task("c", "t", {"init_params": {"a": 1}}).description == "first"
    assert store.put_task("c", "t", {"init_params": {}}, description="second").description == "second"
    store.delete_task("c", "t")
    with pytest.raises(NotFoundError, match="task 't' not found"):
        store.get_task("c", "t")
    with pytest.raises(NotFoundError):
        store.delete_task("c", "t")


def test_trial_runs_are_counted_up_to_the_limit(store: Store) -> None:
    assert store.trial("c") == (None, 0)
    assert [store.take_trial_run("c", 2) for _ in range(3)] == [True, True, False]
    store.activate_trial("c")
    activated, used = store.trial("c")
    store.activate_trial("c")
    assert store.trial("c") == (activated, 2) and activated is not None and used == 2


def test_tokens_are_listed_without_hashes_and_revoked_by_id(store: Store) -> None:
    store.create_collection("a")
    store.create_collection("b")
    first = store.add_token("a", "hash-1", "cli")
    second = store.add_token("a", "hash-2", None)
    other = store.add_token("b", "hash-3")
    listed = store.list_tokens("a")
    assert [(t.id, t.label) for t in listed] == [(first, "cli"), (second, None)]
    assert "hash" not in listed[0].model_dump()
    with pytest.raises(NotFoundError, match=f"no token {other}"):
        store.revoke_token("a", other)  # another collection's token is not found here
    assert store.revoke_token("a", first) == "hash-1"
    assert store.collection_for_token_hash("hash-1") is None
    assert store.collection_for_token_hash("hash-2") == "a"
    with pytest.raises(NotFoundError):
        store.list_tokens("missing")
