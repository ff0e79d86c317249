"""spark-submit entry point of the merge follower job: its one argument is a follow job spec (tidelake.orchestration.job_spec).

Owner: the merge follower DAG's task (tidelake.orchestration.airflow.dags.merge_follow).
"""

import sys

from tidelake.orchestration.job_entry import spark_submit_main

if __name__ == "__main__":
    sys.exit(spark_submit_main("follow", sys.argv[1:]))
