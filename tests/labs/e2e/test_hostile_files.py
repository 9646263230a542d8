"""Issue 30's acceptance for hostile input files: `sark-node plan campaign.yaml` and `sark-node submit
campaign.yaml`, as README writes them (default flags, a fresh HOME), on a campaign whose model, dataset
or tokenizer is hostile, exit 2 with the field, the file, the stage and the cause or limit, and no
traceback; nothing is started, stored or written (the check runs in a child before any swarm).

Each file is the issue's own: random bytes as a model; a ShareGPT file of 200,000 nested lists
(400 KB); a tokenizer with no ordinary token; a tokenizer whose pre-tokenizer regex backtracks past
Oniguruma's retry limit (the library panics); a 69 MB ShareGPT file; a 2,000,000-token tokenizer.
Each case's files are written once for the module (the two largest take seconds to build) and
hard-linked into each test's own folder, where `plan` or `submit` runs.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Callable
from pathlib import Path

import pytest
from kit import zygote
from kit.bpe import tokenizer_json
from kit.procs import SARK

GENERATE = """name: hostile
jobs:
  - endpoint: {{model: served}}
    generate:
      {data}
      tokenizer: {tokenizer}
      max_new_tokens: 8
"""
SHAREGPT = "dataset: {{sharegpt: {name}}}"
RANDOM = "dataset: {random: {input_tokens: {mean: 16}, output_tokens: {mean: 8}}}"
ALPHABET = string.ascii_letters + string.digits


def _tokenizer(**changes: object) -> bytes:
    return json.dumps(json.loads(tokenizer_json()) | changes).encode()


def _random_model(folder: Path) -> str:
    (folder / "random.onnx").write_bytes(os.urandom(100_000))
    (folder / "campaign.yaml").write_text(
        "name: noise\nmodel:\n  path: random.onnx\njobs:\n  - compute_unit: CPU (ONNX)\n"
    )
    return "model.path: random.onnx: inspect failed: not a valid ONNX protobuf"


def _nested(folder: Path) -> str:
    (folder / "nested.json").write_text("[" * 200_000 + "]" * 200_000)
    (folder / "tok.json").write_bytes(tokenizer_json())
    _campaign(folder, SHAREGPT.format(name="nested.json"), "tok.json")
    return "jobs[0].generate.dataset.sharegpt: nested.json: values nested deeper than the JSON reader follows"


def _no_plain_token(folder: Path) -> str:
    base = json.loads(tokenizer_json())
    (folder / "special.json").write_bytes(
        _tokenizer(model=base["model"] | {"vocab": {"<|endoftext|>": 0}, "merges": []})
    )
    _campaign(folder, RANDOM, "special.json")
    return "jobs[0].generate.dataset.random: special.json: no ordinary token"


def _backtracking(folder: Path) -> str:
    split = {"type": "Split", "pattern": {"Regex": r"(\S+\s*)*\d$"}, "behavior": "Isolated", "invert": False}
    (folder / "regex.json").write_bytes(_tokenizer(pre_tokenizer=split))
    _campaign(folder, RANDOM, "regex.json")
    return "regex.json: encoding: the tokenizers library panicked (Onig: Regex search error: retry-limit"


def _large_sharegpt(folder: Path) -> str:
    turns = [{"from": "human", "value": "x" * 6_000}, {"from": "gpt", "value": "y"}]
    (folder / "large.json").write_text(json.dumps([{"conversations": turns}] * 11_500))  # 69,966,000 bytes
    (folder / "tok.json").write_bytes(tokenizer_json())
    _campaign(folder, SHAREGPT.format(name="large.json"), "tok.json")
    return "large.json: 70 MB (69966000 bytes), over the limit of 67 MB (67108864 bytes)"


def _huge_vocabulary(folder: Path) -> str:
    vocab = dict(zip(map(_name, range(2_000_000)), range(2_000_000), strict=True)) | {"[UNK]": 2_000_000}
    body: dict[str, object] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    (folder / "huge.json").write_text(json.dumps(body, separators=(",", ":")))  # 28.6 MB: under the size cap
    _campaign(folder, RANDOM, "huge.json")
    return "jobs[0].generate.tokenizer: huge.json: 2000001 tokens, over the limit of 1048576 tokens"


def _name(index: int) -> str:
    text = ""
    while True:
        index, digit = divmod(index, len(ALPHABET))
        text = ALPHABET[digit] + text
        if not index:
            return text


def _campaign(folder: Path, data: str, tokenizer: str) -> None:
    (folder / "campaign.yaml").write_text(GENERATE.format(data=data, tokenizer=tokenizer))


CASES: dict[str, Callable[[Path], str]] = {
    "random-bytes model": _random_model,
    "nested ShareGPT": _nested,
    "no ordinary token": _no_plain_token,
    "backtracking regex": _backtracking,
    "69 MB ShareGPT": _large_sharegpt,
    "2,000,000 tokens": _huge_vocabulary,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, str]]:
    """Each case's folder and expected problem, built the first time a test asks for it."""
    made: dict[str, tuple[Path, str]] = {}

    def build(case: str) -> tuple[Path, str]:
        if case not in made:
            folder = tmp_path_factory.mktemp("hostile")
            made[case] = folder, CASES[case](folder)
        return made[case]

    return build


@pytest.mark.parametrize("case", list(CASES))
# `submit` in the default suite; `plan` vets a campaign in the same child (the lab tier: `-m slow`).
@pytest.mark.parametrize("command", [pytest.param("plan", marks=pytest.mark.slow), "submit"])
def test_a_hostile_file_is_exit_2_naming_it_and_nothing_runs(
    tmp_path: Path, case: str, command: str, built: Callable[[str], tuple[Path, str]]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    source, expected = built(case)
    for file in source.iterdir():  # the case's own files, in a folder this command alone runs in
        os.link(file, tmp_path / file.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_"))} | {"HOME": str(home)}
    done = zygote.run(
        [*SARK, command, "campaign.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out, out
    assert "panicked at" not in out, out  # the Rust panic's own report stays in the child
    assert out.startswith("error: campaign.yaml is not a valid campaign:\n"), out
    assert len(out.splitlines()) == 2, out  # the heading and the one problem
    assert expected in out, out
    assert not (tmp_path / "sark-results").exists()  # nothing ran
    assert not list(home.rglob("campaigns.sqlite"))  # nothing was stored
