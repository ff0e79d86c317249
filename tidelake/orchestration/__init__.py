"""Logic behind tidelake's Airflow DAGs and plugin, kept here so it is testable without Airflow.

The DAG files, the plugin and the Spark entry points only wire these functions to Airflow;
modules that import Airflow itself are named for it (`operators`, `auth`).
"""
