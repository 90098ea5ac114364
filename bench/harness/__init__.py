"""What every benchmark script shares: tables, the machine and its load, a private redis-server."""
