"""Every operation of the OpenAPI spec, fed generated input with a valid key: no request gets a 5xx.

The examples are bounded (``MAX_EXAMPLES`` per operation) so the suite stays fast; the generated requests come
from a user of their own, so they never show up in other tests' listings. Each operation's cases are drawn from
schemathesis' Hypothesis strategy directly (its pytest plugin does not run on this pytest).
"""

from __future__ import annotations

import os
import uuid

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

MAX_EXAMPLES = 15
# The same examples on every CI run, so a red build names a change, not a lucky draw; AGENTSEARCH_FUZZ_RANDOM=1
# draws new ones (how the NUL-character and offset-overflow 500s were found).
DERANDOMIZE = os.environ.get("AGENTSEARCH_FUZZ_RANDOM") != "1"


def test_no_operation_answers_5xx(stack):
    key = stack.create_user(f"fuzz-{uuid.uuid4().hex[:6]}")
    schema = schemathesis.openapi.from_url(f"{stack.api_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12, [op.label for op in operations]
    called: dict[str, int] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=DERANDOMIZE,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
        def run(case) -> None:
            # Called within this iteration: the operation is the one the loop is on.
            case.call_and_validate(headers={"Authorization": f"Bearer {key}"}, checks=[not_a_server_error], timeout=90)
            called[operation.label] = called.get(operation.label, 0) + 1  # noqa: B023

        run()
    assert set(called) == {op.label for op in operations}
