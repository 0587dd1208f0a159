"""Connectors: change capture from the backing databases into GMR deltas for the engine."""
