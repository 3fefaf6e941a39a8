"""The gateways: long-lived connections that enter the master from outside, above the query layer.

- :mod:`~master.gateway.hub`: the WebSocket hub at ``/ws``. It registers agents, relays their
  collaborations and admits the queries that query agents send over the socket.
- :mod:`~master.gateway.connection`: one connection of the hub, and how a frame that fails to
  parse is answered.
"""
