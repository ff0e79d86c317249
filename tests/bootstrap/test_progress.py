"""TableProgress lines: what a data engineer reads while a table is bootstrapped."""

import io
import re
import time

from tidelake.bootstrap.progress import TableProgress


def test_progress_prints_at_most_once_per_interval_and_counts_every_range():
    quiet, chatty = io.StringIO(), io.StringIO()
    for out, interval_s in ((quiet, 3600), (chatty, 0)):
        progress = TableProgress("shop.orders", ranges=3, interval_s=interval_s, out=out)
        for _ in range(3):
            progress.add(rows=100, nbytes=2_000_000, ranges_done=1)
    assert quiet.getvalue() == ""
    lines = chatty.getvalue().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"bootstrap shop\.orders: reading; regions 3/3, 300 rows, 6\.0 MB, \S+ MB/s, \d+ rows/s",
                        lines[-1])


def test_the_final_line_rates_the_read_alone_when_the_write_came_after_it():
    out = io.StringIO()
    progress = TableProgress("shop.orders", ranges=1, interval_s=3600, out=out)
    progress.add(rows=5501, nbytes=1_000_000, ranges_done=1)
    progress.read_done()
    time.sleep(0.5)  # the Delta write
    progress.finish("replica written at checkpoint 7 (local)")
    line = out.getvalue()
    match = re.fullmatch(r"bootstrap shop\.orders: replica written at checkpoint 7 \(local\); regions 1/1, 5501 rows, "
                         r"1\.0 MB read in \S+ s, \S+ MB/s, (\d+) rows/s, written in (\S+) s\n", line)
    assert match, line
    assert int(match.group(1)) > 5501 / 0.5 and float(match.group(2)) >= 0.5


def test_the_final_line_says_so_when_read_and_write_were_one_job():
    out = io.StringIO()
    progress = TableProgress("shop.orders", ranges=2, interval_s=3600, out=out)
    progress.set_totals(rows=10, nbytes=1000, ranges_done=2)
    progress.finish("replica written at checkpoint 7 (spark)")
    assert out.getvalue().startswith("bootstrap shop.orders: replica written at checkpoint 7 (spark); read and written "
                                     "together; regions 2/2, 10 rows")
