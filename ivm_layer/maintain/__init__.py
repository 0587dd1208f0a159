"""Maintaining views from captured changes: the one road every driver takes.

- :mod:`.changes`     ``Changes``, the one shape of a batch of row changes
- :mod:`.viewset`     ``ViewSet``: prepare all, commit all, rebuild, undo, log, notify — every driver's road
- :mod:`.checkpoint`  ``CheckpointStore``: snapshot + change log that are safe to read back (typed JSON)
- :mod:`.contracts`   the ``Source`` and ``Sink`` protocols (fault tolerance, idempotent writes)

Above the engine (it drives views through :class:`ivm_layer.View`), below ``io/`` and the
drivers (they hand it their changes).
"""
