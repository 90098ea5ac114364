"""The scenarios of bench/limits.py: a limited callback's CPU, and the limiter's accuracy."""
