"""Spark's view of an s3 lake: the hadoop-aws package and the s3a confs (docs/stack.md#object-store-the-lake-on-s3).

The confs are derived from the same storage options delta-rs uses (tidelake.lake.object_store),
so merge, verify and maintenance read exactly the bucket the puller writes. `s3://` is mapped to
the s3a filesystem too, so one lake root string serves both engines.

Spark writes only replicas: the control tables (changelog, ddl, watermarks) are written by delta-rs
alone, because Spark's S3 log store does not commit with a conditional PUT and could overwrite a
delta-rs commit of the same version (tidelake.maintenance.lake_upkeep).
Owner: the Spark session builder (tidelake.spark.spark_session).
"""

from __future__ import annotations

import re
from pathlib import Path

from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import is_s3, setting_of

S3A_FS = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def hadoop_version() -> str:
    """The Hadoop version pyspark ships (its jars/hadoop-client-api-X.jar): hadoop-aws must be
    the same version, and brings the AWS SDK v2 bundle it was built against."""
    import pyspark  # not at the top: Airflow's DAG parsing imports this module (spark_submit) and must not load pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        match = re.fullmatch(r"hadoop-client-api-(\d+\.\d+\.\d+)\.jar", jar.name)
        if match:
            return match.group(1)
    raise InputError(f"no hadoop-client-api jar in {jars} (needed to choose the hadoop-aws version): "
                     "is the full pyspark installed (not pyspark-client)?")


def hadoop_aws_package() -> str:
    """Maven coordinate of hadoop-aws for the installed pyspark."""
    return f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"


def lake_packages(layout: LakeLayout | None) -> list[str]:
    """Extra Maven packages a Spark needs for this lake (none for a local one)."""
    return [hadoop_aws_package()] if layout is not None and is_s3(layout.root) else []


def s3a_confs(layout: LakeLayout | None, credentials: bool = True) -> dict[str, str]:
    """`spark.hadoop.fs.s3a.*` confs for an s3 lake, from its storage options; {} for others.

    `credentials=False` leaves keys and token out, for confs that end up on a command line or
    in a serialized DAG: s3a's default provider chain then reads them from the AWS_* variables
    of its process (s3a_credential_env) or they are set at job start (apply_s3a_confs)."""
    if layout is None or not is_s3(layout.root):
        return {}
    options = layout.storage_options or {}
    confs = {"spark.hadoop.fs.s3.impl": S3A_FS, "spark.hadoop.fs.s3a.impl": S3A_FS}
    endpoint = setting_of(options, "endpoint")
    if endpoint:
        confs["spark.hadoop.fs.s3a.endpoint"] = endpoint
        confs["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
        virtual_hosted = setting_of(options, "virtual_hosted_style_request")
        # delta-rs (object_store) addresses a custom endpoint path-style unless told otherwise.
        confs["spark.hadoop.fs.s3a.path.style.access"] = str(virtual_hosted != "true").lower()
    region = setting_of(options, "region")
    if region:
        confs["spark.hadoop.fs.s3a.endpoint.region"] = region
    return {**confs, **s3a_credential_confs(layout)} if credentials else confs


def s3a_credential_confs(layout: LakeLayout | None) -> dict[str, str]:
    """The s3a key, secret, token and provider of an s3 lake's storage options ({} without keys:
    s3a keeps its default credential chain)."""
    if layout is None or not is_s3(layout.root):
        return {}
    options = layout.storage_options or {}
    key = setting_of(options, "access_key_id")
    secret = setting_of(options, "secret_access_key")
    token = setting_of(options, "session_token")
    if not (key and secret):
        return {}
    provider = "TemporaryAWSCredentialsProvider" if token else "SimpleAWSCredentialsProvider"
    confs = {"spark.hadoop.fs.s3a.access.key": key, "spark.hadoop.fs.s3a.secret.key": secret,
             "spark.hadoop.fs.s3a.aws.credentials.provider": f"org.apache.hadoop.fs.s3a.{provider}"}
    if token:
        confs["spark.hadoop.fs.s3a.session.token"] = token
    return confs


def s3a_credential_env(layout: LakeLayout | None) -> dict[str, str]:
    """The lake's credentials as the AWS_* variables s3a's default chain reads
    (EnvironmentVariableCredentialsProvider), for a Spark process started by us."""
    if layout is None or not is_s3(layout.root):
        return {}
    options = layout.storage_options or {}
    names = {"access_key_id": "AWS_ACCESS_KEY_ID", "secret_access_key": "AWS_SECRET_ACCESS_KEY",
             "session_token": "AWS_SESSION_TOKEN"}
    return {variable: value for setting, variable in names.items() if (value := setting_of(options, setting))}
