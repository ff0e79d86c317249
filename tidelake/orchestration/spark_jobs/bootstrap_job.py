"""spark-submit entry point of the bootstrap job: its one argument is a bootstrap job spec (tidelake.orchestration.job_spec).

Owner: the DAGs' SparkSubmitOperator tasks (tidelake.orchestration.spark_submit).
"""

import sys

from tidelake.orchestration.job_entry import spark_submit_main

if __name__ == "__main__":
    sys.exit(spark_submit_main("bootstrap", sys.argv[1:]))
