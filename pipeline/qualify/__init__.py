"""Qualification of games: the checks (checks.py), the recordings they replay, the report and publishing; and of
generated static tasks: ARC-TGI witness checks (witnesses.py, witness_child.py in the sandbox)."""
