"""In-memory action agent ``weather-agent``: current weather from the keyless Open-Meteo API.

Run it next to a master (``scripts/run.sh`` does)::

    PYTHONPATH=. python sample_agents/action_weather.py

It connects to ``MASTER_WS`` (default ``ws://127.0.0.1:8000/ws``), registers the tool
``get_weather`` and answers ``tool_call`` frames until stopped. The endpoints can be pointed
elsewhere with ``WEATHER_GEOCODING_URL`` and ``WEATHER_FORECAST_URL`` (read at call time).
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from openagent import OrchestratorActionAgent, ToolError, ToolHandler, ToolSchema, run_action_agent

AGENT_ID = "weather-agent"
DEFAULT_GEOCODING_URL = "https://geocoding-api.open-meteo.com/v1/search"
DEFAULT_FORECAST_URL = "https://api.open-meteo.com/v1/forecast"
REQUEST_TIMEOUT = 5.0
"""Seconds per HTTP request to Open-Meteo."""

GET_WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather (temperature, humidity, wind, conditions) for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
        "required": ["city"],
    },
)

WMO_CODES: dict[int, str] = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "moderate drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "moderate rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snowfall",
    73: "moderate snowfall",
    75: "heavy snowfall",
    77: "snow grains",
    80: "slight rain showers",
    81: "moderate rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}
"""WMO weather interpretation codes, as used by Open-Meteo's ``weather_code``."""


def describe_weather_code(code: Any) -> str:
    """Words for a WMO weather code (``unknown (code N)`` for codes outside the table)."""
    if isinstance(code, int | float) and int(code) in WMO_CODES:
        return WMO_CODES[int(code)]
    return f"unknown (code {code})"


async def _get_json(client: httpx.AsyncClient, url: str, params: dict[str, Any], what: str) -> Any:
    try:
        response = await client.get(url, params=params, timeout=REQUEST_TIMEOUT)
        response.raise_for_status()
    except httpx.TimeoutException as exc:
        raise ToolError(f"weather service unreachable: {what} timed out after {REQUEST_TIMEOUT:g} s") from exc
    except httpx.HTTPStatusError as exc:
        raise ToolError(
            f"weather service unreachable: {what} answered HTTP {exc.response.status_code}"
        ) from exc
    except httpx.HTTPError as exc:
        raise ToolError(f"weather service unreachable: {what} failed ({type(exc).__name__}: {exc})") from exc
    try:
        return response.json()
    except ValueError as exc:
        raise ToolError(f"weather service unreachable: {what} returned invalid JSON") from exc


async def lookup_weather(client: httpx.AsyncClient, city: str) -> dict[str, Any]:
    """Look up the current weather of ``city``: geocode it, then fetch the forecast.

    Raises :class:`openagent.ToolError` for an unknown city (``unknown city 'X'``) and for a
    network failure, timeout or bad status (``weather service unreachable: ...``).
    """
    geocoding_url = os.environ.get("WEATHER_GEOCODING_URL") or DEFAULT_GEOCODING_URL
    forecast_url = os.environ.get("WEATHER_FORECAST_URL") or DEFAULT_FORECAST_URL

    found = await _get_json(client, geocoding_url, {"name": city, "count": 1}, "geocoding")
    results = found.get("results") if isinstance(found, dict) else None
    if not results:
        raise ToolError(f"unknown city {city!r}")
    place = results[0]
    try:
        latitude = float(place["latitude"])
        longitude = float(place["longitude"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(
            f"weather service unreachable: geocoding returned no coordinates for {city!r}"
        ) from exc

    forecast = await _get_json(
        client,
        forecast_url,
        {
            "latitude": latitude,
            "longitude": longitude,
            "current": "temperature_2m,relative_humidity_2m,wind_speed_10m,weather_code",
        },
        "forecast",
    )
    current = forecast.get("current") if isinstance(forecast, dict) else None
    if not isinstance(current, dict):
        raise ToolError(f"weather service unreachable: forecast returned no current weather for {city!r}")
    return {
        "city": place.get("name", city),
        "country": place.get("country"),
        "latitude": latitude,
        "longitude": longitude,
        "temperature_c": current.get("temperature_2m"),
        "humidity_pct": current.get("relative_humidity_2m"),
        "wind_speed_kmh": current.get("wind_speed_10m"),
        "conditions": describe_weather_code(current.get("weather_code")),
        "source": "open-meteo.com",
    }


def make_handler(transport: httpx.AsyncBaseTransport | None = None) -> ToolHandler:
    """The agent's tool handler; ``transport`` lets tests replace the network."""

    async def handle_tool(
        tool_name: str, arguments: dict[str, Any], *, progress_callback: Any = None
    ) -> dict[str, Any]:
        if tool_name != GET_WEATHER.name:
            raise ToolError(f"unknown tool {tool_name!r}; {AGENT_ID} offers {GET_WEATHER.name!r}")
        city = arguments.get("city")
        if not isinstance(city, str) or not city.strip():
            raise ToolError(f"argument 'city' must be a non-empty string, got {city!r}")
        if progress_callback is not None:
            await progress_callback(f"looking up the weather in {city.strip()}", 0.1)
        async with httpx.AsyncClient(transport=transport) as client:
            return await lookup_weather(client, city.strip())

    return handle_tool


def build_agent(transport: httpx.AsyncBaseTransport | None = None) -> OrchestratorActionAgent:
    """The ``weather-agent`` with its ``get_weather`` tool."""
    return OrchestratorActionAgent(AGENT_ID, [GET_WEATHER], make_handler(transport))


if __name__ == "__main__":
    run_action_agent(build_agent())
