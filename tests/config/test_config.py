"""Changefeed TOML validation: every bad key is reported as one line naming the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelake import tso
from tidelake.config import IcebergConfig, load_config, parse_duration, parse_size
from tidelake.errors import InputError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "changefeed.toml"

MINIMAL = """
[changefeed]
id = "cf1"
[upstream]
pd = ["127.0.0.1:2379"]
[lake]
root = "lake"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "changefeed.toml"
    path.write_text(text)
    return path


def test_example_config_loads():
    config = load_config(EXAMPLE)
    assert config.changefeed_id == "shop-to-lake"
    assert config.gc_service_id == "tidelake-shop-to-lake"
    assert config.upstream.pd == ("127.0.0.1:2379",)
    assert config.upstream.tls is None
    assert config.upstream.gc_ttl_s == 86400
    assert config.filter.rules == ("*.*", "!test.*")
    f = config.filter.table_filter()
    assert f.should_replicate_table("Shop", "Orders") and not f.should_replicate_table("test", "t")
    assert config.lake.root == str(EXAMPLE.parent / "lake")
    assert config.lake.commit_bucket_s == 3600
    assert config.puller.memory_quota_bytes == 1024**3
    assert config.puller.flush_interval_s == 5.0
    assert config.puller.flush_bytes == 64 * 1024**2
    assert config.start_ts is None
    assert config.history.scd2 == () and config.history.soft_deletes == ()  # commented out in the example


def test_minimal_config_defaults(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.filter.rules == ("*.*",)
    assert config.filter.case_sensitive is False
    assert config.puller.shards == 1 and config.puller.shard_of(12345) == 0
    assert config.puller.metrics_port is None and config.puller.metrics_port_of(0) is None
    assert config.lake.commit_bucket_s == 3600


def test_metrics_port_is_per_shard(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + "[puller]\nshards = 3\nmetrics_port = 9464\n"))
    assert [config.puller.metrics_port_of(i) for i in range(3)] == [9464, 9465, 9466]


def test_spill_dir_resolves_against_the_config_folder_and_must_be_a_writable_folder(tmp_path):
    import tempfile

    assert load_config(write(tmp_path, MINIMAL)).puller.spill_dir == tempfile.gettempdir()
    (tmp_path / "spill").mkdir()
    config = load_config(write(tmp_path, MINIMAL + '[puller]\nspill_dir = "spill"\n'))
    assert config.puller.spill_dir == str(tmp_path / "spill")
    (tmp_path / "afile").write_text("x")
    for value in ("missing", "afile"):
        with pytest.raises(InputError, match=rf"\[puller\]\.spill_dir: expected an existing writable folder, got '{value}'"):
            load_config(write(tmp_path, MINIMAL + f'[puller]\nspill_dir = "{value}"\n'))


def test_tls_paths_resolve_against_the_config_folder(tmp_path):
    for name in ("ca.pem", "c.pem", "k.pem"):
        (tmp_path / name).write_text("x")
    config = load_config(write(tmp_path, MINIMAL + '[upstream.tls]\nca = "ca.pem"\ncert = "c.pem"\nkey = "k.pem"\n'))
    assert config.upstream.tls.ca == str(tmp_path / "ca.pem")
    assert config.upstream.tls.key == str(tmp_path / "k.pem")


def test_start_ts_as_tso_or_datetime(tmp_path):
    text = MINIMAL.replace('id = "cf1"', 'id = "cf1"\nstart_ts = 449412345678901234')
    assert load_config(write(tmp_path, text)).start_ts == 449412345678901234
    text = MINIMAL.replace('id = "cf1"', 'id = "cf1"\nstart_ts = 2026-05-01T00:00:00Z')
    ts = load_config(write(tmp_path, text)).start_ts
    assert tso.to_datetime(ts).isoformat() == "2026-05-01T00:00:00+00:00"


def test_sizes_and_durations():
    assert parse_size("512MiB") == 512 * 1024**2
    assert parse_size("1GB") == 10**9
    assert parse_size("4096") == 4096
    assert parse_duration("1h30m") == 5400
    assert parse_duration("250ms") == 0.25
    for bad in ("lots", "5 parsecs", "MiB"):
        with pytest.raises(ValueError):
            parse_size(bad)
    for bad in ("5", "s", "5x", "1h 30m", ""):
        with pytest.raises(ValueError):
            parse_duration(bad)


@pytest.mark.parametrize(
    "section, key, value, message",
    [
        ("puller", "memory_quota", "'lots'", r"changefeed\.toml: \[puller\]\.memory_quota: expected a size like '512MiB', got 'lots'"),
        ("puller", "flush_size", "0", r"\[puller\]\.flush_size: expected a size above zero"),
        ("puller", "flush_interval", "'soon'", r"\[puller\]\.flush_interval: expected a duration like '5s', got 'soon'"),
        ("puller", "shards", "0", r"\[puller\]\.shards: expected a positive integer, got 0"),
        ("puller", "metrics_port", "70000", r"\[puller\]\.metrics_port: expected a TCP port number 1-65535, got 70000"),
        ("puller", "shard", "2", r"\[puller\]\.shard: unknown key \(valid here: "),
        ("lake", "commit_bucket", "'90ms'", r"\[lake\]\.commit_bucket: expected a whole number of seconds"),
        ("lake", "commit_bucket", "'30s'", r"\[lake\]\.commit_bucket: expected .* >= 1m .*minute.*got '30s'"),
        ("filter", "rules", "['db-1.t']", r"\[filter\]\.rules: table filter rule 'db-1\.t'.*unexpected special character"),
        ("filter", "case_sensitive", "'no'", r"\[filter\]\.case_sensitive: expected true or false, got 'no'"),
        ("upstream", "gc_ttl", "86400", r"\[upstream\]\.gc_ttl: expected a duration like '5s', got 86400"),
    ],
)
def test_bad_value_names_file_section_and_key(tmp_path, section, key, value, message):
    text = MINIMAL + f"\n[{section}]\n{key} = {value}\n" if section not in ("lake", "upstream") else MINIMAL.replace(
        f"[{section}]\n", f"[{section}]\n{key} = {value}\n"
    )
    with pytest.raises(InputError, match=message):
        load_config(write(tmp_path, text))


@pytest.mark.parametrize(
    "text, message",
    [
        (MINIMAL.replace('id = "cf1"', ""), r"\[changefeed\]\.id: required key is missing"),
        (MINIMAL.replace('id = "cf1"', 'id = "a b"'), r"\[changefeed\]\.id: expected letters, digits"),
        (MINIMAL.replace('id = "cf1"', 'id = "orders-shard1of2"'), r"\[changefeed\]\.id: expected .*shard suffix"),
        (MINIMAL.replace('id = "cf1"', 'id = "cf1"\nstart_ts = -5'), r"\[changefeed\]\.start_ts: expected a TSO"),
        (MINIMAL.replace('id = "cf1"', 'id = "cf1"\nstart_ts = 1960-01-01T00:00:00Z'),
         r"\[changefeed\]\.start_ts: expected a TSO .* got '1960-01-01"),
        (MINIMAL.replace('id = "cf1"', 'id = "cf1"\nstart_ts = 9999-01-01T00:00:00Z'),
         r"\[changefeed\]\.start_ts: expected a TSO .* got '9999-01-01"),
        (MINIMAL.replace('pd = ["127.0.0.1:2379"]', "pd = []"), r"\[upstream\]\.pd: expected at least one PD address"),
        (MINIMAL.replace('pd = ["127.0.0.1:2379"]', "pd = [1]"), r"\[upstream\]\.pd: expected a list of non-empty strings"),
        (MINIMAL.replace('[lake]\nroot = "lake"\n', ""), r"changefeed\.toml: \[lake\]: required section is missing"),
        (MINIMAL + "[upstream.tls]\n", r"\[upstream\.tls\]\.ca: required key is missing"),
        (MINIMAL + '[upstream.tls]\nca = "nope.pem"\n', r"\[upstream\.tls\]\.ca: expected an existing file, got 'nope\.pem'"),
        (MINIMAL + "[sink]\nx = 1\n", r"changefeed\.toml: sink: unknown key"),
        ("[changefeed\n", r"changefeed\.toml: not valid TOML"),
    ],
)
def test_structural_errors(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        load_config(write(tmp_path, text))


def test_mutual_tls_needs_cert_and_key(tmp_path):
    (tmp_path / "ca.pem").write_text("x")
    (tmp_path / "c.pem").write_text("x")
    with pytest.raises(InputError, match=r"\[upstream\.tls\]\.key: required when cert is set"):
        load_config(write(tmp_path, MINIMAL + '[upstream.tls]\nca = "ca.pem"\ncert = "c.pem"\n'))


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "absent.toml")


def test_merge_section_defaults_to_no_syncpoints_and_four_jobs(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.merge.syncpoint_interval_s is None
    assert config.merge.parallel_jobs == 4
    assert config.merge.run_on_new_data_s is None
    assert config.merge.follow_poll_s == 1.0
    config = load_config(write(tmp_path, MINIMAL + '[merge]\nsyncpoint_interval = "10m"\nparallel_jobs = 1\n'
                                                 'run_on_new_data = "30s"\nfollow_poll = "250ms"\n'))
    assert config.merge.syncpoint_interval_s == 600
    assert config.merge.parallel_jobs == 1
    assert config.merge.run_on_new_data_s == 30
    assert config.merge.follow_poll_s == 0.25


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('syncpoint_interval = "1500ms"', "[merge].syncpoint_interval: expected a whole number of seconds"),
        ('syncpoint_interval = "500ms"', "[merge].syncpoint_interval: expected a whole number of seconds"),
        ("syncpoint_interval = 60", "[merge].syncpoint_interval: expected a duration like '5s', got 60"),
        ("parallel_jobs = 0", "[merge].parallel_jobs: expected a positive integer, got 0"),
        ('run_on_new_data = "soon"', "[merge].run_on_new_data: expected a duration like '5s', got 'soon'"),
        ('schedule = "1m"', "[merge].schedule: unknown key (valid here: follow, follow_poll, parallel_jobs, run_on_new_data, "
                             "syncpoint_interval)"),
        ('follow_poll = "0s"', "[merge].follow_poll: expected a duration above zero like '5s', got '0s'"),
        ('catalog_uri = "db.sqlite"', "[iceberg].catalog_uri: expected a SQLAlchemy URL like "),
        ('catalog_name = "a b"', "[iceberg].catalog_name: expected letters, digits, '-' and '_', got 'a b'"),
        ('enabled = "yes"', "[iceberg].enabled: expected true or false"),
        ('retention = "a week"', "[iceberg].retention: expected a duration like '5s', got 'a week'"),
        ('uri = "sqlite://"', "[iceberg].uri: unknown key (valid here: catalog_name, catalog_uri, enabled, retention)"),
    ],
)
def test_merge_and_iceberg_section_errors_name_the_key(tmp_path, section, message):
    name = message[1:message.index("]")]
    with pytest.raises(InputError) as err:
        load_config(write(tmp_path, MINIMAL + f"[{name}]\n{section}\n"))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_history_section_selects_tables_by_filter_rules(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert not config.history.wants_scd2("shop", "orders") and not config.history.wants_soft_deletes("shop", "orders")
    text = MINIMAL + '[history]\nscd2 = ["shop.*", "!shop.audit"]\nsoft_deletes = "shop.orders"\n'
    history = load_config(write(tmp_path, text)).history
    assert history.wants_scd2("Shop", "Orders") and not history.wants_scd2("shop", "audit")
    assert not history.wants_scd2("other", "orders")
    assert history.wants_soft_deletes("shop", "orders") and not history.wants_soft_deletes("shop", "items")
    sensitive = load_config(write(tmp_path, text + "[filter]\ncase_sensitive = true\n")).history
    assert sensitive.wants_scd2("shop", "orders") and not sensitive.wants_scd2("Shop", "orders")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('scd2 = ["shop"]', "[history].scd2: "),
        ("soft_deletes = [1]", "[history].soft_deletes: expected a list of non-empty strings, got [1]"),
        ('history = ["*.*"]', "[history].history: unknown key (valid here: scd2, soft_deletes)"),
    ],
)
def test_history_section_errors_name_the_key(tmp_path, section, message):
    with pytest.raises(InputError) as err:
        load_config(write(tmp_path, MINIMAL + f"[history]\n{section}\n"))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


BY_CONNECTION = MINIMAL.replace('pd = ["127.0.0.1:2379"]', 'connection = "tidb_pd_prod"\ngc_ttl = "2h"')


def test_upstream_by_connection_names_it_and_refuses_pd_beside_it(tmp_path):
    upstream = load_config(write(tmp_path, BY_CONNECTION)).upstream
    assert (upstream.connection, upstream.pd, upstream.tls, upstream.gc_ttl_s) == ("tidb_pd_prod", (), None, 7200)
    with pytest.raises(InputError, match=r"^\[upstream\]\.connection 'tidb_pd_prod': the bootstrap job cannot read "
                                         r"Airflow connections \(the Airflow tasks and the tidelake commands resolve "
                                         r"it for it\): run it from one of those, or give \[upstream\]\.pd$"):
        upstream.endpoints("the bootstrap job")
    both = BY_CONNECTION.replace('connection = "tidb_pd_prod"', 'connection = "tidb_pd_prod"\npd = ["pd:2379"]')
    with pytest.raises(InputError, match=r"changefeed\.toml: \[upstream\]\.connection: the connection holds the PD "
                                         r"endpoints and TLS; remove \[upstream\]\.pd"):
        load_config(write(tmp_path, both))
    with pytest.raises(InputError, match=r"\[upstream\]\.connection: expected a non-empty string"):
        load_config(write(tmp_path, BY_CONNECTION.replace('"tidb_pd_prod"', '" "')))
    assert load_config(write(tmp_path, MINIMAL)).upstream.endpoints("tidelake pull") == ["127.0.0.1:2379"]


def test_iceberg_section_defaults_off_with_the_lake_sqlite_catalog(tmp_path):
    assert load_config(write(tmp_path, MINIMAL)).iceberg == IcebergConfig()
    text = MINIMAL + '[iceberg]\nenabled = true\ncatalog_uri = "postgresql+psycopg2://airflow@db/airflow"\n'
    config = load_config(write(tmp_path, text)).iceberg
    assert config == IcebergConfig(enabled=True, catalog_uri="postgresql+psycopg2://airflow@db/airflow")
    assert load_config(write(tmp_path, text + 'retention = "2d"\n')).iceberg.retention_s == 2 * 86400


def test_iceberg_on_an_object_store_lake_needs_a_catalog_uri(tmp_path):
    text = MINIMAL.replace('root = "lake"', 'root = "s3://bucket/lake"') + "[iceberg]\nenabled = true\n"
    with pytest.raises(InputError, match=r"\[iceberg\]\.catalog_uri: required for the object-store lake s3://bucket/lake"):
        load_config(write(tmp_path, text))
