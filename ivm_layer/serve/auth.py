"""Who may connect: ``trust`` (loopback only) or SCRAM-SHA-256 (RFC 5802/7677, as PostgreSQL).

Passwords come from a users file — one ``name:secret`` per line, the secret either a
password or a PostgreSQL SCRAM verifier ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:
<ServerKey>`` (what ``pg_authid.rolpassword`` holds; :func:`verifier` makes one) — or from
the environment (``IVM_SERVE_PASSWORD``, for the user ``IVM_SERVE_USER`` or any user).
The exchange is a sans-I/O :class:`ScramExchange`: the connection feeds it the client's
messages and sends back what it returns. Secrets are never logged or put in an error; a
failed login reads "password authentication failed for user …" (28P01), whatever failed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path

from .sqlstate import ServeError

ITERATIONS = 4096


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


@dataclass(frozen=True)
class Verifier:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


def verifier(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> Verifier:
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return Verifier(iterations, salt, _h(_hmac(salted, b"Client Key")), _hmac(salted, b"Server Key"))


def format_verifier(v: Verifier) -> str:
    b = base64.b64encode
    return (f"SCRAM-SHA-256${v.iterations}:{b(v.salt).decode()}${b(v.stored_key).decode()}:"
            f"{b(v.server_key).decode()}")


def parse_verifier(text: str) -> Verifier | None:
    if not text.startswith("SCRAM-SHA-256$"):
        return None
    try:
        head, keys = text[len("SCRAM-SHA-256$"):].split("$", 1)
        iters, salt = head.split(":", 1)
        stored, server = keys.split(":", 1)
        d = base64.b64decode
        return Verifier(int(iters), d(salt), d(stored), d(server))
    except (ValueError, TypeError):
        raise ValueError("malformed SCRAM-SHA-256 verifier") from None


class Users:
    """The accounts: ``name → Verifier``; ``any_user`` holds the one password every user name
    may log in with (``IVM_SERVE_PASSWORD`` without ``IVM_SERVE_USER``)."""

    def __init__(self, accounts: dict[str, Verifier] | None = None, any_user: Verifier | None = None):
        self.accounts = accounts or {}
        self.any_user = any_user

    @classmethod
    def load(cls, path: str | None, env: dict | None = None) -> Users:
        env = os.environ if env is None else env
        accounts: dict[str, Verifier] = {}
        if path:
            p = Path(path)
            try:
                lines = p.read_text(encoding="utf-8").splitlines()
            except OSError as e:
                raise ServeError("58030", f"cannot read the users file {path}: {e.strerror}") from None
            for n, line in enumerate(lines, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name, sep, secret = line.partition(":")
                if not sep or not name or not secret:
                    raise ServeError("F0000", f"{path}, line {n}: expected name:password or name:SCRAM-SHA-256$…")
                try:
                    v = parse_verifier(secret)
                except ValueError:
                    raise ServeError("F0000", f"{path}, line {n}: malformed SCRAM-SHA-256 verifier") from None
                accounts[name] = v if v is not None else verifier(secret)
        any_user = None
        pw = env.get("IVM_SERVE_PASSWORD")
        if pw:
            user = env.get("IVM_SERVE_USER")
            if user:
                accounts[user] = verifier(pw)
            else:
                any_user = verifier(pw)
        return cls(accounts, any_user)

    def __bool__(self) -> bool:
        return bool(self.accounts) or self.any_user is not None

    def lookup(self, user: str) -> Verifier | None:
        return self.accounts.get(user, self.any_user)


def failed(user: str) -> ServeError:
    return ServeError("28P01", f'password authentication failed for user "{user}"')


def _attrs(msg: str) -> dict[str, str]:
    out = {}
    for part in msg.split(","):
        if len(part) >= 2 and part[1] == "=":
            out[part[0]] = part[2:]
    return out


class ScramExchange:
    """The server side of one SCRAM-SHA-256 login (no channel binding)."""

    def __init__(self, user: str, users: Users):
        self.user = user
        v = users.lookup(user)
        # an unknown user still gets a full exchange (with a made-up verifier): the client
        # cannot tell unknown users from wrong passwords
        self.v = v if v is not None else verifier(secrets.token_hex(16))
        self.known = v is not None
        self.server_first = ""
        self.client_first_bare = ""
        self.nonce = ""

    def first(self, data: bytes) -> bytes:
        """The SASLInitialResponse → the server-first message."""
        try:
            mech_end = data.index(b"\0")
            mech = data[:mech_end].decode()
            (size,) = struct.unpack_from("!i", data, mech_end + 1)
            msg = data[mech_end + 5:mech_end + 5 + size].decode("utf-8")
        except (ValueError, struct.error, UnicodeDecodeError):
            raise ServeError("08P01", "malformed SASLInitialResponse message") from None
        if mech != "SCRAM-SHA-256":
            raise ServeError("28000", f"SASL mechanism {mech!r} is not supported (SCRAM-SHA-256 is)")
        if msg.startswith("p="):
            raise ServeError("28000", "SCRAM channel binding is not supported: connect with channel_binding=disable "
                                      "or prefer")
        if not msg.startswith(("n,", "y,")):
            raise ServeError("08P01", "malformed SCRAM message (GS2 header)")
        self.client_first_bare = msg.split(",", 2)[2]
        cnonce = _attrs(self.client_first_bare).get("r")
        if not cnonce:
            raise ServeError("08P01", "malformed SCRAM message (no nonce)")
        self.nonce = cnonce + base64.b64encode(secrets.token_bytes(18)).decode()
        self.server_first = f"r={self.nonce},s={base64.b64encode(self.v.salt).decode()},i={self.v.iterations}"
        return self.server_first.encode()

    def final(self, data: bytes) -> bytes:
        """The SASLResponse (client-final) → the server-final message, or 28P01."""
        try:
            msg = data.decode("utf-8")
        except UnicodeDecodeError:
            raise failed(self.user) from None
        attrs = _attrs(msg)
        if attrs.get("r") != self.nonce or "p" not in attrs or ",p=" not in msg:
            raise failed(self.user)
        without_proof = msg[:msg.rindex(",p=")]
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except (ValueError, TypeError):
            raise failed(self.user) from None
        signature = _hmac(self.v.stored_key, auth_message)
        if len(proof) != len(signature):
            raise failed(self.user)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not (self.known and hmac.compare_digest(_h(client_key), self.v.stored_key)):
            raise failed(self.user)
        server_sig = _hmac(self.v.server_key, auth_message)
        return f"v={base64.b64encode(server_sig).decode()}".encode()
