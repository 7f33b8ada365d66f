"""The demo's explanation, computed from the measured runs (pure: runs in, sentences out)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from trainspeed.demo.result import DemoRun

NOISE_SIGMAS = 2.0
"""A difference counts as measured when it exceeds this many standard errors of the paired spread."""


def paired_spread(diffs: Sequence[float]) -> float:
    """Standard error of a total of n paired chunk differences: stdev(diffs) * sqrt(n).

    The arms ran interleaved chunk by chunk, so chunk k of every arm saw the same state of the
    machine; the spread of the per-chunk differences is the noise that is left.
    """
    if len(diffs) < 2:
        return 0.0
    return statistics.stdev(diffs) * math.sqrt(len(diffs))


def _diffs(a: DemoRun, b: DemoRun) -> list[float]:
    return [x - y for x, y in zip(a.chunk_seconds, b.chunk_seconds)]


def _by_variant(runs: Sequence[DemoRun], device: str) -> dict[str, DemoRun]:
    return {r.variant: r for r in runs if r.device == device}


def _device_comparison(runs: Sequence[DemoRun], devices: list[str]) -> list[str]:
    if len(devices) < 2:
        only = devices[0] if devices else "no device"
        return [f"Only the {only.upper()} was measured here, so the seed's claim (GPU slower than CPU "
                "on Iris) cannot be checked on this machine; run the demo where CUDA is available."]
    lines = []
    for variant in ("seed", "sync_free", "fit"):
        timed = [r for r in runs if r.variant == variant]
        if len(timed) < 2:
            continue
        timed.sort(key=lambda r: r.seconds)
        fast, slow = timed[0], timed[-1]
        lines.append(
            f"{variant}: the {fast.device.upper()} won, {slow.seconds / fast.seconds:.1f}x faster than the "
            f"{slow.device.upper()} ({fast.us_per_epoch:.0f} vs {slow.us_per_epoch:.0f} us/epoch)."
        )
    return lines


def _sync_cost(device: str, v: dict[str, DemoRun]) -> list[str]:
    seed, none = v.get("seed"), v.get("no_record")
    if seed is None or none is None or seed.syncs == none.syncs:
        return []
    delta = seed.seconds - none.seconds
    noise = NOISE_SIGMAS * paired_spread(_diffs(seed, none))
    reads = seed.syncs - none.syncs
    share = delta / seed.seconds
    if abs(delta) <= noise:
        return [f"{device.upper()}: the seed loop's {reads} host reads cost no measurable time "
                f"(seed {seed.seconds:.3f} s vs no_record {none.seconds:.3f} s, a {share:+.1%} difference "
                f"inside the run's own spread of +/-{noise / seed.seconds:.1%})."]
    return [f"{device.upper()}: the seed loop's {reads} host reads (loss.item() every epoch) cost "
            f"{share:.0%} of its time: {delta:.3f} s, about {delta / reads * 1e6:.1f} us per read "
            f"(seed {seed.seconds:.3f} s vs no_record {none.seconds:.3f} s)."]


def _sync_free(device: str, v: dict[str, DemoRun]) -> list[str]:
    seed, free = v.get("seed"), v.get("sync_free")
    if seed is None or free is None:
        return []
    return [f"{device.upper()}: recording every epoch into a device buffer (sync_free, {free.syncs} host "
            f"read) took {free.seconds:.3f} s against the seed's {seed.seconds:.3f} s for the same "
            f"{free.records} losses ({seed.seconds / free.seconds:.2f}x)."]


def _linearity(device: str, v: dict[str, DemoRun]) -> list[str]:
    """Does time grow linearly with the number of host reads? Test the middle point against the line."""
    seed, mid, none = v.get("seed"), v.get("record_every_200"), v.get("no_record")
    if seed is None or mid is None or none is None or seed.syncs == none.syncs:
        return []
    slope = (seed.seconds - none.seconds) / (seed.syncs - none.syncs)
    predicted = none.seconds + slope * (mid.syncs - none.syncs)
    residual = mid.seconds - predicted
    # the same residual chunk by chunk, with the chunk's own reads, gives its paired spread
    w = (mid.syncs - none.syncs) / (seed.syncs - none.syncs)
    per_chunk = [m - (n + w * (s - n)) for s, m, n in zip(seed.chunk_seconds, mid.chunk_seconds, none.chunk_seconds)]
    noise = NOISE_SIGMAS * paired_spread(per_chunk)
    saved = 1 - mid.seconds / seed.seconds
    head = (f"{device.upper()}: reading {seed.syncs / max(mid.syncs, 1):.0f}x less often "
            f"({mid.syncs} vs {seed.syncs} host reads) saved {saved:.0%} of the time. ")
    if abs(residual) <= noise:
        return [head + f"Time vs reads looks linear: the line through the seed and no_record runs "
                f"predicts {predicted:.3f} s, measured {mid.seconds:.3f} s (within +/-{noise:.3f} s)."]
    per_read_dense = slope * 1e6
    per_read_sparse = (mid.seconds - none.seconds) / max(mid.syncs - none.syncs, 1) * 1e6
    why = ""
    if device == "cuda" and per_read_sparse > per_read_dense:
        why = (" A read waits for all the work queued before it, so a rare read pays for more "
               "queued work than a read every epoch does.")
    return [head + f"Time vs reads is not linear: the line through the seed and no_record runs "
            f"predicts {predicted:.3f} s, measured {mid.seconds:.3f} s (off by {residual:+.3f} s, "
            f"spread +/-{noise:.3f} s). A read cost {per_read_dense:.1f} us when made every epoch and "
            f"{per_read_sparse:.1f} us when made every 100-200 epochs.{why}"]


def _agreement(device: str, v: dict[str, DemoRun]) -> list[str]:
    runs = [v[name] for name in ("seed", "record_every_200", "no_record", "sync_free") if name in v]
    if len(runs) < 2:
        return []
    finals = {r.final_loss for r in runs}
    names = ", ".join(r.variant for r in runs)
    if len(finals) == 1:
        text = f"{device.upper()}: final losses agree bit for bit across {names} ({runs[0].final_loss:.6f})"
    else:
        spread = max(finals) - min(finals)
        text = f"{device.upper()}: final losses DIFFER across {names} (max difference {spread:.3g})"
    seed, free = v.get("seed"), v.get("sync_free")
    if seed is not None and free is not None:
        same = seed.losses == free.losses
        text += ("; the seed's and sync_free's per-epoch loss histories are identical" if same
                 else "; the seed's and sync_free's per-epoch loss histories differ")
    return [text + "."]


def _fit(device: str, v: dict[str, DemoRun]) -> list[str]:
    seed, fast = v.get("seed"), v.get("fit")
    if seed is None or fast is None:
        return []
    noise = NOISE_SIGMAS * paired_spread(_diffs(seed, fast))
    gap = abs(fast.final_loss - seed.final_loss)
    same = "the same final loss bit for bit" if gap == 0 else f"a final loss {gap:.2g} from the seed's"
    if abs(seed.seconds - fast.seconds) <= noise:
        return [f"{device.upper()}: trainspeed.fit ({fast.strategy}) took {fast.seconds:.3f} s, no measurable "
                f"difference from the seed's {seed.seconds:.3f} s, with {same}."]
    return [f"{device.upper()}: trainspeed.fit ({fast.strategy}) took {fast.seconds:.3f} s against the seed's "
            f"{seed.seconds:.3f} s ({seed.seconds / fast.seconds:.2f}x, capture and compile included), "
            f"with {same}."]


def explain(runs: Sequence[DemoRun]) -> list[str]:
    """Sentences that say what the measurements show: who won, what syncs cost, linearity."""
    devices = list(dict.fromkeys(r.device for r in runs))
    lines = _device_comparison(runs, devices)
    for device in devices:
        v = _by_variant(runs, device)
        lines += _sync_cost(device, v) + _sync_free(device, v) + _linearity(device, v) + _agreement(device, v)
        lines += _fit(device, v)
    return lines
