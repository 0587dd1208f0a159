"""A ``StreamingQueryListener`` feeding the daemon's status file (and so ``--status`` and the
metrics endpoint) with Spark's own progress reports.

Spark posts a ``QueryProgressEvent`` per micro-batch once it committed the batch (its commit
log written); PySpark hands it to this listener on its callback thread. The status file's
``"progress"`` is then Spark's progress report, in Spark's names: ``batchId``,
``numInputRows``, ``inputRowsPerSecond``, ``processedRowsPerSecond``, ``durationMs``
(``addBatch`` — the ``foreachBatch`` function —, ``latestOffset``, ``queryPlanning``,
``walCommit``, ``commitOffsets``, ``triggerExecution`` …), ``sources`` (start/end offsets:
LSNs) and ``sink``; ``"spark_committed_batch"`` is its batch id. O(1) per batch.
"""

from __future__ import annotations

import json
import logging

from pyspark.sql.streaming import StreamingQueryListener

from .status import StatusFile

log = logging.getLogger("ivm.daemon")

#: the keys of Spark's progress JSON kept in the status file (``stateOperators`` is empty: the
#: daemon runs no stateful operator; ``observedMetrics`` unused)
KEPT = ("id", "runId", "name", "timestamp", "batchId", "batchDuration", "numInputRows",
        "inputRowsPerSecond", "processedRowsPerSecond", "durationMs", "sources", "sink")


class ProgressListener(StreamingQueryListener):
    def __init__(self, status: StatusFile):
        super().__init__()
        self.status = status

    def onQueryStarted(self, event) -> None:
        self.status.set(spark_query_id=str(event.id), spark_run_id=str(event.runId))

    def onQueryProgress(self, event) -> None:
        try:
            raw = json.loads(event.progress.json)
        except Exception as e:  # noqa: BLE001 - a progress report must never stop the daemon
            log.info("unreadable Spark progress report: %s", e)
            return
        progress = {k: raw[k] for k in KEPT if k in raw}
        self.status.progress(progress)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass
