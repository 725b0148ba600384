"""Schema-driven fuzzing: requests generated from the server's own OpenAPI schema (valid and
schema-violating) never get a 5xx answer from a live server (schemathesis + hypothesis)."""

from __future__ import annotations

import collections
import tempfile

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SI = '{"numbers": [14, 14], "positions": [[0, 0, 0], [1.36, 1.36, 1.36]], "cell": [[0, 2.72, 2.72], [2.72, 0, 2.72], [2.72, 2.72, 0]], "pbc": true}'
_XYZ = 'Lattice="0 2.72 2.72 2.72 0 2.72 2.72 2.72 0" Properties=species:S:1:pos:R:3 pbc="T T T"'
_LINES = [_SI, '{"numbers": [14], "positions": [[0, 0]]}', '{"symbols": ["Xx"], "positions": [[0, 0, 0]]}', "{}", "not json", "[1, 2]"]
_FRAMES = [f"2\n{_XYZ}\nSi 0 0 0\nSi 1.36 1.36 1.36\n", "2\n\nSi 0 0 0\n", "x\ny\n", "1\n\nSi nan 0 0\n"]
# job uploads: mixtures of valid and broken lines/frames, or arbitrary bytes
schemathesis.openapi.media_type(
    "application/x-ndjson",
    st.one_of(st.binary(max_size=300), st.lists(st.sampled_from(_LINES), max_size=6).map(lambda lines: "\n".join(lines).encode())),
)
schemathesis.openapi.media_type(
    "chemical/x-extxyz",
    st.one_of(st.binary(max_size=300), st.lists(st.sampled_from(_FRAMES), max_size=4).map(lambda frames: "".join(frames).encode())),
)

from server.config import Settings  # noqa: E402
from server.main import create_app  # noqa: E402

from .live import threaded_server  # noqa: E402


@pytest.fixture(scope="module")
def live_url():
    app = create_app(
        Settings(models=["default"], data_dir=tempfile.mkdtemp(prefix="atomistic-fuzz-"), max_structures_per_request=8, max_atoms_per_structure=64)
    )
    with threaded_server(app) as url:
        yield url


def test_no_server_errors(live_url):
    """Every operation of the schema, 30 generated requests each."""
    schema = schemathesis.openapi.from_url(f"{live_url}/openapi.json")
    codes: collections.Counter = collections.Counter()

    def fuzz(operation) -> None:
        @given(case=operation.as_strategy())
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def no_5xx(case):
            response = case.call(base_url=live_url)
            codes[(operation.method.upper(), operation.path, response.status_code // 100)] += 1
            assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"

        no_5xx()

    for result in schema.get_all_operations():
        fuzz(result.ok())
    operations = {(method, path) for method, path, _ in codes}
    assert {("POST", "/v1/predict"), ("POST", "/v1/jobs"), ("GET", "/v1/jobs/{job_id}/results"), ("GET", "/v1/models")} <= operations
    assert sum(codes.values()) >= 100  # requests were really sent
