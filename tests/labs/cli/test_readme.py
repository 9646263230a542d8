"""README's set-up commands and the files it points at (issue 30).

A fresh machine gets exactly two set-up commands, the main one and the test one, each the line after
its marker's fence (as `.ci/run` reads the test command); the main one states its system packages
by running `bash .ci/deps build` first, which installs them (run here for real where apt-get is, as
root). After them comes the fast tier's command: the test command's own pytest line, on `tests/unit`
alone (issue 48). Every repository file README names by a path ending in `.md` exists (it once
pointed at `notes/libp2p.md`, which lives outside the repository).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
COMPILER_PACKAGES = ("build-essential", "libgmp-dev")


def _command(marker: str) -> str:
    """The line after the marker's code fence, as `.ci/run` reads it with awk."""
    lines = README.splitlines()
    at = lines.index(f"<!-- {marker} -->")
    assert lines[at + 1] == "```bash"
    return lines[at + 2]


def test_a_fresh_machine_gets_exactly_two_set_up_commands() -> None:
    quick_start = README.split("## Quick start (fresh machine)")[1].split("\n## ")[0]
    assert re.findall(r"<!-- (\S+) -->", quick_start) == ["main-command", "test-command", "fast-test-command"]
    assert quick_start.count("```bash") == 3
    set_up = [line for line in quick_start.splitlines() if "python3 -m venv .venv" in line]
    assert set_up == [_command("main-command"), _command("test-command")]
    run = subprocess.run(
        ["awk", "/<!-- test-command -->/{getline; getline; print; exit}", "README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == _command("test-command")


def test_the_fast_tier_is_the_test_commands_pytest_on_the_unit_tests_alone() -> None:
    pytest_line = _command("test-command").split(" && ")[-1]
    assert pytest_line == ".venv/bin/python -m pytest -n 3 --dist loadfile"
    assert _command("fast-test-command") == pytest_line + " tests/unit"
    assert (ROOT / "tests" / "unit").is_dir()


def test_the_main_command_installs_its_compiler_packages_first() -> None:
    main = _command("main-command")
    assert main.startswith("bash .ci/deps build && python3 -m venv .venv && ")
    assert main.endswith(".venv/bin/sark-node submit examples/campaign.yaml")
    deps = (ROOT / ".ci" / "deps").read_text()
    build = re.search(r'if \[ "\$mode" = build \]; then\n\s+packages="([^"]+)"', deps)
    assert build is not None
    assert build.group(1).split() == list(COMPILER_PACKAGES)
    quick_start = README.split("<!-- main-command -->")[0].split("## Quick start (fresh machine)")[1]
    assert all(f"**{package}**" in quick_start for package in COMPILER_PACKAGES)


@pytest.mark.skipif(
    shutil.which("apt-get") is None or shutil.which("dpkg") is None or os.geteuid() != 0,
    reason="`.ci/deps build` installs with apt-get as root; elsewhere it only names the packages",
)
def test_the_main_commands_first_step_leaves_the_compiler_packages_installed() -> None:
    step = _command("main-command").split(" && ")[0]
    done = subprocess.run(step, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    subprocess.run(["dpkg", "-s", *COMPILER_PACKAGES], check=True, capture_output=True)


def test_every_markdown_file_readme_names_is_in_the_repository() -> None:
    named = set(re.findall(r"(?<![\w./-])((?:\.{0,2}/)?(?:[\w.-]+/)*[\w.-]+\.md)\b", README))
    assert "docs/libp2p-pitfalls.md" in named
    missing = sorted(name for name in named if not (ROOT / name).is_file())
    assert missing == []
