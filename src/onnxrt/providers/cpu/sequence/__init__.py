"""Sequence and optional ops. Sequences are Python lists of arrays; an empty optional is None."""
