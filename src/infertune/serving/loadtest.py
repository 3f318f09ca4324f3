"""Load generator for any OpenAI-compatible server (transformers serve, vLLM, SGLang, TGI).

Closed loop per concurrency level: C workers each send streaming requests back to back until the level's
request count or time bound is reached. Streaming (SSE) gives each request's time to first token and its
inter-token latencies. Errors, timeouts and non-2xx answers are counted per kind, never dropped; a
refused connection on the first request is bad input (nothing is listening there), one clear error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from infertune.core.errors import UserError
from infertune.core.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    import httpx

DEFAULT_PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


class Percentiles(BaseModel):
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None

    @classmethod
    def of(cls, values: list[float]) -> Percentiles:
        if not values:
            return cls(mean=None, p50=None, p95=None, p99=None)
        a = np.asarray(values, dtype=float)
        return cls(
            mean=float(a.mean()),
            p50=float(np.percentile(a, 50)),
            p95=float(np.percentile(a, 95)),
            p99=float(np.percentile(a, 99)),
        )


class RequestRecord(BaseModel):
    ok: bool
    error: str | None = None  # kind: http-<status>, timeout, connection, stream
    ttft_s: float | None = None
    itl_s: list[float] = Field(default_factory=list)
    e2e_s: float | None = None
    output_tokens: int = 0


class LevelResult(BaseModel):
    concurrency: int  # closed loop: workers; open loop: the most requests that were in flight
    rate: float | None = None  # open loop: requests per second offered (Poisson, seeded)
    requests_ok: int
    requests_failed: int
    errors: dict[str, int]
    duration_s: float
    ttft_s: Percentiles
    itl_s: Percentiles
    e2e_s: Percentiles
    output_tokens_per_s: float
    requests_per_s: float
    meets_slo: bool | None  # against --max-ttft/--max-tpot (p95), None when no SLO given


class LoadTestResult(BaseModel):
    kind: Literal["measured"] = "measured"
    schema_version: str = SCHEMA_VERSION
    test: Literal["loadtest"] = "loadtest"
    url: str
    model: str | None
    endpoint: str
    max_new_tokens: int
    levels: list[LevelResult]
    knee_concurrency: int | None  # the highest level that still meets the SLO
    knee_rate: float | None = None  # open loop: the highest offered rate that still meets the SLO
    slo: dict[str, float | None]


def _chunk_text(obj: dict, chat: bool) -> str:
    try:
        choice = obj["choices"][0]
    except (KeyError, IndexError, TypeError):
        return ""
    if chat:
        return (choice.get("delta") or {}).get("content") or ""
    return choice.get("text") or ""


async def one_request(client: httpx.AsyncClient, url: str, body: dict, chat: bool, timeout_s: float) -> RequestRecord:
    import httpx

    start = time.perf_counter()
    stamps: list[float] = []
    try:
        async with client.stream("POST", url, json=body, timeout=timeout_s) as resp:
            if resp.status_code // 100 != 2:
                await resp.aread()
                return RequestRecord(ok=False, error=f"http-{resp.status_code}")
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    obj = json.loads(data)
                except ValueError:
                    return RequestRecord(ok=False, error="stream")
                if _chunk_text(obj, chat):
                    stamps.append(time.perf_counter())
    except httpx.TimeoutException:
        return RequestRecord(ok=False, error="timeout")
    except httpx.ConnectError:
        return RequestRecord(ok=False, error="connection")
    except httpx.HTTPError as e:
        return RequestRecord(ok=False, error=type(e).__name__)
    if not stamps:
        return RequestRecord(ok=False, error="empty")
    return RequestRecord(
        ok=True,
        ttft_s=stamps[0] - start,
        itl_s=np.diff(stamps).tolist(),
        e2e_s=stamps[-1] - start,
        output_tokens=len(stamps),
    )


async def run_level(
    client: httpx.AsyncClient,
    url: str,
    bodies: list[dict],
    chat: bool,
    concurrency: int,
    requests: int,
    duration_s: float | None,
    timeout_s: float,
) -> tuple[list[RequestRecord], float]:
    """Closed loop; request k sends bodies[k % len(bodies)]."""
    records: list[RequestRecord] = []
    issued = 0
    start = time.perf_counter()

    async def worker() -> None:
        nonlocal issued
        while issued < requests and (duration_s is None or time.perf_counter() - start < duration_s):
            body = bodies[issued % len(bodies)]
            issued += 1
            records.append(await one_request(client, url, body, chat, timeout_s))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return records, time.perf_counter() - start


async def run_rate(
    client: httpx.AsyncClient,
    url: str,
    bodies: list[dict],
    chat: bool,
    rate: float,
    requests: int,
    duration_s: float | None,
    timeout_s: float,
    seed: int = 0,
) -> tuple[list[RequestRecord], float, int]:
    """Open loop: requests start at Poisson arrival times whatever the server's state (that is what
    users do); returns the records, the elapsed time and the most requests in flight at once."""
    gaps = np.random.default_rng(seed).exponential(1 / rate, size=requests)
    offsets = np.cumsum(gaps) - gaps[0]
    start = time.perf_counter()
    state = {"now": 0, "peak": 0}

    async def fire(k: int, at: float) -> RequestRecord | None:
        if duration_s is not None and at > duration_s:
            return None
        await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        try:
            return await one_request(client, url, bodies[k % len(bodies)], chat, timeout_s)
        finally:
            state["now"] -= 1

    done = await asyncio.gather(*(fire(k, float(a)) for k, a in enumerate(offsets)))
    return [r for r in done if r is not None], time.perf_counter() - start, state["peak"]


def summarize(
    concurrency: int, records: list[RequestRecord], elapsed: float, max_ttft: float | None, max_tpot: float | None
) -> LevelResult:
    ok = [r for r in records if r.ok]
    ttft = Percentiles.of([r.ttft_s for r in ok if r.ttft_s is not None])
    itl = Percentiles.of([x for r in ok for x in r.itl_s])
    meets = None
    if max_ttft is not None or max_tpot is not None:
        meets = bool(ok) and len(ok) == len(records)
        if max_ttft is not None:
            meets = meets and ttft.p95 is not None and ttft.p95 <= max_ttft
        if max_tpot is not None:
            meets = meets and (itl.p95 is None or itl.p95 <= max_tpot)
    return LevelResult(
        concurrency=concurrency,
        requests_ok=len(ok),
        requests_failed=len(records) - len(ok),
        errors=dict(Counter(r.error or "unknown" for r in records if not r.ok)),  # a failed record names its error
        duration_s=elapsed,
        ttft_s=ttft,
        itl_s=itl,
        e2e_s=Percentiles.of([r.e2e_s for r in ok if r.e2e_s is not None]),
        output_tokens_per_s=sum(r.output_tokens for r in ok) / elapsed if elapsed > 0 else 0.0,
        requests_per_s=len(ok) / elapsed if elapsed > 0 else 0.0,
        meets_slo=meets,
    )


async def _preflight(client: httpx.AsyncClient, base: str) -> None:
    """A refused connection is bad input: say so once, before any level runs."""
    import httpx

    try:
        await client.get(base + "/v1/models", timeout=10)
    except httpx.ConnectError:
        raise UserError(f"cannot connect to {base}: nothing is listening there (is the server running?)") from None
    except httpx.HTTPError:
        pass  # reachable; the endpoint may not list models: the requests will tell


async def loadtest_async(
    url: str,
    model: str | None,
    levels: list[int],
    requests: int,
    duration_s: float | None,
    max_new_tokens: int,
    max_ttft: float | None,
    max_tpot: float | None,
    endpoint: str = "chat",
    prompt: str = DEFAULT_PROMPT,
    timeout_s: float = 120.0,
    on_level: Callable[[LevelResult], object] | None = None,
    rates: list[float] | None = None,
    seed: int = 0,
    conversations: list[list[dict]] | None = None,
) -> LoadTestResult:
    """Closed loop over `levels` (concurrent workers), or, with `rates`, open loop at each offered rate.
    `conversations` (chat endpoint): request k sends conversations[k % n] instead of `prompt`."""
    import httpx

    base = url.rstrip("/")
    chat = endpoint == "chat"
    path = "/v1/chat/completions" if chat else "/v1/completions"
    common: dict = {
        "max_tokens": max_new_tokens,
        "stream": True,
        "temperature": 0,
        **({"model": model} if model else {}),
    }
    if chat:
        bodies = [{**common, "messages": c} for c in (conversations or [[{"role": "user", "content": prompt}]])]
    else:
        bodies = [{**common, "prompt": prompt}]
    out: list[LevelResult] = []

    def add(level: LevelResult) -> None:
        out.append(level)
        if on_level:
            on_level(level)

    width = max(levels) if not rates else requests
    limits = httpx.Limits(max_connections=width + 4, max_keepalive_connections=width + 4)
    async with httpx.AsyncClient(limits=limits) as client:
        await _preflight(client, base)
        if rates:
            for rate in rates:
                records, elapsed, peak = await run_rate(
                    client, base + path, bodies, chat, rate, requests, duration_s, timeout_s, seed
                )
                add(summarize(peak, records, elapsed, max_ttft, max_tpot).model_copy(update={"rate": rate}))
        else:
            for concurrency in levels:
                records, elapsed = await run_level(
                    client, base + path, bodies, chat, concurrency, requests, duration_s, timeout_s
                )
                add(summarize(concurrency, records, elapsed, max_ttft, max_tpot))
    meeting = [lv for lv in out if lv.meets_slo]
    return LoadTestResult(
        url=base,
        model=model,
        endpoint=path,
        max_new_tokens=max_new_tokens,
        levels=out,
        knee_concurrency=None if rates or not meeting else max(lv.concurrency for lv in meeting),
        knee_rate=max(lv.rate for lv in meeting if lv.rate is not None) if rates and meeting else None,
        slo={"max_ttft_s": max_ttft, "max_tpot_s": max_tpot},
    )


def loadtest(*args: Any, **kwargs: Any) -> LoadTestResult:
    return asyncio.run(loadtest_async(*args, **kwargs))
