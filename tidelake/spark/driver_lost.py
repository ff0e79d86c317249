"""Whether a command failed because its Spark driver JVM went away (its heap exhausted, killed):
py4j then fails every call, even str() of the Java error, so the command ends in one line naming
it instead of a traceback of a dead gateway. Owner: the CLI's error line (tidelake.cli.main)."""

from __future__ import annotations

DRIVER_LOST = ("the Spark driver JVM went away (Spark's log above says why, often "
               "java.lang.OutOfMemoryError: Java heap space); for a local session give it more heap, e.g. "
               "PYSPARK_SUBMIT_ARGS='--driver-memory 4g pyspark-shell'")


def driver_lost(exc: BaseException) -> bool:
    """True when `exc` or an exception it came from is py4j's lost connection to the JVM, or a
    Java error that can no longer be read from it (py4j.protocol, by class name: no import)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__name__
        if name == "Py4JNetworkError":
            return True
        if name in ("Py4JJavaError", "Py4JError") and not _readable(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _readable(exc: BaseException) -> bool:
    try:
        str(exc)
    except Exception:  # noqa: BLE001 - py4j asks the dead JVM for the text
        return False
    return True
