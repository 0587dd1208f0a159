"""PostgreSQL: connection targets, logical replication and its decoding, snapshots, binary COPY.

- :mod:`.conninfo`     connection targets the way libpq takes them; what identifies a database
- :mod:`.replication`  publications, slots with exported snapshots, snapshot ``COPY``, the
  replication stream, slot hygiene and lag
- :mod:`.pgoutput`     the sans-I/O decoder of the ``pgoutput`` protocol (bytes → transactions)
- :mod:`.feed`         one reading of a change stream on a background thread, staged by LSN
- :mod:`.snapshot`     catalog, column types and snapshot slices by block range
- :mod:`.bincopy`      PostgreSQL's binary ``COPY`` format, encoded with numpy

Importing this package does not import psycopg; the modules that need it do.
"""
