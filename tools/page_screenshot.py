"""Draw the Replication page of a changefeed's lake with headless Chromium, for the README.

    python tools/page_screenshot.py --config .tidelake/airflow-demo/changefeed.toml

renders the page exactly as the Airflow plugin serves it (tidelake.orchestration.page_report and
plugin_views) from the lake alone, and writes docs/img/replication-page.png. Run it after
`make demo` so the picture shows a real run.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tidelake.config import load_config
from tidelake.errors import InputError
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.page_report import page_report
from tidelake.orchestration.plugin_views import render_page

OUT = Path(__file__).resolve().parent.parent / "docs" / "img" / "replication-page.png"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the changefeed's config (TOML)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"PNG to write (default {OUT})")
    parser.add_argument("--size", default="1400,1000", help="browser window WIDTH,HEIGHT in px")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: headless Chromium is needed: apt-get install chromium", file=sys.stderr)
        return 2
    try:
        feed = Changefeed(args.config, load_config(args.config), primary=True)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "replication.html"
        page.write_text(render_page([page_report(feed)]), encoding="utf-8")
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--force-color-profile=srgb", f"--window-size={args.size}", f"--screenshot={args.out.resolve()}",
             page.as_uri()],
            check=True, capture_output=True, timeout=120,
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
