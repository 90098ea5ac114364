"""Hostile input and hostile peers: each test keeps one hardening promise true."""
