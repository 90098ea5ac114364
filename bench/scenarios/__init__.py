"""The scenarios of each benchmark script, one package per script, one module per scenario."""
