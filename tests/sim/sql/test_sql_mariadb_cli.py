"""The Debian MariaDB command-line client, typed into interactively (tmux), against the SQL front:
the handshake and its connect-time queries, the prompt's database, DDL, DML, a transaction and
the error lines a user sees. `make test` installs mariadb-client and tmux (Makefile target
`sql-clients`)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time

import pytest

pytestmark = pytest.mark.skipif(not (shutil.which("mariadb") and shutil.which("tmux")),
                                reason="needs Debian's mariadb-client and tmux (make sql-clients)")


class Terminal:
    """One detached tmux session running a command; keys in, screen text out."""

    def __init__(self, command: list[str]) -> None:
        self.name = f"tidelake-sql-{os.getpid()}-{time.monotonic_ns()}"
        # the pane outlives the client so its last words (and exit status) can still be read
        shell = " ".join(shlex.quote(c) for c in command) + "; echo \"[exit $?]\"; sleep 60"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "200", "-y", "60", shell], check=True)

    def type(self, line: str) -> None:
        # tmux reads an argument ending in ';' as a command separator: a trailing space keeps it text
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", line + " "], check=True)
        subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-2000", "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, text: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} did not appear; the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def test_an_interactive_mariadb_session(server):
    term = Terminal(["mariadb", "-h", "127.0.0.1", "-P", str(server.port), "-u", "root", "--prompt", "sim [\\d]> "])
    try:
        term.wait_for("sim [(none)]> ")
        term.type("CREATE DATABASE cli; USE cli;")
        term.wait_for("sim [cli]> ")
        term.type("CREATE TABLE pets (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(20), born DATE);")
        term.type("INSERT INTO pets (name, born) VALUES ('Tom', '2020-01-02'), ('Kit', NULL);")
        term.wait_for("Query OK, 2 rows affected")
        term.type("BEGIN; UPDATE pets SET name = 'Tim' WHERE id = 1; ROLLBACK;")
        term.type("SELECT id, name, born FROM pets ORDER BY id;")
        screen = term.wait_for("2 rows in set")
        assert "| Tom  | 2020-01-02 |" in screen and "| Kit  | NULL       |" in screen
        term.type("INSERT INTO pets VALUES (1, 'Dup', NULL);")
        term.wait_for("ERROR 1062 (23000): Duplicate entry '1' for key 'pets.PRIMARY'")
        term.type("SELEC 1;")
        term.wait_for("ERROR 1064 (42000): You have an error in your SQL syntax")
        term.type("SHOW CREATE TABLE pets\\G")
        term.wait_for("PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */")
        term.type("exit")
        term.wait_for("Bye")
        term.wait_for("[exit 0]")
    finally:
        term.close()
    assert server.tidb.select_all("cli", "pets")[0]["name"] == "Tom"
