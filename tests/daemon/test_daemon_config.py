"""The daemon's Spark settings (issue 26, item 5): ``--conf`` and the TOML ``[conf]`` table,
UI, driver address and memory flags, the masters passed through to Spark; the example config."""

from __future__ import annotations

import os

import pytest

from ivm_layer.daemon.cli import build_parser, config_from_args
from ivm_layer.daemon.config import load_toml
from ivm_layer.daemon.spark import driver_addresses
from ivm_layer.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cfg(tmp_path, *flags, toml: str | None = None):
    views = tmp_path / "views.sql"
    views.write_text("CREATE INCREMENTAL VIEW v AS SELECT a FROM r;\n")
    argv = ["--source", "postgresql://u@h/db", "--views", str(views), "--checkpoint", str(tmp_path / "ck")]
    if toml is not None:
        (tmp_path / "d.toml").write_text(toml)
        argv += ["--config", str(tmp_path / "d.toml")]
    return config_from_args(build_parser().parse_args([*argv, *flags])).validate()


def test_conf_flags_and_toml_table_merge_flags_win(tmp_path):
    cfg = _cfg(tmp_path, "--conf", "spark.sql.shuffle.partitions=3", "--conf", "spark.a.b = x=y",
               toml='[daemon]\nshards = 1\n[conf]\n"spark.sql.shuffle.partitions" = 8\n'
                    '"spark.eventLog.enabled" = true\n')
    assert cfg.conf == {"spark.sql.shuffle.partitions": "3", "spark.a.b": "x=y", "spark.eventLog.enabled": "true"}
    sc = cfg.spark_conf()
    assert sc["spark.sql.shuffle.partitions"] == "3" and sc["spark.ui.enabled"] == "true"
    assert "spark.ui.port" not in sc     # Spark's own 4040 (the next free port if taken)


@pytest.mark.parametrize("flags, message", [
    (["--conf", "spark.sql.shuffle.partitions"], "use --conf key=value"),
    (["--conf", "sql.shuffle.partitions=3"], "start with 'spark.'"),
    (["--driver-memory", "2g", "--conf", "spark.driver.memory=4g"], "give it once"),
    (["--driver-memory", "lots"], "a size like"),
    (["--ui-port", "70000"], "port number"),
    (["--master", "mesos://h:5050"], "yarn or k8s://"),
])
def test_bad_spark_settings_are_refused_in_the_users_terms(tmp_path, flags, message):
    with pytest.raises(ConfigError, match=message):
        _cfg(tmp_path, *flags)


def test_ui_driver_memory_result_size_and_masters(tmp_path):
    sc = _cfg(tmp_path, "--no-ui", "--driver-memory", "4g", "--max-result-size", "0").spark_conf()
    assert sc == {"spark.ui.enabled": "false", "spark.driver.memory": "4g", "spark.driver.maxResultSize": "0"}
    assert _cfg(tmp_path, "--ui-port", "4999").spark_conf()["spark.ui.port"] == "4999"
    for master in ("yarn", "k8s://https://k8s.example:6443", "spark://h:7077", "local[2]"):
        assert _cfg(tmp_path, "--master", master).master == master
    assert _cfg(tmp_path).sink_commit == "pipelined"
    assert _cfg(tmp_path, "--sink-commit", "spark").sink_commit == "spark"


def test_driver_address_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert driver_addresses("local[2]") == ("127.0.0.1", "127.0.0.1")
    assert driver_addresses("spark://10.0.0.2:7077") == ("127.0.0.1", "127.0.0.1")
    assert driver_addresses("yarn") == (None, None)             # Spark's own choice
    assert driver_addresses("k8s://https://h:6443", "10.0.0.5") == ("10.0.0.5", "10.0.0.5")
    assert driver_addresses("yarn", "drv.example", "0.0.0.0") == ("drv.example", "0.0.0.0")
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.1.1")
    assert driver_addresses("local[*]") == ("10.1.1.1", "10.1.1.1")
    cfg = _cfg(tmp_path, "--driver-host", "drv", "--driver-bind-address", "0.0.0.0")
    assert cfg.driver_address() == ("drv", "0.0.0.0")
    cfg = _cfg(tmp_path, "--conf", "spark.driver.host=viaconf")
    assert cfg.driver_address() == ("viaconf", None)


def test_example_config_loads_and_describes_the_daemon_as_it_is():
    path = os.path.join(ROOT, "examples", "daemon", "daemon.toml")
    data = load_toml(path)
    assert data["views"] == os.path.join(ROOT, "examples", "daemon", "views.sql")
    assert data["conf"] and all(k.startswith("spark.") for k in data["conf"])
    with open(path) as f:
        text = f.read()
    assert "transformWithStateInPandas" not in text and "RocksDB" not in text


def test_toml_unknown_tables_are_refused(tmp_path):
    (tmp_path / "x.toml").write_text('[daemon]\nshards = 1\n[spark]\n"spark.x" = 1\n')
    with pytest.raises(ConfigError, match="outside \\[daemon\\]: spark"):
        load_toml(str(tmp_path / "x.toml"))
