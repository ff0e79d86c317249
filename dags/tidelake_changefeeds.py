"""The DAGs of every changefeed TIDELAKE_CONFIG names: a thin shell over the DAG factory.

A deployment of one changefeed writes `changefeed_dags("orders_feed")` instead
(docs/operations.md#install-into-an-existing-airflow).
"""

from tidelake.orchestration.airflow.dag_factory import changefeed_dags
from tidelake.orchestration.changefeeds import load_changefeeds

for feed in load_changefeeds():
    changefeed_dags(feed.config.changefeed_id)
