"""Skills: what reading a library costs (every SKILL.md parsed and scanned) and what its catalog costs
in a prompt, by number of skills and model window.

    .venv/bin/python bench/skills.py            # 10, 100 and 500 generated skills
    .venv/bin/python bench/skills.py --sizes 50
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from orchestrator.core.tokens import estimate
from orchestrator.skills.catalog import Listed, catalog
from orchestrator.skills.library import Root, discover

BODY = "\n".join(f"{i}. Step {i}: check the inputs, run the command, compare the output with the notes."
                 for i in range(1, 41))  # ~3,300 characters, a typical instructions body


def make(root: Path, n: int) -> None:
    for i in range(n):
        folder = root / f"skill-{i:04}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:04}\ndescription: Handles task family {i}: builds, checks and reports on "
            f"the {i}th kind of artefact. Use when the user mentions artefact {i} or its reports.\n"
            f"license: MIT\nmetadata:\n  author: bench\n---\n{BODY}\n")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="10,100,500")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print("| skills | discover (ms, median) | per skill (ms) | window | catalog chars | catalog tokens | listed |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            make(Path(tmp), n)
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                lib = discover([Root("project", Path(tmp))])
                times.append((time.perf_counter() - start) * 1000)
            assert len(lib.skills) == n
            took = statistics.median(times)
            items = [Listed(s) for s in lib.skills.values()]
            for window in (32_000, 200_000, 1_000_000):
                text = catalog(items, window)
                print(f"| {n} | {took:.1f} | {took / n:.2f} | {window:,} | {len(text):,} | {estimate(text):,} "
                      f"| {text.count('<skill name=')} |")


if __name__ == "__main__":
    main()
