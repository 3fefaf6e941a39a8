"""The HTTP and WebSocket routes, one module per resource: the master's doors.

Each module declares an ``APIRouter`` that :func:`master.app.create_app` includes; a route reads
the long-lived objects through :mod:`master.deps` and translates between HTTP and one call
below (the query service, the agent directory, the builder...). HTTP errors are raised here only.
"""
