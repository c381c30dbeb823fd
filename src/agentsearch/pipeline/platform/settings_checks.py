"""A setting's environment variable, and the checks of ``agentsearch.pipeline.platform.settings`` whose messages name
it.

Usage::

    env_name("answer_llm_timeout_s")                  # "AGENTSEARCH_ANSWER_LLM_TIMEOUT_S"
    positive_seconds("2.5", env_name("job_deadline_s"))  # 2.5; ValueError naming the variable when not a duration
    settings_problem(exc)                             # one line per bad setting, for the CLI
"""

from __future__ import annotations

import math

from pydantic import SecretStr, ValidationError

ENV_PREFIX = "AGENTSEARCH_"


def env_name(field: str) -> str:
    """The environment variable of the setting ``field``: ``answer_llm_timeout_s`` -> ``AGENTSEARCH_ANSWER_...``."""
    return ENV_PREFIX + field.upper()


def positive_seconds(value: object, name: str) -> float:
    """``value`` (a number, or a variable's text) as a finite number of seconds above 0; ValueError naming ``name``
    otherwise."""
    try:
        if isinstance(value, bool):  # float(True) is 1.0: a flag is not a duration
            raise TypeError
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}") from None
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
    if seconds <= 0:
        raise ValueError(f"{name} must be a number of seconds above 0, not {value!r}")
    return seconds


def settings_problem(error: ValidationError) -> str:
    """What is wrong with the settings, one line per setting, each named by its environment variable."""
    lines = []
    for problem in error.errors():
        message = problem["msg"].removeprefix("Value error, ")
        name = env_name(str(problem["loc"][0])) if problem["loc"] else ""
        lines.append(message if not name or name in message else f"{name}: {message}")
    return "\n".join(lines)


def flower_credentials(secret: SecretStr | None) -> list[str]:
    """The ``user:password`` pairs of ``AGENTSEARCH_FLOWER_BASIC_AUTH`` that Flower accepts; ValueError says what
    is wrong with the setting."""
    if secret is None or not secret.get_secret_value().strip():
        raise ValueError("AGENTSEARCH_FLOWER_BASIC_AUTH is not set (user:password)")
    pairs = [p.strip() for p in secret.get_secret_value().split(",")]
    for number, pair in enumerate(pairs, start=1):
        user, colon, password = pair.partition(":")
        # Never echo the value: it is a password.
        if not (user and colon and password):
            raise ValueError(f"AGENTSEARCH_FLOWER_BASIC_AUTH entry {number} is not user:password "
                             "(both non-empty; entries separated by commas)")
    return pairs
