"""Logic behind tidelake's Airflow DAGs and plugin, kept free of Airflow so it is testable alone.

The DAG files, the plugin and the Spark entry points only wire these functions to Airflow;
the modules that import Airflow itself live in `airflow/`.
Owner: the Airflow DAGs and plugin (dags/, airflow/replication_plugin.py).
"""
