"""PostgreSQL run-time settings a client reads or sets: ``SET``, ``SHOW``, ``RESET``, ParameterStatus.

Each connection has its own :class:`Settings` (``SET application_name …`` is per client, as in
PostgreSQL). The values a driver checks at connect time (``server_version``,
``client_encoding``, ``DateStyle``, ``standard_conforming_strings``, ``integer_datetimes`` …)
are sent as ParameterStatus after authentication and again when they change. ``SET`` of a
setting this server does not know is passed to DuckDB when DuckDB knows it (``SET threads``),
else it is an error (42704), as in PostgreSQL.
"""

from __future__ import annotations

import re

from .. import __version__
from .sqlstate import ServeError

SERVER_VERSION = "15.0"
SERVER_VERSION_NUM = "150000"
#: the setting (sent as ParameterStatus at startup, answered by SHOW) by which a client such as
#: ``ivm shell`` tells ``ivm serve`` from any other PostgreSQL server; its value is the version
IVM_VERSION = "ivm_version"


def version_string(engine: str) -> str:
    """What ``SELECT version()`` answers (clients parse "PostgreSQL <major>.<minor>")."""
    return f"PostgreSQL {SERVER_VERSION} (ivm-layer {__version__} ivm serve over {engine})"


#: sent as ParameterStatus (name → default), in this order
REPORTED = {
    "server_version": SERVER_VERSION,
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "TimeZone": "UTC",
    "integer_datetimes": "on",
    "standard_conforming_strings": "on",
    "is_superuser": "on",
    "session_authorization": "",
    "application_name": "",
    "default_transaction_read_only": "off",
    "in_hot_standby": "off",
    IVM_VERSION: __version__,          # tells ivm shell (and any client) that this is ivm serve
}

#: other settings SHOW answers (lower-case name → default)
OTHER = {
    "server_version_num": SERVER_VERSION_NUM,
    "search_path": '"$user", public',
    "transaction_isolation": "read committed",
    "default_transaction_isolation": "read committed",
    "transaction_read_only": "off",
    "extra_float_digits": "1",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "bytea_output": "hex",
    "client_min_messages": "notice",
    "max_identifier_length": "63",
    "max_index_keys": "32",
    "block_size": "8192",
    "lc_collate": "C",
    "lc_ctype": "C",
    "lc_messages": "C",
    "lc_monetary": "C",
    "lc_numeric": "C",
    "lc_time": "C",
    "row_security": "on",
    "synchronous_commit": "on",
    "geqo": "on",
    "jit": "off",
    "work_mem": "4MB",
    "timezone_abbreviations": "Default",
    "escape_string_warning": "on",
    "default_with_oids": "off",
    "max_connections": "100",
    "ssl": "off",
    "wal_level": "minimal",
    "ivm.engine": "ivm-layer",
}

_ENCODINGS = {"utf8", "utf-8", "unicode", "sql_ascii"}
_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}


def timeout_ms(value: str) -> float:
    """``statement_timeout`` text (``5000``, ``'5s'``, ``'1min'``) → milliseconds (0: none)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", value.lower())
    if not m or (m.group(2) and m.group(2) not in _UNITS):
        raise ServeError("22023", f'invalid value for parameter "statement_timeout": "{value}"',
                         hint='Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".')
    return float(m.group(1)) * _UNITS.get(m.group(2) or "ms", 1.0)


class Settings:
    """One connection's settings; ``changed`` collects reported settings to re-announce."""

    def __init__(self, user: str, startup: dict[str, str], engine: str):
        self.values: dict[str, str] = {k.lower(): v for k, v in OTHER.items()}
        self.names: dict[str, str] = {k.lower(): k for k in list(REPORTED) + list(OTHER)}
        for k, v in REPORTED.items():
            self.values[k.lower()] = v
        self.values["session_authorization"] = user
        self.values["server_version"] = SERVER_VERSION
        self.engine = engine
        self.changed: list[str] = []
        self.defaults = dict(self.values)
        for k, v in startup.items():
            if k.lower() in ("user", "database", "replication", "options"):
                continue
            self.set(k, v, report=False)
        self.defaults.update({k: self.values[k] for k in self.values})

    def default(self, name: str, value: str) -> None:
        """A server-wide default (``--statement-timeout``): RESET comes back to it."""
        self.values[name.lower()] = value
        self.defaults[name.lower()] = value

    def reported(self) -> list[tuple[str, str]]:
        return [(k, self.values[k.lower()]) for k in REPORTED]

    def knows(self, name: str) -> bool:
        return name.lower() in self.values

    def get(self, name: str) -> str:
        key = name.lower()
        if key == "all":
            raise ServeError("0A000", "SHOW ALL is answered by the caller")
        if key not in self.values:
            raise ServeError("42704", f'unrecognized configuration parameter "{name}"')
        return self.values[key]

    def set(self, name: str, value: str, report: bool = True) -> None:
        key = name.lower()
        if key == "client_encoding" and value.lower().replace("'", "") not in _ENCODINGS:
            raise ServeError("22023", f"ivm serve speaks UTF8 only; client_encoding {value!r} is not supported",
                             hint="connect with client_encoding=UTF8")
        if key == "client_encoding":
            value = "UTF8"
        if key == "timezone" and value.upper() not in ("UTC", "GMT", "ETC/UTC", "Z", "+00", "0", "00:00"):
            raise ServeError("22023", f"ivm serve answers in UTC only; TimeZone {value!r} is not supported")
        if key == "timezone":
            value = "UTC"
        if key == "datestyle" and "iso" not in value.lower():
            raise ServeError("22023", f"ivm serve writes dates in ISO style only; DateStyle {value!r} is not supported")
        if key == "statement_timeout":
            timeout_ms(value)
        if key in ("server_version", IVM_VERSION):
            raise ServeError("55P02", f'parameter "{key}" cannot be changed')
        self.values[key] = value
        self.names.setdefault(key, name)
        if report and self.names[key] in REPORTED:
            self.changed.append(self.names[key])

    def reset(self, name: str) -> None:
        key = name.lower()
        if key == "all":
            for k in list(self.values):
                self.reset(k)
            return
        if key in self.defaults:
            self.set(self.names.get(key, key), self.defaults[key])

    def all(self) -> list[tuple[str, str, str]]:
        """``SHOW ALL``: (name, setting, description)."""
        return [(self.names.get(k, k), v, "") for k, v in sorted(self.values.items())]

    def statement_timeout(self) -> float:
        """Seconds, or 0 for none."""
        return timeout_ms(self.values["statement_timeout"]) / 1000.0
