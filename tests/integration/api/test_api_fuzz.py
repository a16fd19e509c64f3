"""A fuzz pass over the OpenAPI schema against the live server: whatever
schemathesis generates, valid or not, the server never answers 5xx.

Path parameters named `collection` point at a real collection with a task,
so requests get past the 404 and reach the code behind it. (schemathesis'
pytest plugin does not run on this pytest, so hypothesis drives its
strategies directly.)"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from tests.support.api_server import ADMIN_TOKEN, Collection

pytestmark = pytest.mark.integration

EXAMPLES_PER_ROUTE = int(os.environ.get("PIER_FUZZ_EXAMPLES", "30"))
# Routes whose path the fuzz makes real but whose 2xx random data cannot reach.
NO_2XX_FROM_RANDOM_DATA = {
    "POST /api/v1/tasks/{collection}": "needs a runnable workflow",
    "POST /api/v1/sandbox/upload": "needs multipart files",
    "POST /api/v1/files": "needs one multipart file",
    "GET /api/v1/files": "the admin token must name an existing collection (?collection=)",
    "POST /v1/chat/completions": "runbook mode needs a runbook; passthrough, a provider key (the admin token names no collection)",
    "POST /api/v1/trial/{collection}/activate": "the test server has no trial keys",
    "POST /api/v1/experiments/{collection}": "needs a stored task and a matrix of known agents",
}


def test_no_server_errors(server, collection: Collection):
    collection.put_task("fuzz", "echo hi > {{results_dir}}/x")
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    statuses: dict[str, list[int]] = {}
    for operation in operations:
        strategy = st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE)
        )

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES_PER_ROUTE, deadline=None, database=None,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        def no_5xx(case) -> None:
            if case.path_parameters and "collection" in case.path_parameters:
                case.path_parameters["collection"] = collection.name
            response = case.call(base_url=server.url, headers=headers, timeout=60)
            statuses.setdefault(case.operation.label, []).append(response.status_code)
            case.validate_response(response, checks=[not_a_server_error])

        no_5xx()
    assert set(statuses) == {operation.label for operation in operations}, "every route was called"
    # A fuzz that never gets past validation tests little: every route whose path the
    # fuzz makes real (no parameter, or only {collection}) answers 2xx to some case.
    reachable = [
        op.label
        for op in operations
        if {p.name for p in op.path_parameters.items} <= {"collection"}
        and op.label not in NO_2XX_FROM_RANDOM_DATA
    ]
    missed = {
        label: sorted(set(statuses[label]))
        for label in reachable
        if not any(200 <= c < 300 for c in statuses[label])
    }
    assert len(reachable) >= 10 and not missed, missed
