"""The committed crds/*.yaml are exactly what `celkeeper crds --out crds` generates."""

from __future__ import annotations

from pathlib import Path

from celkeeper.crds import static_crd_files

CRDS_DIR = Path(__file__).resolve().parents[2] / "crds"
FIX = "regenerate them with: .venv/bin/python -m celkeeper crds --out crds   (then commit crds/)"


def test_committed_crds_match_the_generator() -> None:
    expected = static_crd_files()
    committed = {p.name: p.read_text(encoding="utf-8") for p in sorted(CRDS_DIR.glob("*.yaml"))}
    missing = sorted(set(expected) - set(committed))
    extra = sorted(set(committed) - set(expected))
    drifted = sorted(name for name in set(expected) & set(committed) if committed[name] != expected[name])
    problems = []
    if missing:
        problems.append(f"missing in crds/: {', '.join(missing)}")
    if extra:
        problems.append(f"not made by the generator (remove them): {', '.join(extra)}")
    if drifted:
        problems.append(f"differ from the generator: {', '.join(drifted)}")
    assert not problems, "crds/ is out of date: " + "; ".join(problems) + f"; {FIX}"
