"""The demo's explanation, computed from the measured runs (pure: runs in, sentences out)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from trainspeed.demo.result import DemoRun, Start, row_name
from trainspeed.diagnose.rules.brief import plural
from trainspeed.names import SEED_EPOCHS

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
    """The device's runs at torch's threads, by variant."""
    return {r.variant: r for r in runs if r.device == device and r.threads is None}


def _outside_spread(a: DemoRun, b: DemoRun) -> tuple[bool, float]:
    """Whether a and b differ by more than NOISE_SIGMAS of their paired spread, and that spread (seconds)."""
    noise = NOISE_SIGMAS * paired_spread(_diffs(a, b))
    return abs(a.seconds - b.seconds) > noise, noise


def _load(starts: Sequence[Start], runs: Sequence[DemoRun]) -> list[str]:
    """The machine's load first: it decides what every other figure means."""
    lines = []
    for s in starts:
        if s.others_cores is None or s.others_cores < 0.25:
            continue
        head = (f"{s.device.upper()}: other processes kept {s.others_cores:.1f} of the {s.cores} cores busy while the "
                "demo started")
        extra = s.extra_threads
        if extra is None:
            lines.append(head + "; the timings below move with their load.")
            continue
        fast, slow = s.us_per_epoch[extra], s.us_per_epoch[s.threads]
        lines.append(head + f": a seed epoch took {slow:,.0f} us with torch's {s.threads} threads and {fast:,.0f} us "
                     f"with {extra} ({slow / fast:.1f}x faster), because each of torch's threads waits for a core "
                     f"they hold; the row \"{row_name(s.device, extra)}\" runs the seed's "
                     f"loop so (torch.set_num_threads({extra}) in a script).")
    for r in runs:
        if r.threads is None:
            continue
        base = next((b for b in runs if b.device == r.device and b.variant == r.variant and b.threads is None), None)
        if base is None:
            continue
        outside, noise = _outside_spread(base, r)
        if outside:
            lines.append(f"{r.device.upper()}: with {plural(r.threads, 'thread')} the seed's "
                         f"loop took {r.seconds:.3f} s against {base.seconds:.3f} s "
                         f"({base.seconds / r.seconds:.2f}x), measured over the whole run.")
        else:
            lines.append(f"{r.device.upper()}: over the whole run, {plural(r.threads, 'thread')} "
                         f"made no measurable difference ({r.seconds:.3f} s against {base.seconds:.3f} s, spread "
                         f"+/-{noise:.3f} s): the load changed after the start.")
    return lines


def _sizing(starts: Sequence[Start], epochs: int) -> list[str]:
    if not starts or epochs >= SEED_EPOCHS:
        return []
    return [f"{epochs} epochs per run, chosen from a short timed start so that the demo takes about a minute "
            f"(`trainspeed demo --epochs {SEED_EPOCHS}` runs the seed's {SEED_EPOCHS})."]


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
        outside, noise = _outside_spread(fast, slow)
        if not outside:
            lines.append(f"{variant}: no measurable difference between the {fast.device.upper()} and the "
                         f"{slow.device.upper()} ({fast.seconds:.3f} s, {slow.seconds:.3f} s; spread +/-{noise:.3f} s).")
            continue
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
    outside, noise = _outside_spread(seed, none)
    reads = seed.syncs - none.syncs
    share = delta / seed.seconds
    if not outside:
        return [f"{device.upper()}: the seed loop's {reads} host reads cost no time this machine can tell apart "
                f"from its noise (seed {seed.seconds:.3f} s, no_record {none.seconds:.3f} s; the runs' own "
                f"spread is +/-{noise:.3f} s)."]
    return [f"{device.upper()}: the seed loop's {reads} host reads (loss.item() every epoch) cost "
            f"{share:.0%} of its time: {delta:.3f} s, about {delta / reads * 1e6:.1f} us per read "
            f"(seed {seed.seconds:.3f} s vs no_record {none.seconds:.3f} s)."]


def _sync_free(device: str, v: dict[str, DemoRun]) -> list[str]:
    seed, free = v.get("seed"), v.get("sync_free")
    if seed is None or free is None:
        return []
    outside, noise = _outside_spread(seed, free)
    if not outside:
        return [f"{device.upper()}: recording every epoch into a device buffer (sync_free, {free.syncs} host "
                f"read) made no measurable difference for the same {free.records} losses ({free.seconds:.3f} s, "
                f"seed {seed.seconds:.3f} s; spread +/-{noise:.3f} s)."]
    return [f"{device.upper()}: recording every epoch into a device buffer (sync_free, {free.syncs} host "
            f"read) took {free.seconds:.3f} s against the seed's {seed.seconds:.3f} s for the same "
            f"{free.records} losses ({seed.seconds / free.seconds:.2f}x)."]


def _linearity(device: str, v: dict[str, DemoRun]) -> list[str]:
    """Does time grow linearly with the number of host reads? Test the middle point against the line."""
    seed, mid, none = v.get("seed"), v.get("record_every_200"), v.get("no_record")
    if seed is None or mid is None or none is None or seed.syncs == none.syncs or not _outside_spread(seed, none)[0]:
        return []  # the reads cost nothing measurable: there is no line to test
    slope = (seed.seconds - none.seconds) / (seed.syncs - none.syncs)
    predicted = none.seconds + slope * (mid.syncs - none.syncs)
    residual = mid.seconds - predicted
    # the same residual chunk by chunk, with the chunk's own reads, gives its paired spread
    w = (mid.syncs - none.syncs) / (seed.syncs - none.syncs)
    per_chunk = [m - (n + w * (s - n)) for s, m, n in zip(seed.chunk_seconds, mid.chunk_seconds, none.chunk_seconds)]
    noise = NOISE_SIGMAS * paired_spread(per_chunk)
    saved = 1 - mid.seconds / seed.seconds
    head = (f"{device.upper()}: reading {seed.syncs / max(mid.syncs, 1):.0f}x less often "
            f"({mid.syncs} vs {seed.syncs} host reads) saved {saved:.0%} of the time. " if _outside_spread(seed, mid)[0]
            else f"{device.upper()}: reading {seed.syncs / max(mid.syncs, 1):.0f}x less often ({mid.syncs} vs "
                 f"{seed.syncs} host reads) saved no time this run can tell from its noise. ")
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
    gap = abs(fast.final_loss - seed.final_loss)
    same = "the same final loss bit for bit" if gap == 0 else f"a final loss {gap:.2g} from the seed's"
    if not _outside_spread(seed, fast)[0]:
        return [f"{device.upper()}: trainspeed.fit ({fast.strategy}) took {fast.seconds:.3f} s, no measurable "
                f"difference from the seed's {seed.seconds:.3f} s, with {same}."]
    return [f"{device.upper()}: trainspeed.fit ({fast.strategy}) took {fast.seconds:.3f} s against the seed's "
            f"{seed.seconds:.3f} s ({seed.seconds / fast.seconds:.2f}x, capture and compile included), "
            f"with {same}."]


def explain(runs: Sequence[DemoRun], starts: Sequence[Start] = ()) -> list[str]:
    """Sentences that say what the measurements show, the machine's load first: who won, what syncs cost,
    linearity; a difference inside the runs' own spread is said to be none."""
    devices = list(dict.fromkeys(r.device for r in runs))
    epochs = runs[0].epochs if runs else SEED_EPOCHS
    lines = _load(starts, runs) + _sizing(starts, epochs)
    lines += _device_comparison([r for r in runs if r.threads is None], devices)
    for device in devices:
        v = _by_variant(runs, device)
        lines += _sync_cost(device, v) + _sync_free(device, v) + _linearity(device, v) + _agreement(device, v)
        lines += _fit(device, v)
    return lines
