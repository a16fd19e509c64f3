"""schemathesis over the OpenAPI schema, from where each caller stands: no
token, a collection's token, the admin's; generated bodies as they come, and
made deep (past PIER_MAX_JSON_DEPTH, and near Python's recursion limit) or
large (past PIER_MAX_JSON_BYTES). Whatever arrives, the server never answers 5xx.
(schemathesis' pytest plugin does not run on this pytest, so hypothesis drives
its strategies directly, as in tests/integration/api/test_api_fuzz.py.)"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from tests.support.api_server import ADMIN_TOKEN, Server, make_collection

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("PIER_FUZZ_EXAMPLES", "12"))


def deep(levels: int) -> Callable[[Any], Any]:
    def wrap(body: Any) -> Any:
        for _ in range(levels):
            body = {"init_params": body} if levels % 2 else [body]
        return body

    return wrap


def large(body: Any) -> Any:
    return {"pad": "x" * (1 << 20) + "y", "body": body}


BODIES = st.sampled_from([lambda body: body, lambda body: body, deep(65), deep(300), deep(900), large])


@pytest.mark.parametrize("caller", ["anonymous", "collection", "admin"])
def test_no_input_gives_a_server_error(server: Server, caller: str):
    collection = make_collection(server, "pier-fake:latest", prefix="fuzz")
    collection.put_task("fuzz", "echo hi")
    token = {"anonymous": None, "collection": collection.token, "admin": ADMIN_TOKEN}[caller]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    errors: list[str] = []
    for operation in operations:
        strategy = st.tuples(
            st.one_of(
                operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE)
            ),
            BODIES,
        )

        @given(drawn=strategy)
        @settings(
            max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def no_5xx(drawn) -> None:
            case, reshape = drawn
            if case.path_parameters and "collection" in case.path_parameters:
                case.path_parameters["collection"] = collection.name
            if isinstance(case.body, (dict, list)):
                case.body = reshape(case.body)
            response = case.call(base_url=server.url, headers=headers, timeout=60)
            if response.status_code >= 500:
                errors.append(f"{case.operation.label}: {response.status_code} {response.text[:200]}")
            case.validate_response(response, checks=[not_a_server_error])

        no_5xx()
    assert not errors, errors[:5]
