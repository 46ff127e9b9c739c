"""The confidence table of docs/accuracy.md: per confidence level, how many verdicts were given at it and how many of
them were right, over the simulator's default mix, the generated judgement matrix (synthetic/matrix.py) and the
rendered multi-node cases (tests/rendered). `high` is meant to be right at least 99 % of the time.

    python benchmarks/confidence_table.py            # prints the table
    python benchmarks/confidence_table.py --write    # and replaces it in docs/accuracy.md (between its markers)
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from firstfault.rules_sql.corpus import evaluate_corpus
from firstfault.synthetic.matrix import write_matrix
from firstfault.synthetic.scorecard import CONFIDENCE
from firstfault.synthetic.simulate import attribute_fleet, evaluate, simulate

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "accuracy.md"
BEGIN, END = "<!-- confidence table: benchmarks/confidence_table.py --write -->", "<!-- end of the confidence table -->"
DEFAULT_MIX = {"nodes": 256, "attempts": 500, "days": 7, "seed": 7}  # the default mix of docs/accuracy.md


def scorecards(tmp: Path) -> dict[str, dict]:
    """Set name -> its scorecard."""
    simulate(tmp / "mix", **DEFAULT_MIX)
    write_matrix(tmp / "matrix")
    return {
        "simulator, default mix (500 attempts, seed 7)": evaluate(tmp / "mix", attribute_fleet(tmp / "mix")),
        "judgement matrix (synthetic/matrix.py)": evaluate(tmp / "matrix", attribute_fleet(tmp / "matrix")),
        "rendered multi-node cases (tests/rendered)": evaluate_corpus(REPO / "tests" / "rendered"),
    }


def table(cards: dict[str, dict]) -> str:
    """Markdown: one row per set and a total row, a column per confidence level (right / given, share)."""
    cell = lambda c: f"{c['right']} / {c['verdicts']}" + (f" ({100 * c['right'] / c['verdicts']:.1f} %)" if c["verdicts"] else "")  # noqa: E731
    rows = ["| set | " + " | ".join(CONFIDENCE) + " |", "|---|" + "---|" * len(CONFIDENCE)]
    total = {level: {"verdicts": 0, "right": 0} for level in CONFIDENCE}
    for name, card in cards.items():
        for level in CONFIDENCE:
            for key in ("verdicts", "right"):
                total[level][key] += card["by_confidence"][level][key]
        rows.append(f"| {name} | " + " | ".join(cell(card["by_confidence"][level]) for level in CONFIDENCE) + " |")
    rows.append("| **all** | " + " | ".join(cell(total[level]) for level in CONFIDENCE) + " |")
    return "\n".join(rows)


def replace_in_doc(text: str, new_table: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: no confidence table markers")
    return pattern.sub(lambda _: f"{BEGIN}\n{new_table}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"replace the table in {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="firstfault-confidence-") as tmp:
        new_table = table(scorecards(Path(tmp)))
    print(new_table)
    if args.write:
        DOC.write_text(replace_in_doc(DOC.read_text(encoding="utf-8"), new_table), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
