"""Named failpoints: the places where a crash or an I/O error matters, armed by tests and the nemesis.

As in pingcap/failpoint and tikv's fail-rs, production code calls `failpoint(name, owner)` at such a
place. Nothing happens unless an action is armed for `name`; then the action runs right there and
may raise (a simulated crash, a lake write error). `owner` is the object passing the point, so an
action can aim at one instance (one puller's lander) while others pass untouched. Unarmed, a
failpoint costs one dict lookup.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

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
