"""Defect 16: the OpenAPI document describes every response, and what it declares valid is valid."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema_rs
import pytest
from fastapi.routing import iter_route_contexts

from master.app import create_app
from master.deps import needs_api_key
from master.observability.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from master.settings import Settings
from protocol import ErrorCode

KEY = "openapi-test-key"


@pytest.fixture(scope="module")
def app() -> Any:
    return create_app(Settings(openagent_api_key=KEY))


@pytest.fixture(scope="module")
def document(app: Any) -> dict[str, Any]:
    return dict(app.openapi())


def _valid(document: dict[str, Any], component: str, instance: Any) -> bool:
    schema = {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
    return bool(jsonschema_rs.validator_for(schema).is_valid(instance))


def _request_schema(document: dict[str, Any], path: str) -> str:
    ref = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return str(ref.rsplit("/", 1)[1])


def test_every_operation_documents_the_shared_error_responses(app: Any, document: dict[str, Any]) -> None:
    """Walks the route table: 401 where the key is needed; 400, 413 and 422 where a body is taken."""
    checked = 0
    for route in iter_route_contexts(app.routes):
        path = getattr(route, "path_format", None) or route.path
        for method in route.methods or ():
            operation = document["paths"].get(path, {}).get(method.lower())
            if operation is None:
                continue
            responses = operation["responses"]
            if needs_api_key(route):
                assert "401" in responses, (method, path)
            if "requestBody" in operation:
                assert {"400", "413", "422"} <= responses.keys(), (method, path)
            for status, response in responses.items():
                if status.startswith(("4", "5")):
                    assert response.get("content", {}).get("application/json", {}).get("schema"), (
                        method,
                        path,
                        status,
                    )
            checked += 1
    assert checked >= 10


def test_domain_errors_of_the_hardened_routes_are_documented(document: dict[str, Any]) -> None:
    paths = document["paths"]
    assert {"404", "410"} <= paths["/tool_callback"]["post"]["responses"].keys()
    assert "404" in paths["/tool_progress"]["post"]["responses"]
    assert "404" in paths["/tool_progress/{call_id}"]["get"]["responses"]
    assert {"409", "503"} <= paths["/register"]["post"]["responses"].keys()
    assert {"404", "503"} <= paths["/unregister"]["post"]["responses"].keys()
    assert "404" in paths["/internal/collaborations/{collab_session_id}"]["get"]["responses"]
    assert {"403", "429", "503"} <= paths["/query"]["post"]["responses"].keys()
    assert "503" in paths["/ready"]["get"]["responses"]
    sse = paths["/query"]["post"]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} <= sse.keys()


def test_requests_the_master_refuses_are_invalid_in_the_schema(document: dict[str, Any]) -> None:
    collab = _request_schema(document, "/internal/collaborations")
    assert _valid(document, collab, {"agents": ["a", "b"], "task": "agree"})
    assert not _valid(document, collab, {"agents": [], "task": "0"})
    assert not _valid(document, collab, {"agents": ["a", "a"], "task": "0"})
    assert not _valid(document, collab, {"agents": ["a", "b"], "task": "   "})

    query = _request_schema(document, "/query")
    assert _valid(document, query, {"query": "hi", "orchestrator_model": "gpt-4o-mini"})
    assert not _valid(document, query, {"query": "hi", "orchestrator_model": ""})

    register = _request_schema(document, "/register")
    body = {"agent_id": "a", "invocation_base_url": "http://127.0.0.1:9", "tools": [{"name": "t"}]}
    assert _valid(document, register, body)
    assert not _valid(document, register, {**body, "tools": [{"name": "t"}, {"name": "t"}]})
    assert not _valid(document, register, {**body, "invocation_base_url": "http://\u0100@127.0.0.1:1"})
    assert not _valid(document, register, {**body, "invocation_base_url": "http://h:65536"})
    assert not _valid(document, register, {**body, "tools": [{"name": "t", "endpoint": "/\u00a0"}]})


async def test_405_names_every_method_of_the_path(app: Any) -> None:
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://master", headers=headers) as http:
        response = await http.delete("/internal/collaborations")
        assert response.status_code == 405 and response.headers["allow"] == "GET, POST"
        response = await http.put("/query")
        assert response.status_code == 405 and response.headers["allow"] == "POST"


def test_a_plan_execution_without_its_session_is_invalid_in_the_schema(document: dict[str, Any]) -> None:
    """Found by ``make fuzz``: ``auto_plan_execute`` without ``session_id`` was schema-valid but refused."""
    query = _request_schema(document, "/query")
    plan = {"plan_id": "p1"}
    assert not _valid(document, query, {"query": "go", "auto_plan_execute": plan})
    assert not _valid(document, query, {"query": "go", "auto_plan_execute": plan, "session_id": None})
    assert _valid(document, query, {"query": "go", "auto_plan_execute": plan, "session_id": "s1"})
    assert _valid(document, query, {"query": "go", "auto_plan_execute": None})


def test_a_body_parse_error_fits_the_declared_400(document: dict[str, Any]) -> None:
    """Found by ``make fuzz``: /query declares QueryResponse for 400, but an unparseable body gets
    ``{"detail": ...}``; both are declared."""
    schema = document["paths"]["/query"]["post"]["responses"]["400"]["content"]["application/json"]["schema"]
    validator = jsonschema_rs.validator_for({**schema, "components": document["components"]})
    assert validator.is_valid({"detail": "There was an error parsing the body", "error_code": "invalid_body"})
    assert validator.is_valid(
        {"query_id": "q", "success": False, "error": "x", "error_code": "invalid_model"}
    )


NOT_JSON = {
    ("GET", "/metrics"): METRICS_CONTENT_TYPE,
    ("GET", "/internal/workspace/export"): "application/yaml",
    ("GET", "/attachments/{ref}"): "application/octet-stream",
    ("POST", "/ag-ui"): "text/event-stream",
}
"""The operations whose 2xx answer is not JSON: Prometheus text, a file download, a blob, AG-UI's
events (the AG-UI protocol's, documented in its spec)."""
STREAMS = {
    ("POST", "/query"): "text/event-stream",
    ("POST", "/v1/chat/completions"): "text/event-stream",
    ("POST", "/v1/responses"): "text/event-stream",
}
"""Server-Sent Events beside a JSON answer: the events are documented in the protocol docs."""


def _free_form(schema: dict[str, Any]) -> bool:
    return not schema or (schema.get("type") == "object" and not schema.get("properties"))


def test_every_2xx_response_has_a_schema(document: dict[str, Any]) -> None:
    """Walks the document: every operation's success answer has a schema that says something."""
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            key = (method.upper(), path)
            successes = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
            assert successes, key
            for status, response in successes.items():
                content = response.get("content") or {}
                if key in NOT_JSON:
                    assert set(content) == {NOT_JSON[key]}, key
                    assert content[NOT_JSON[key]]["schema"]["type"] == "string", key
                    continue
                schema = content["application/json"]["schema"]
                assert "$ref" in schema and not _free_form(schema), (key, status, schema)
                target = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
                assert target.get("properties"), (key, status, "a model without fields")
                assert set(content) - {"application/json"} <= {STREAMS.get(key)}, key
            checked += 1
    assert checked >= 35


def test_error_codes_are_published_and_every_error_body_carries_one(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert set(schemas["ErrorCode"]["enum"]) == {code.value for code in ErrorCode}
    ref = {"$ref": "#/components/schemas/ErrorCode"}
    assert ref in schemas["QueryResponse"]["properties"]["error_code"]["anyOf"]
    assert schemas["ErrorBody"]["properties"]["error_code"]["$ref"] == ref["$ref"]
    assert schemas["ErrorBody"]["required"] == ["detail", "error_code"]
    assert schemas["HTTPValidationError"]["properties"]["error_code"] == ref
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")) and (method, path) != ("get", "/ready"):
                    schema = response["content"]["application/json"]["schema"]
                    refs = [schema.get("$ref")] + [s.get("$ref") for s in schema.get("anyOf", [])]
                    names = {r.rsplit("/", 1)[1] for r in refs if r}
                    assert names and all("error_code" in schemas[n]["properties"] for n in names), (
                        method,
                        path,
                        status,
                    )
