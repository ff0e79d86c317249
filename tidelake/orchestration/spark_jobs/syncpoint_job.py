"""spark-submit entry point of the syncpoint job: its one argument is a syncpoint job spec (tidelake.orchestration.job_spec).

Owner: the DAGs' SparkSubmitOperator tasks (tidelake.orchestration.spark_submit).
"""

import sys

from tidelake.orchestration.job_entry import spark_submit_main

if __name__ == "__main__":
    sys.exit(spark_submit_main("syncpoint", sys.argv[1:]))
