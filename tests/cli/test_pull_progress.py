"""`tidelake pull`'s progress line reports the capture in rows and in bytes
(tidelake.cli.pull_command, from tidelake.capture.changefeed.puller_runner.Progress)."""

from tidelake.capture.changefeed.puller_runner import Progress
from tidelake.cli.pull_command import _progress_line


def test_the_progress_line_gives_rows_and_mib_with_their_rates():
    progress = Progress(elapsed_s=10.0, tables=3, rows=1000, rows_per_s=100.0, bytes=3 * 2**20, mib_per_s=0.25,
                        ddl_lag_s=0.5, table_lag_s={5: 1.2, 6: 0.1}, buffered_bytes=2**21)
    assert _progress_line("cf", progress) == (
        "pull cf: 3 tables, 1000 rows (100/s), 3.0 MiB (0.25 MiB/s), max lag 1.2s (table 5), DDL lag 0.5s, "
        "buffer 2.0 MiB")
