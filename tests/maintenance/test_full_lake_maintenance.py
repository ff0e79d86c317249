"""`tidelake maintenance` on a lake whose filesystem is full, for real (a tmpfs filled by a ballast
file, tests/lake/tiny_fs.py): one line naming the cause, exit 75, nothing touched; grown, the
same command does its work (here: compacts the merge log). The steps run here (changelog and
merge-log upkeep) are delta-rs's; OPTIMIZE and VACUUM (Spark) are skipped, so no Spark session is started."""

from __future__ import annotations

from deltalake import DeltaTable
from merge.lake_fixtures import FedLake

from tests.lake.tiny_fs import fill, grow, tiny_tmpfs
from tidelake.cli import main, maintenance_command, merge_command
from tidelake.errors import EXIT_TRY_LATER


def test_maintenance_on_a_full_filesystem_is_one_line_and_touches_nothing(tmp_path, monkeypatch, capsys):
    for command in (merge_command, maintenance_command):
        monkeypatch.setattr(command, "get_session", lambda *args, **kwargs: None)
        monkeypatch.setattr(command, "release_session", lambda session: None)
    with tiny_tmpfs(tmp_path / "mnt", "4m") as mnt:
        lake = FedLake(str(mnt / "lake"))
        try:
            lake.ddl(lake.up.create_schema("shop"))
            lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk")]))
            with lake.txn() as t:
                for i in range(1, 20):
                    t.put("shop", "orders", {"id": i})
            lake.resolve()
            assert main(["merge", "--lake", lake.layout.root]) == 0
            changelog = DeltaTable(lake.layout.changelog).version()
            capsys.readouterr()
            upkeep = ["maintenance", "--lake", lake.layout.root, "--skip", "optimize", "--skip", "vacuum"]

            fill(mnt)
            assert main(upkeep) == EXIT_TRY_LATER
            (line,) = capsys.readouterr().err.splitlines()
            assert line.startswith("tidelake: error: the lake's filesystem is full: OSError: [Errno 28] No space "
                                   "left on device (full trace: "), line
            assert DeltaTable(lake.layout.changelog).version() == changelog

            grow(mnt, "64m")
            assert main(upkeep) == 0
            out = capsys.readouterr().out
            assert f"optimized {lake.layout.root}/_tidelake/merge_log (delta-rs): 1 files compacted" in out, out
        finally:
            lake.close()
