"""The timer service: HTTP API, worker wiring, receiver."""
