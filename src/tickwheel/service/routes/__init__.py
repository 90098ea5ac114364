"""The API's routes by resource: timers, dead letters, and the operator's stats, health, metrics."""
