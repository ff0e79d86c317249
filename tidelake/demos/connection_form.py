"""The tidb_pd connection form in the Airflow UI, as headless Chromium draws it: a connection of
that type (made through the REST API) opened in the UI's edit dialog, which must show the type by
its hook name and the fields the provider declares (provider_info: the relabelled PD host and port,
then, its section clicked open, the extra fields); a screenshot of the open form is kept.
Owner: tidelake.demos.integration (the installed-wheel run).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path

from tidelake.demos.airflow_api import AirflowApi
from tidelake.demos.devtools_pipe import DevToolsPipe
from tidelake.demos.supervisor import StageFailed

CONNECTION_ID = "tidb_pd_demo"
TOKEN_COOKIE = "_token"  # where the UI keeps its JWT (Airflow's simple auth manager login page sets it)
# What the open form must show: the type's hook name and the relabelled standard fields, then
# (the dialog shows one section at a time) the extra fields.
STANDARD = ("TiDB PD", "PD host", "PD port")
EXTRAS = ("More PD endpoints", "Cluster name", "TLS CA", "TLS client certificate", "TLS client key")
EXTRA_VALUES = {"pd_endpoints": "pd-1.pd.tidb:2379,pd-2.pd.tidb:2379", "cluster": "demo",
                "tls_ca": "/etc/tidelake/tls/ca.pem", "tls_cert": "/etc/tidelake/tls/client.pem",
                "tls_private_key": "/etc/tidelake/tls/client-key.pem"}
EDIT_BUTTON = 'button[aria-label="Edit Connection"]'
# The sections open and close animated: the screenshot waits until no finite animation runs.
SETTLED = ("document.getAnimations().filter(a => a.playState === 'running'"
           " && a.effect?.getComputedTiming().iterations !== Infinity).length === 0")
# The centre of the section's button: the accordion opens on a real pointer click, not on .click()
EXTRA_FIELDS_BUTTON = ("(() => { const b = Array.from(document.querySelectorAll('[role=dialog] button'))"
                       ".find(b => b.innerText.trim() === 'Extra Fields'); if (!b) return null;"
                       " const r = b.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")


def check_connection_form(api: AirflowApi, pd: str, screenshot: Path, log: Path, timeout_s: float = 90.0) -> list[str]:
    """Open the form of a tidb_pd connection to `pd` and save its screenshot; the expected texts
    it showed (a missing one fails the stage, naming the screenshot)."""
    host, port = pd.rsplit(":", 1)
    api.put_connection({"connection_id": CONNECTION_ID, "conn_type": "tidb_pd", "host": host, "port": int(port),
                        "extra": json.dumps(EXTRA_VALUES)})
    browser = DevToolsPipe(log, height=1300)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Storage.setCookies", {"cookies": [{"name": TOKEN_COOKIE, "value": api.token(),
                                                         "url": api.base_url + "/"}]})
        browser.call("Page.navigate", {"url": f"{api.base_url}/connections"}, session)

        def evaluate(expression: str) -> object:
            return browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                session)["result"].get("value")

        def missing(expected: tuple[str, ...]) -> list[str]:
            text = str(evaluate("document.querySelector('[role=dialog]')?.innerText ?? ''"))
            return [item for item in expected if item not in text]

        def form_shows(expected: tuple[str, ...]) -> None:
            _until(lambda: not missing(expected), timeout_s,
                   lambda: "the form did not show " + ", ".join(map(repr, missing(expected))), screenshot, browser, session)

        _until(lambda: evaluate(f"!!document.querySelector('{EDIT_BUTTON}')"), timeout_s,
               lambda: "the connections page listed no connection to edit", screenshot, browser, session)
        evaluate(f"document.querySelector('{EDIT_BUTTON}').click()")
        form_shows(STANDARD)
        x, y = evaluate(EXTRA_FIELDS_BUTTON)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            browser.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
                         session)
        form_shows(EXTRAS)
        _until(lambda: evaluate(SETTLED), timeout_s, lambda: "the form's sections kept animating", screenshot,
               browser, session)
        _screenshot(browser, session, screenshot)
        return [*STANDARD, *EXTRAS]
    finally:
        browser.close()


def _until(condition: Callable[[], object], timeout_s: float, failure: Callable[[], str], screenshot: Path,
           browser: DevToolsPipe, session: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            _screenshot(browser, session, screenshot)
            raise StageFailed("connection form", failure(), screenshot)
        time.sleep(0.5)


def _screenshot(browser: DevToolsPipe, session: str, path: Path) -> None:
    path.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"}, session)["data"]))
