"""The sans-I/O codec: every frontend message round-trips; malformed and truncated input is a
ProtocolViolation (an ErrorResponse and a closed connection), never another exception; and a
live server answers 1,000 malformed or truncated messages without dying."""

from __future__ import annotations

import random
import socket
import struct

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ivm_layer.serve import codec, pgtypes
from ivm_layer.serve import messages as m

texts = st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)
params = st.lists(st.one_of(st.none(), st.binary(max_size=20)), max_size=5)

frontend_messages = st.one_of(
    st.builds(m.Query, texts),
    st.builds(m.Parse, texts, texts, st.lists(st.integers(0, 2**32 - 1), max_size=4).map(tuple)),
    params.flatmap(lambda ps: st.builds(
        m.Bind, texts, texts, st.sampled_from([(), (0,), (1,), tuple(0 for _ in ps)]), st.just(tuple(ps)),
        st.lists(st.sampled_from([0, 1]), max_size=4).map(tuple))),
    st.builds(m.Describe, st.sampled_from(["S", "P"]), texts),
    st.builds(m.Execute, texts, st.integers(0, 2**31 - 1)),
    st.builds(m.Close, st.sampled_from(["S", "P"]), texts),
    st.just(m.Sync()), st.just(m.Flush()), st.just(m.Terminate()), st.just(m.CopyDone()),
    st.builds(m.CopyData, st.binary(max_size=50)), st.builds(m.CopyFail, texts),
)


@given(st.lists(frontend_messages, min_size=1, max_size=6), st.integers(1, 17))
@settings(max_examples=300, deadline=None)
def test_frontend_messages_round_trip_in_any_chunking(msgs, chunk):
    data = b"".join(codec.frontend(x) for x in msgs)
    p = codec.FrontendParser()
    p.started()
    got = []
    for i in range(0, len(data), chunk):
        p.feed(data[i:i + chunk])
        while (x := p.next()) is not None:
            got.append(x)
    assert got == msgs


def test_startup_ssl_and_cancel_requests():
    p = codec.FrontendParser()
    p.feed(codec.frontend(m.SSLRequest()) + codec.frontend(m.Startup(m.PROTOCOL_V3, {"user": "u", "database": "d"})))
    assert p.next() == m.SSLRequest()
    assert p.next() == m.Startup(m.PROTOCOL_V3, {"user": "u", "database": "d"})
    p = codec.FrontendParser()
    p.feed(codec.frontend(m.CancelRequest(42, 7)))
    assert p.next() == m.CancelRequest(42, 7)


def _mutations(rng: random.Random, valid: bytes) -> bytes:
    """A malformed variant of a valid message stream."""
    b = bytearray(valid)
    how = rng.randrange(6)
    if how == 0 and len(b) > 1:                         # truncated
        return bytes(b[:rng.randrange(1, len(b))])
    if how == 1 and len(b) >= 5:                        # a lying length
        struct.pack_into("!i", b, 1, rng.choice([-5, 0, 3, len(b) + 1000, 2**31 - 1, rng.randrange(-100, 100)]))
        return bytes(b)
    if how == 2:                                        # an unknown type byte
        b[0] = rng.choice(b"AbeghjklmoqrsuvwyzZ\x00\xff")
        return bytes(b)
    if how == 3 and len(b) > 5:                         # random bytes inside
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(5, len(b))] = rng.randrange(256)
        return bytes(b)
    if how == 4:                                        # a bit of garbage after
        return bytes(b) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
    return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))


SAMPLES = [codec.frontend(x) for x in (
    m.Query("select 1"), m.Parse("s", "select $1", (23,)), m.Bind("", "s", (0,), (b"1",), (1,)),
    m.Describe("S", "s"), m.Execute("", 10), m.Close("P", ""), m.CopyFail("x"), m.Sync())]


@given(st.integers(0, 2**32 - 1))
@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_malformed_or_truncated_input_is_a_protocol_violation_never_a_crash(seed):
    rng = random.Random(seed)
    data = _mutations(rng, rng.choice(SAMPLES))
    p = codec.FrontendParser(max_message=1 << 20)
    p.started()
    p.feed(data)
    try:
        while p.next() is not None:
            pass
    except codec.ProtocolViolation as e:
        assert str(e)


@given(st.binary(max_size=64))
@settings(max_examples=300, deadline=None)
def test_garbage_startup_packets(data):
    p = codec.FrontendParser()
    p.feed(data)
    try:
        p.next()
    except codec.ProtocolViolation:
        pass


def test_backend_messages_split_back():
    data = (codec.row_description([("a", 23, 4, -1, 0)]) + codec.data_row([b"1", None]) +
            codec.command_complete("SELECT 1") + codec.ready_for_query("I"))
    assert [k for k, _ in codec.backend_messages(data)] == ["T", "D", "C", "Z"]
    err = codec.error_response("42P01", 'relation "x" does not exist', position=15)
    kind, body = codec.backend_messages(err)[0]
    assert kind == "E" and b"C42P01\0" in body and b"P15\0" in body


@pytest.mark.parametrize("value, oid", [
    (12345678901, pgtypes.INT8), (-7, pgtypes.INT4), (3, pgtypes.INT2), (1.5, pgtypes.FLOAT8),
    (True, pgtypes.BOOL), ("héllo", pgtypes.TEXT), (b"\x00\xff", pgtypes.BYTEA),
])
def test_binary_round_trip(value, oid):
    enc = pgtypes.binary_encoder(oid)
    assert pgtypes.decode_param(oid, 1, enc(value)) == value


@pytest.mark.parametrize("text", ["0", "1.5", "-12345.678900", "0.0001", "100000000", "123456789012345678901234.5",
                                  "-0.5", "NaN"])
def test_numeric_binary_round_trip(text):
    from decimal import Decimal

    d = Decimal(text)
    back = pgtypes.decode_param(pgtypes.NUMERIC, 1, pgtypes.binary_encoder(pgtypes.NUMERIC)(d))
    assert (back.is_nan() and d.is_nan()) or back == d


def test_text_output_matches_postgresql_spellings():
    import datetime as dt

    enc = pgtypes.text_encoder
    assert enc(pgtypes.FLOAT8)(float("inf")) == b"Infinity"
    assert enc(pgtypes.FLOAT8)(2.0) == b"2"
    assert enc(pgtypes.FLOAT4)(0.1) == b"0.1"
    assert enc(pgtypes.BOOL)(False) == b"f"
    assert enc(pgtypes.TIMESTAMP)(dt.datetime(2024, 1, 2, 3, 4, 5, 500000)) == b"2024-01-02 03:04:05.5"
    assert enc(pgtypes.INTERVAL)(dt.timedelta(days=1, hours=2)) == b"1 day 02:00:00"
    assert enc(pgtypes.BYTEA)(b"\x01\xab") == b"\\x01ab"
    assert enc(pgtypes.ARRAY_OF[pgtypes.INT4])([1, None, 3]) == b"{1,NULL,3}"
    assert enc(pgtypes.ARRAY_OF[pgtypes.TEXT])(["a b", 'q"']) == b'{"a b","q\\""}'


def test_a_live_server_survives_1000_malformed_messages(served):
    """Each malformed or truncated message on its own connection after a valid startup: the
    server answers with an ErrorResponse or closes; it keeps serving normal clients."""
    rng = random.Random(23)
    startup = codec.frontend(m.Startup(m.PROTOCOL_V3, {"user": "ivm", "database": "shop"}))
    answered = closed = 0
    for i in range(1000):
        bad = _mutations(rng, rng.choice(SAMPLES))
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as s:
            if i % 10 == 9:      # malformed startup packets too
                s.sendall(bad)
            else:
                s.sendall(startup)
                _read_until_ready(s)
                s.sendall(bad)
            s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except (ConnectionResetError, TimeoutError):
                    break
                if not chunk:
                    break
                got += chunk
            if b"E" in got[:1] or any(k == "E" for k, _ in codec.backend_messages(got)):
                answered += 1
            else:
                closed += 1
    assert answered + closed == 1000 and answered > 300
    assert served.alive()
    with psycopg.connect(served.url(), autocommit=True) as c:
        assert c.execute("select 41 + 1").fetchone() == (42,)


def _read_until_ready(s: socket.socket) -> None:
    buf = b""
    while True:
        buf += s.recv(65536)
        if any(k == "Z" for k, _ in codec.backend_messages(buf)):
            return


def test_infinite_dates_and_timestamps_go_out_as_postgresql_infinities():
    """Issue 29 case 4: the engine's ±infinity leaves ``ivm serve`` as PostgreSQL's, in text and
    binary (DATEVAL_NOEND/NOBEGIN, DT_NOEND/NOBEGIN), and 9999-12-31 stays a date."""
    import datetime as dt
    import struct as st

    from ivm_layer.engine import temporal as tp
    from ivm_layer.serve import pgtypes as pt

    assert pt._TEXT_OUT[pt.DATE](tp.DATE_INF) == "infinity"
    assert pt._TEXT_OUT[pt.DATE](dt.date.max) == "9999-12-31"
    assert pt._TEXT_OUT[pt.TIMESTAMPTZ](tp.TSTZ_NEG_INF) == "-infinity"
    assert pt._TEXT_OUT[pt.TIMESTAMP](tp.TS_INF) == "infinity"
    assert pt._date_send(tp.DATE_NEG_INF) == st.pack("!i", -(2**31))
    assert pt._timestamp_send(tp.TS_INF) == st.pack("!q", 2**63 - 1)
    assert pt._timestamptz_send(tp.TSTZ_NEG_INF) == st.pack("!q", -(2**63))
