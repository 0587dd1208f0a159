"""Maintaining views from captured changes: the one road every driver takes.

- :mod:`.checkpoint`  checkpoints of a view's input rows that are safe to read back (typed JSON)
"""
