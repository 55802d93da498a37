"""Qualification of games: the checks (checks.py), the recordings they replay, the report and publishing."""
