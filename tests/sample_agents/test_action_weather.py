"""sample_agents/action_weather.py: the Open-Meteo lookup, through httpx.MockTransport."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from openagent import ToolError
from sample_agents.action_weather import AGENT_ID, GET_WEATHER, build_agent, lookup_weather, make_handler

GEOCODING_URL = "https://geocoding.test/v1/search"
FORECAST_URL = "https://forecast.test/v1/forecast"

PARIS = {"name": "Paris", "country": "France", "latitude": 48.85341, "longitude": 2.3488}
PARIS_NOW = {
    "latitude": 48.86,
    "longitude": 2.34,
    "current": {
        "time": "2025-05-01T12:00",
        "temperature_2m": 17.4,
        "relative_humidity_2m": 62,
        "wind_speed_10m": 11.2,
        "weather_code": 3,
    },
}


@pytest.fixture(autouse=True)
def _endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEATHER_GEOCODING_URL", GEOCODING_URL)
    monkeypatch.setenv("WEATHER_FORECAST_URL", FORECAST_URL)


def open_meteo(
    places: dict[str, dict[str, Any]], requests: list[httpx.Request] | None = None
) -> Callable[[httpx.Request], httpx.Response]:
    """A fake Open-Meteo: geocodes the given places, reports PARIS_NOW for any coordinates."""

    def handle(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            requests.append(request)
        url = str(request.url.copy_with(query=None))
        if url == GEOCODING_URL:
            place = places.get(request.url.params["name"])
            return httpx.Response(200, json={"results": [place]} if place else {"generationtime_ms": 0.1})
        if url == FORECAST_URL:
            return httpx.Response(200, json=PARIS_NOW)
        return httpx.Response(404, json={"error": True, "reason": f"no route {url}"})

    return handle


async def test_known_city_returns_current_weather_in_words() -> None:
    requests: list[httpx.Request] = []
    transport = httpx.MockTransport(open_meteo({"Paris": PARIS}, requests))
    async with httpx.AsyncClient(transport=transport) as client:
        weather = await lookup_weather(client, "Paris")

    assert weather == {
        "city": "Paris",
        "country": "France",
        "latitude": 48.85341,
        "longitude": 2.3488,
        "temperature_c": 17.4,
        "humidity_pct": 62,
        "wind_speed_kmh": 11.2,
        "conditions": "overcast",
        "source": "open-meteo.com",
    }
    geocoding, forecast = requests
    assert geocoding.url.params["name"] == "Paris"
    assert geocoding.url.params["count"] == "1"
    assert forecast.url.params["latitude"] == "48.85341"
    assert forecast.url.params["longitude"] == "2.3488"
    assert forecast.url.params["current"] == "temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code"


async def test_unknown_weather_code_is_reported_not_crashed() -> None:
    odd = {**PARIS_NOW, "current": {**PARIS_NOW["current"], "weather_code": 42}}

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.host == "geocoding.test":
            return httpx.Response(200, json={"results": [PARIS]})
        return httpx.Response(200, json=odd)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
        weather = await lookup_weather(client, "Paris")
    assert weather["conditions"] == "unknown (code 42)"


async def test_unknown_city_is_a_tool_error_naming_it() -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(open_meteo({}))) as client:
        with pytest.raises(ToolError, match="unknown city 'Atlantis'"):
            await lookup_weather(client, "Atlantis")


async def test_server_error_is_reported_as_unreachable() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(500, text="boom"))
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(ToolError, match=r"^weather service unreachable: geocoding answered HTTP 500"):
            await lookup_weather(client, "Paris")


async def test_forecast_failure_is_reported_as_unreachable() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.host == "geocoding.test":
            return httpx.Response(200, json={"results": [PARIS]})
        return httpx.Response(503)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
        with pytest.raises(ToolError, match=r"^weather service unreachable: forecast answered HTTP 503"):
            await lookup_weather(client, "Paris")


async def test_connect_error_is_reported_as_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(ToolError, match=r"^weather service unreachable: .*Connection refused"):
            await lookup_weather(client, "Paris")


async def test_timeout_is_reported_as_unreachable() -> None:
    def stall(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(stall)) as client:
        with pytest.raises(ToolError, match=r"^weather service unreachable: geocoding timed out after 5 s"):
            await lookup_weather(client, "Paris")


async def test_handler_answers_get_weather() -> None:
    handler = make_handler(httpx.MockTransport(open_meteo({"Paris": PARIS})))
    progress: list[tuple[str, float | None]] = []

    async def record(message: str, fraction: float | None = None) -> None:
        progress.append((message, fraction))

    weather = await handler("get_weather", {"city": " Paris "}, progress_callback=record)
    assert weather["conditions"] == "overcast"
    assert progress == [("looking up the weather in Paris", 0.1)]


@pytest.mark.parametrize(
    ("tool_name", "arguments", "error"),
    [
        ("get_forecast", {"city": "Paris"}, "unknown tool 'get_forecast'"),
        ("get_weather", {}, "argument 'city' must be a non-empty string, got None"),
        ("get_weather", {"city": "  "}, "argument 'city' must be a non-empty string"),
    ],
)
async def test_handler_rejects_bad_calls(tool_name: str, arguments: dict[str, Any], error: str) -> None:
    handler = make_handler(httpx.MockTransport(open_meteo({"Paris": PARIS})))
    with pytest.raises(ToolError, match=error):
        await handler(tool_name, arguments)


def test_agent_offers_get_weather_with_a_required_city() -> None:
    agent = build_agent()
    assert agent.agent_id == AGENT_ID == "weather-agent"
    assert [tool.name for tool in agent.tools] == ["get_weather"]
    assert GET_WEATHER.parameters == {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
        "required": ["city"],
    }
