"""Redis: the client, the key names, JSON bytes, and the small caches in front of it."""
