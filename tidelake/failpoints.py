"""Named failpoints: the places where a crash or an I/O error matters, armed by tests and the nemesis.

Production code calls `failpoint(name, owner)` there, as in pingcap/failpoint and tikv's fail-rs;
unarmed it costs one dict lookup. TIDELAKE_FAILPOINTS arms a process from its environment in a
subset of fail-rs's syntax (docs/nemesis.md#arming-a-process-from-its-environment-tidelake_failpoints),
refused whole when malformed.
Owner: the tests and the nemesis arm them; product code only names them.

More: docs/internals.md#failpoints.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from tidelake.errors import InputError

log = logging.getLogger(__name__)

Action = Callable[[str, object], None]

_actions: dict[str, Action] = {}
_mu = threading.Lock()


def failpoint(name: str, owner: object = None) -> None:
    """Run the action armed for `name`, if any; it may raise into the caller."""
    action = _actions.get(name)
    if action is not None:
        action(name, owner)


def arm(names: Iterable[str], action: Action) -> None:
    with _mu:
        for name in names:
            _actions[name] = action


def disarm(names: Iterable[str]) -> None:
    with _mu:
        for name in names:
            _actions.pop(name, None)


@contextmanager
def armed(names: Iterable[str], action: Action) -> Iterator[None]:
    """Arm `action` at `names` for the duration of the block."""
    names = tuple(names)
    arm(names, action)
    try:
        yield
    finally:
        disarm(names)


ENV = "TIDELAKE_FAILPOINTS"
TASKS = ("off", "kill", "sleep")
_ACTION = re.compile(r"(?:(\d+)\*)?([a-z]+)(?:\((\d+)\))?")
_NAME = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")


@dataclass
class _Step:
    task: str
    arg: int  # sleep: milliseconds
    left: int | None  # passes this step still takes; None: no count, it never runs out


class EnvChain:
    """One failpoint's chain of actions from the environment; passes are counted under a lock, so
    threads passing the point at once take distinct passes."""

    def __init__(self, steps: list[_Step]) -> None:
        self._steps = steps
        self._mu = threading.Lock()

    def __call__(self, name: str, owner: object) -> None:
        with self._mu:
            step = next((s for s in self._steps if s.left is None or s.left > 0), None)
            if step is None:
                return
            if step.left is not None:
                step.left -= 1
        if step.task == "sleep":
            time.sleep(step.arg / 1000)
        elif step.task == "kill":
            kill_self(name)


def kill_self(name: str) -> None:
    """SIGKILL this process at failpoint `name`: no handler, no flush, no cleanup runs (one line on
    stderr first, written unbuffered, says where)."""
    os.write(2, f"failpoint {name}: kill (SIGKILL of pid {os.getpid()})\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)


def parse_env(value: str) -> dict[str, EnvChain]:
    """The chains of a TIDELAKE_FAILPOINTS value; InputError naming the first bad part."""
    chains: dict[str, EnvChain] = {}
    for entry in (e.strip() for e in value.split(";")):
        if not entry:
            continue
        name, sep, actions = (part.strip() for part in entry.partition("="))
        if not sep or not _NAME.fullmatch(name):
            raise InputError(f"{ENV}: {entry!r} is not name=actions (e.g. lander.after_changelog=2*off->kill)")
        if name in chains:
            raise InputError(f"{ENV}: failpoint {name} is armed twice")
        chains[name] = EnvChain([_parse_step(name, a.strip()) for a in actions.split("->")])
    return chains


def _parse_step(name: str, text: str) -> _Step:
    match = _ACTION.fullmatch(text)
    task = match.group(2) if match else ""
    if match is None or task not in TASKS:
        raise InputError(f"{ENV}: {name}: action {text!r} is not [cnt*]task with task one of off, kill, sleep(ms)"
                         + (" (fail-rs's p% frequency is not supported)" if "%" in text else ""))
    arg = match.group(3)
    if (task == "sleep") != (arg is not None):
        raise InputError(f"{ENV}: {name}: action {text!r}: " + ("sleep takes milliseconds, e.g. sleep(100)"
                                                                 if task == "sleep" else f"{task} takes no argument"))
    count = match.group(1)
    return _Step(task, int(arg or 0), None if count is None else int(count))


def check_env_names(known: Iterable[str], command: str) -> None:
    """Refuse environment-armed names that `command` never passes (a typo would never strike), and
    log what is armed: a process that may SIGKILL itself says so first."""
    known = tuple(known)
    unknown = [n for n in _from_env if n not in known]
    if unknown:
        raise InputError(f"{ENV}: {', '.join(unknown)} is not a failpoint of {command} (known: {', '.join(known)})")
    if _from_env:
        log.warning("failpoints armed from %s: %s", ENV, os.environ.get(ENV, ""))


def _arm_from(environ: Mapping[str, str]) -> dict[str, EnvChain]:
    chains = parse_env(environ.get(ENV, ""))  # everything parsed before anything is armed
    with _mu:
        _actions.update(chains)
    return chains


_from_env = _arm_from(os.environ)
