"""The spark-submit entry points of tidelake's Spark jobs, shipped in the package so an installed
tidelake submits its own (tidelake.orchestration.spark_submit.SparkSettings.jobs_dir).
Owner: the DAGs' SparkSubmitOperator tasks.
"""
