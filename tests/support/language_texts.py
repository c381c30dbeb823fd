"""Texts to compare two language detectors on: questions in a dozen languages and scripts, strings with few or no
letters, and the sample corpus's documents."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
QUESTIONS = [
    "¿Cuáles son los ingresos del cuarto trimestre?", "What was Northwind Energy's revenue in Q4 2025?",
    "Wie hoch war der Umsatz im vierten Quartal?", "Quel est le chiffre d'affaires du quatrième trimestre ?",
    "Qual è stato il fatturato dell'anno?", "Какова была выручка компании?", "Hoeveel omzet had het bedrijf?",
    "Jaki był przychód w czwartym kwartale?", "ما هي إيرادات الربع الرابع؟", "מה היו ההכנסות ברבעון?",
    "Πόσα ήταν τα έσοδα;", "Mikä oli liikevaihto?", "Hur stor var omsättningen?", "ok", "Northwind Q4",
    "東京の天気はどうですか", "2025 Q4 %", "",
]


def sample_documents() -> list[str]:
    """The text of every document of the sample corpus."""
    return [json.loads(line)["text"] for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
