"""tidelake.stop_signals: the first signal sets the stop event, a second abandons the step with
KeyboardInterrupt, the previous handlers come back after the block, and off the main thread no
handler is installed."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tidelake.stop_signals import stop_on_signals


def test_first_signal_stops_second_abandons_and_the_old_handler_returns():
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals((signal.SIGTERM,)) as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before


def test_off_the_main_thread_no_handler_is_installed():
    before = signal.getsignal(signal.SIGINT)
    seen = []

    def worker() -> None:
        with stop_on_signals() as stop:
            seen.append((signal.getsignal(signal.SIGINT), stop.is_set()))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [(before, False)]
