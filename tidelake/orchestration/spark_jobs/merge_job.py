"""spark-submit entry point of the merge job: its one argument is a merge job spec (tidelake.orchestration.job_spec).

Owner: the DAGs' SparkSubmitOperator tasks (tidelake.orchestration.spark_submit).
"""

import sys

from tidelake.orchestration.job_entry import spark_submit_main

if __name__ == "__main__":
    sys.exit(spark_submit_main("merge", sys.argv[1:]))
