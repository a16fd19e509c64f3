"""A fleet run's fairness key is its collection (Temporal's bound: 64 bytes)."""

from __future__ import annotations

from types import SimpleNamespace

from temporalio.common import Priority

from pier.executors.base import Job
from pier.executors.temporal import FAIRNESS_KEY_BYTES, fair_share


def test_a_runs_fairness_key_is_its_collection():
    assert fair_share(Job("t1", SimpleNamespace(collection="team-a"))).fairness_key == "team-a"


def test_a_long_collection_name_gets_a_key_within_temporals_bound_and_distinct():
    long_a, long_b = "a" * 200, "a" * 199 + "b"
    key_a = fair_share(Job("t1", SimpleNamespace(collection=long_a))).fairness_key
    key_b = fair_share(Job("t2", SimpleNamespace(collection=long_b))).fairness_key
    assert key_a and key_b and key_a != key_b
    assert len(key_a.encode()) <= FAIRNESS_KEY_BYTES and len(key_b.encode()) <= FAIRNESS_KEY_BYTES


def test_a_job_without_a_collection_is_first_come_first_served():
    assert fair_share(Job("t1", None)) == Priority.default
