"""Is a difference between two measured configurations above the noise? Paired, interleaved repeats.

A and B are measured alternately (A B, B A, A B, ...: a slow drift of the machine cancels out), each pair
close in time, so what slows the machine down slows both members of a pair alike. For each pair i the
ratio r_i = B_i / A_i; the change is `delta = median(r) - 1` (the median: one disturbed pair barely moves
it). Its band is the distribution-free confidence interval of that median from order statistics (the
sign test's): [r_(k), r_(n+1-k)] with the largest k whose coverage 1 - 2 P(Binomial(n, 1/2) < k) is at
least CONFIDENCE, or k = 1 (the range of the ratios) when even that falls short. For 3 to 7 pairs the band
is the whole range (it holds the true median with 75 % probability for 3 pairs, 87.5 % for 4, 94 % for 5);
from 8 pairs the most extreme pair on each side is left out. `noise` is the band's half-width around the
median, the wider side; a difference is *clear* when |delta| > noise: the symmetric band lies wholly on
one side of "no change". No assumption about the shape of the noise, no random resampling: the same
numbers give the same verdict. What this means in false decisions: docs/tuning.md.
"""

from __future__ import annotations

from math import comb

import numpy as np
from pydantic import BaseModel, Field

CONFIDENCE = 0.90


class Paired(BaseModel):
    """B against A over n interleaved pairs (measured)."""

    n: int = Field(description="pairs the numbers rest on")
    a: float = Field(description="median of A")
    b: float = Field(description="median of B")
    delta: float = Field(description="median of the paired ratios B/A, minus 1")
    noise: float | None = Field(description="half-width of the band around delta (None: fewer than 2 pairs)")
    clear: bool = Field(description="|delta| > noise: the difference is above the noise")


def band_rank(n: int, confidence: float = CONFIDENCE) -> int:
    """k: the band of the median of n values is [k-th smallest, k-th largest]."""
    k = 1
    for j in range(2, n // 2 + 1):
        if 1 - 2 * sum(comb(n, i) for i in range(j)) / 2**n >= confidence:
            k = j
    return k


def paired(a: list[float], b: list[float], confidence: float = CONFIDENCE) -> Paired:
    """Compare B with A, pair by pair (a[i] and b[i] were measured next to each other)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired() needs as many A values as B values, at least one")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.all(xa > 0):
        r = xb / xa
    else:  # a zero or negative A (memory above a baseline can be ~0): differences relative to A's median
        scale = max(abs(float(np.median(xa))), 1e-12)
        r = 1 + (xb - xa) / scale
    m = float(np.median(r))
    noise = None
    if len(r) >= 2:
        k = band_rank(len(r), confidence)
        ordered = np.sort(r)
        noise = float(max(m - ordered[k - 1], ordered[len(r) - k] - m))
    delta = m - 1
    return Paired(
        n=len(r),
        a=float(np.median(xa)),
        b=float(np.median(xb)),
        delta=delta,
        noise=noise,
        clear=noise is not None and abs(delta) > noise,
    )


def spread(values: list[float]) -> float | None:
    """Relative half-width of a set of repeats of one thing: (max - min) / 2 / median; None below 2."""
    if len(values) < 2:
        return None
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    return float((x.max() - x.min()) / 2 / med) if med > 0 else None
