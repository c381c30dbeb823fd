"""What the commands that load the models print of the libraries' output (``src/agentsearch/cli/quiet.py``): errors, and
agentsearch's own warnings; never a library's progress bar, advice or warning. Each case runs in a process of its own:
the switches are process-wide (environment, root logger, warnings)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from agentsearch import cli
from agentsearch.cli import main

REPO = Path(__file__).resolve().parents[3]

LIBRARIES_SPEAK = """
import logging, warnings
from agentsearch.cli.quiet import quiet_libraries
quiet_libraries()
logging.warning("consider pre-processing before quantization")      # ONNX Runtime's, on the root logger
warnings.warn("converting a tensor to a Python boolean", UserWarning)    # torch's, while a model is exported
logging.getLogger("sentence_transformers.models").warning("no pooling layer found")
logging.getLogger("agentsearch.worker").warning("Milvus unreachable, retrying")
logging.getLogger("agentsearch.pipeline.parsing").error("the document could not be read")
for exc in (NotImplementedError("Method not implemented!"), ValueError("segment file is corrupt")):
    try:
        raise exc
    except Exception as raised:
        logging.getLogger("grpc._server").exception("Exception calling application: %s", raised)
"""


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMERS_VERBOSITY", "TQDM_DISABLE",
                                                               "HF_HUB_DISABLE_PROGRESS_BARS")}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**clean, **env}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_errors_and_agentsearch_warnings_are_shown_library_warnings_are_not():
    err = run(LIBRARIES_SPEAK).stderr
    assert "WARNING agentsearch.worker: Milvus unreachable, retrying" in err
    assert "ERROR agentsearch.pipeline.parsing: the document could not be read" in err
    # The embedded Milvus Lite server's real failures are shown, with their traceback.
    assert "ERROR grpc._server: Exception calling application: segment file is corrupt" in err
    assert "ValueError: segment file is corrupt" in err
    for quiet in ("pre-processing", "Python boolean", "pooling layer", "Method not implemented", "NotImplementedError"):
        assert quiet not in err, err


def test_transformers_loads_without_progress_bars_and_with_errors_only():
    code = ("import logging; from agentsearch.cli.quiet import quiet_libraries; quiet_libraries()\n"
            "from transformers.utils import logging as tl\n"
            "print(tl.is_progress_bar_enabled(), logging.getLogger('transformers').getEffectiveLevel())")
    assert run(code).stdout.split() == ["False", str(40)]
    # A variable the user set wins.
    assert run(code, TRANSFORMERS_VERBOSITY="info").stdout.split() == ["False", str(20)]


def test_only_the_commands_that_may_load_the_models_are_quieted(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(cli, "quiet_libraries", lambda: calls.append(True))
    runner = CliRunner()
    runner.invoke(main, ["agents", "list", "--json"])
    assert calls == []
    done = runner.invoke(main, ["ingest", str(tmp_path / "missing.jsonl"), "--collection", "c"])
    assert done.exit_code == 2 and calls == [True]
