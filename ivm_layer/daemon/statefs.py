"""The daemon's own files (engine logs and snapshots, shard states, markers, status) on any
filesystem: a local path, or a URL ``s3://bucket/prefix``, ``gs://…``, ``hdfs://…``,
``abfs://…`` read through :mod:`pyarrow.fs`.

Only what every one of them offers is used: whole-object reads and writes, listing a
"directory" (a key prefix) and deletes — no appends, no renames, no hard links, no
directory fsync. Atomicity is what an object store gives: a write is **one PUT** (the object
appears whole, with its new content, or not at all; S3, GCS and ABFS are strongly consistent
for reads and lists after a PUT), so a name is never rewritten in place by the engine: logs
and snapshots get new names (``log-<id>``, ``snap-<id>``) and the newest complete one is
found by listing. Small files that are rewritten (``sinks-committed.json``, ``status.json``)
are single PUTs too: a reader sees the old content or the new. On a local path the same
calls are a temporary file (0600) fsynced and renamed, and the directory fsynced; the root is
a private directory (0700, refused when others can write it).

Credentials come from the environment and the standard configuration of each system
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_PROFILE``/``~/.aws``, instance roles;
``GOOGLE_APPLICATION_CREDENTIALS``; ``AZURE_STORAGE_*``; Kerberos for HDFS). A URL may carry
pyarrow's options as a query (``?endpoint_override=http://127.0.0.1:9000&scheme=http&region=…``);
user and password in a URL are refused (they would end up in logs and state files).
:func:`redact` gives the form that may be printed. Cost: one request per read, write,
delete or list; nothing is cached.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
from urllib.parse import urlsplit

from ..errors import StateError

#: URL schemes handed to :mod:`pyarrow.fs` (``s3a`` is Hadoop's name for ``s3``)
REMOTE_SCHEMES = ("s3", "s3a", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss", "file")


def is_url(location: str) -> bool:
    """``location`` is a URL of a filesystem other than a plain local path."""
    scheme = urlsplit(location).scheme.lower()
    return len(scheme) > 1 and scheme in REMOTE_SCHEMES


def is_local(location: str) -> bool:
    return not is_url(location) or urlsplit(location).scheme.lower() == "file"


def redact(location: str) -> str:
    """``location`` without a query (pyarrow's options may name keys) or user info."""
    if not is_url(location):
        return location
    u = urlsplit(location)
    host = u.hostname or ""
    return f"{u.scheme}://{host}{(':' + str(u.port)) if u.port else ''}{u.path}"


def join(location: str, *names: str) -> str:
    """``location`` (path or URL) with ``names`` appended (the URL's query kept at the end)."""
    if not is_url(location):
        return os.path.join(location, *names)
    u = urlsplit(location)
    path = posixpath.join(u.path or "/", *names)
    return u._replace(path=path).geturl()


#: one pyarrow filesystem per scheme, authority and options (opening one may ask the store, e.g.
#: S3 for the bucket's region): a process opens each store once
_FILESYSTEMS: dict[str, object] = {}


def check_location(location: str) -> None:
    """Refuse a URL the daemon cannot use, without connecting: user or password in it."""
    if not is_url(location):
        return
    u = urlsplit(location)
    # abfs://<container>@<account>.dfs.core.windows.net/…: the container is no credential
    if u.password or (u.username and u.scheme.lower() not in ("abfs", "abfss")):
        raise StateError(f"{redact(location)}: credentials in the URL are refused (they would be "
                         "written to logs and state files); give them in the environment or the "
                         "system's standard configuration (e.g. AWS_ACCESS_KEY_ID, ~/.aws)")


class StateFS:
    """The files under ``location`` (a local path or a URL); names are ``/``-separated and
    relative to it."""

    def __init__(self, location: str):
        self.location = location
        self.label = redact(location)
        self.local = is_local(location)
        self._dirs: set[str] = set()     # local directories known to exist (and checked)
        if self.local:
            path = urlsplit(location).path if is_url(location) else location
            self.root = os.path.abspath(path)
            self.fs = None
            return
        check_location(location)
        u = urlsplit(location)
        uri = location if u.scheme.lower() != "s3a" else "s3" + location[3:]
        key = urlsplit(uri)._replace(path="/", fragment="").geturl()
        cached = _FILESYSTEMS.get(key)
        if cached is None:
            from pyarrow import fs as pafs

            try:
                cached = _FILESYSTEMS[key] = pafs.FileSystem.from_uri(key)[0]
            except (ValueError, OSError) as e:
                raise StateError(f"cannot open the state location {self.label}: {_clean(e, location)}") from None
        self.fs = cached
        self.root = _fs_path(urlsplit(uri)).rstrip("/")

    # -- paths ------------------------------------------------------------------------------
    def path(self, name: str = "") -> str:
        if not name:
            return self.root
        return os.path.join(self.root, *name.split("/")) if self.local else f"{self.root}/{name}"

    def url(self, name: str = "") -> str:
        """The location of ``name`` as a path or URL (for another :class:`StateFS`)."""
        return join(self.location, *[p for p in name.split("/") if p]) if name else self.location

    def sub(self, name: str) -> StateFS:
        return StateFS(self.url(name))

    # -- reads ------------------------------------------------------------------------------
    def read(self, name: str) -> bytes | None:
        """The whole content of ``name``, or None if there is no such file."""
        if self.local:
            try:
                with open(self.path(name), "rb") as f:
                    return f.read()
            except (FileNotFoundError, NotADirectoryError):
                return None
        try:
            with self.fs.open_input_stream(self.path(name)) as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            if "NoSuchKey" in str(e) or "does not exist" in str(e) or "Not Found" in str(e):
                return None
            raise StateError(f"cannot read {self.label}/{name}: {_clean(e, self.location)}") from None

    def read_head(self, name: str, size: int = 65536) -> bytes | None:
        """The first ``size`` bytes of ``name`` (a ranged read), None if there is no such file."""
        if self.local:
            try:
                with open(self.path(name), "rb") as f:
                    return f.read(size)
            except (FileNotFoundError, NotADirectoryError):
                return None
        try:
            with self.fs.open_input_file(self.path(name)) as f:
                return f.read(size)
        except FileNotFoundError:
            return None
        except OSError as e:
            if "NoSuchKey" in str(e) or "does not exist" in str(e) or "Not Found" in str(e):
                return None
            raise StateError(f"cannot read {self.label}/{name}: {_clean(e, self.location)}") from None

    def list(self, prefix: str = "") -> list[str]:
        """The names of the files directly in the directory ``prefix`` (sorted; [] if none)."""
        return self._names(prefix, directories=False)

    def list_dirs(self, prefix: str = "") -> list[str]:
        """The names of the directories directly in ``prefix`` (sorted)."""
        return self._names(prefix, directories=True)

    def _names(self, prefix: str, directories: bool) -> list[str]:
        """The files (hidden ones left out) or the directories directly in ``prefix``: one
        listing, local or through ``pyarrow.fs``."""
        if self.local:
            d = self.path(prefix)
            try:
                if directories:
                    return sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))
                return sorted(n for n in os.listdir(d) if not n.startswith(".") and os.path.isfile(os.path.join(d, n)))
            except (FileNotFoundError, NotADirectoryError):
                return []
        from pyarrow import fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.path(prefix), allow_not_found=True))
        except OSError as e:
            raise StateError(f"cannot list {self.label}/{prefix}: {_clean(e, self.location)}") from None
        kind = pafs.FileType.Directory if directories else pafs.FileType.File
        return sorted(i.base_name for i in infos if i.type == kind)

    def exists(self, name: str = "") -> bool:
        """``name`` (a file, or with a trailing ``/`` or empty: a directory holding files) exists."""
        if self.local:
            return os.path.exists(self.path(name))
        from pyarrow import fs as pafs

        try:
            info = self.fs.get_file_info(self.path(name.rstrip("/")))
        except OSError as e:
            raise StateError(f"cannot reach {self.label}: {_clean(e, self.location)}") from None
        return info.type != pafs.FileType.NotFound

    # -- writes -----------------------------------------------------------------------------
    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` by ``data`` atomically: a reader (or a crash) sees the old content
        or the new, never a part (local: temporary file, fsync, rename, directory fsync;
        elsewhere: one PUT)."""
        if self.local:
            path = self.path(name)
            directory = os.path.dirname(path)
            self._mkdirs(directory)
            tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
            _fsync_dir(directory)
            return
        try:
            with self.fs.open_output_stream(self.path(name)) as f:
                f.write(data)
        except OSError as e:
            raise StateError(f"cannot write {self.label}/{name}: {_clean(e, self.location)}") from None

    def create(self, name: str, data: bytes) -> bool | None:
        """Create ``name`` with ``data`` only if it does not exist: True if this call created
        it, False if it existed; None where the filesystem has no exclusive create (object
        stores through pyarrow), and the caller must do without."""
        if not self.local:
            return None
        path = self.path(name)
        self._mkdirs(os.path.dirname(path))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return True

    def delete(self, name: str) -> None:
        """Remove the file ``name`` (nothing if it is not there)."""
        if self.local:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(name))
            return
        try:
            self.fs.delete_file(self.path(name))
        except FileNotFoundError:
            pass
        except OSError as e:
            if "does not exist" not in str(e) and "NoSuchKey" not in str(e):
                raise StateError(f"cannot delete {self.label}/{name}: {_clean(e, self.location)}") from None

    def delete_dir(self, name: str) -> None:
        """Remove the directory ``name`` and everything under it (nothing if absent)."""
        if self.local:
            import shutil

            shutil.rmtree(self.path(name), ignore_errors=True)
            self._dirs.clear()
            return
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self.path(name))

    def ensure_root(self) -> None:
        """The root exists (local: a private directory, 0700)."""
        if self.local:
            self._mkdirs(self.root)
            return
        if "/" not in self.root.strip("/"):      # a bucket's root: the bucket must exist
            if not self.exists():
                raise StateError(f"the state location {self.label} does not exist (create the bucket)")
            return
        with contextlib.suppress(OSError):
            self.fs.create_dir(self.root, recursive=True)

    def _mkdirs(self, directory: str) -> None:
        from ..errors import CheckpointError
        from ..maintain.checkpoint import private_dir

        if directory in self._dirs:
            return
        try:
            if not directory.startswith(self.root):
                os.makedirs(directory, 0o700, exist_ok=True)
                return
            private_dir(self.root)
            if directory != self.root:
                os.makedirs(directory, 0o700, exist_ok=True)
            self._dirs.add(directory)
        except CheckpointError as e:
            raise StateError(f"refusing the state directory: {e}") from None


def _fs_path(u) -> str:
    """A URL's path as :mod:`pyarrow.fs` names it: ``bucket/key`` on S3 and GCS,
    ``container/path`` on ABFS, the path on HDFS."""
    scheme = u.scheme.lower()
    if scheme in ("s3", "gs", "gcs"):
        return (u.hostname or "") + u.path
    if scheme in ("abfs", "abfss"):
        return (u.username or "") + u.path
    return u.path


def split(location: str) -> tuple[StateFS, str]:
    """The filesystem of ``location``'s directory and the file's name in it."""
    if not is_url(location):
        return StateFS(os.path.dirname(os.path.abspath(location))), os.path.basename(location)
    u = urlsplit(location)
    head, name = posixpath.split(u.path)
    return StateFS(u._replace(path=head).geturl()), name


def read_file(location: str) -> bytes | None:
    """The content of the file at ``location`` (path or URL), None if absent."""
    fs, name = split(location)
    return fs.read(name)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clean(e: BaseException, location: str) -> str:
    """An error's text without the URL's query (pyarrow's options may name keys)."""
    text = str(e)
    if "?" in location:
        text = text.replace(location, redact(location)).replace(location.split("?", 1)[1], "…")
    return text.splitlines()[0][:300] if text else type(e).__name__
