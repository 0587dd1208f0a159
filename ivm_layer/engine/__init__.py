"""The incremental engine: (T, N)-representations maintained under updates (paper 000 §4–§5)."""
