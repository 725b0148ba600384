"""Explicit, one-time conversion of third-party checkpoints into atomistic checkpoints."""
