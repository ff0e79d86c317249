"""Headless Chromium over its DevTools pipe: a page evaluates, a pointer click reaches its handler,
a screenshot is a PNG of the window, and closing leaves no browser process behind."""

from __future__ import annotations

import base64
import urllib.parse

import psutil

from tidelake.demos.devtools_pipe import DevToolsPipe

PAGE = ("<button id=b style='position:absolute;left:10px;top:10px;width:100px;height:40px'"
        " onpointerup=\"document.title='clicked'\">b</button>")


def test_a_page_evaluates_takes_a_pointer_click_and_draws(tmp_path):
    browser = DevToolsPipe(tmp_path / "chromium.log", width=640, height=300)
    pid = browser.process.pid
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Page.enable", session=session)
        browser.call("Page.navigate", {"url": "data:text/html," + urllib.parse.quote(PAGE)}, session)

        def evaluate(expression):
            return browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                session)["result"].get("value")

        for _ in range(100):
            if evaluate("!!document.getElementById('b')"):
                break
        assert evaluate("6 * 7") == 42
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            browser.call("Input.dispatchMouseEvent", {"type": kind, "x": 50, "y": 30, "button": "left",
                                                      "clickCount": 1}, session)
        assert evaluate("document.title") == "clicked"
        png = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"}, session)["data"])
        assert png.startswith(b"\x89PNG")
        assert int.from_bytes(png[16:20], "big") == evaluate("window.innerWidth")  # IHDR width: the window
    finally:
        browser.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
