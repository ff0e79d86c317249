"""Error types that reach users as one clear line instead of a traceback.
Owner: the CLI prints them and exits with their code; Airflow tasks fail on them.
"""

# sysexits.h EX_TEMPFAIL: nothing was done because another writer or a barrier holds the work, or
# the lake's store has no room; the same command later may (`tidelake merge`, `tidelake maintenance`,
# a held lease, a full disk).
EXIT_TRY_LATER = 75


class TidelakeError(Exception):
    """An error a user can act on; the CLI prints it as one line and exits with `exit_code`."""

    exit_code = 1


class InputError(TidelakeError):
    """Bad input (bytes, files, arguments, config): exit code 2, like argparse usage errors."""

    exit_code = 2


class StoreUnreachable(InputError):
    """The lake's store did not answer (refused, reset, timed out, a 5xx): one line like any bad
    input, but it may come back, so an Airflow task retries it (tidelake.orchestration.airflow.task_errors)."""


class StopRequested(TidelakeError):
    """A stop (SIGTERM, SIGINT) ended a wait or a retry: the caller winds down, it did not fail."""

    exit_code = 0
