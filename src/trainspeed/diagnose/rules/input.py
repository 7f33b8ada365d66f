"""Input verdicts: waiting on the DataLoader (`input_bound`) and copying batches to the device (`h2d_bound`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trainspeed.diagnose.rules.brief import ms, of_step
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import (
    burst_note,
    phase_ms,
    run_step_ms,
    speedup,
    step_speedup,
    workers_cores,
)
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.watch.result import LoaderInfo, WatchResult
from trainspeed.watch.sites import WORKER_WAIT, DataSite

DATA_SHARE = 0.20  # waiting on data for a fifth of the step is worth fixing first
WORKERS_GAIN = 1.05  # workers are advised only where they are predicted to make the run this much faster
START_SHARE = 0.5  # a loader's starts (workers spawned anew each epoch) are the cause when they are half its wait
STARTS_PER_STEP = 0.5  # a DataLoader iterator started every other step or more often: `next(iter(loader))` in the loop
H2D_SHARE = 0.15
DATA_SITE_SAMPLES = 25
"""Stack samples of the wait on data below which the evidence does not split it by what the DataLoader ran (the
report still lists them): half a second of waiting at 50 a second. A share of 25 samples is good to about ten points
either way; with 358, the image classifier's five per-sample transforms got shares within 8 points of their times
measured one by one (`benchmarks/data_sites.py`, BENCHMARKS.md)."""
DATA_SITE_SHARE = 0.10  # a site the evidence names holds at least this share of those samples


@dataclass(frozen=True)
class _DataWait:
    """What every case of `input_bound` starts from: the run's wait on data and its loaders."""

    share: float
    """The run's share spent waiting on the DataLoader."""
    workers: int
    """The busiest loader's worker processes."""
    cores: int
    suggest: int
    """Worker processes to try (twice the run's, at least the cores up to four, at most the cores)."""
    evidence: str
    """The evidence every case says: the wait, the workers, the saw-tooth, what the DataLoader ran."""
    cheaper: str
    """The action that makes each batch cheaper to make."""
    pin: str
    """", pin_memory=True" on CUDA."""
    starts: float
    """The run's share spent starting and stopping DataLoader iterators (at most its wait)."""
    respawned: list[LoaderInfo]
    """The loaders with workers started anew at every start (no persistent_workers)."""
    title: str
    """The plain words every case but its own starts with: who waits for the DataLoader."""
    brief: str
    """"waiting for batches takes 62% of the run, num_workers=0": the wait in one line."""
    site: str | None
    """The line of the user's own code most of the wait's samples name (`_top_line`), if one."""


def input_bound(r: WatchResult, c: Context) -> Verdict | None:
    """The run waits on its DataLoader for DATA_SHARE of its time or more: the cause, case by case (iterators started
    every step, workers started anew every epoch, a TensorDataset fetched row by row, no room for more workers, the
    workers' handover costing what they save), else more workers."""
    wait = _data_wait(r, c)
    if wait is None:
        return None
    return (_restarted_every_step(r, wait) or _workers_respawned(r, wait) or _taken_row_by_row(r, c, wait)
            or _no_room_for_workers(r, wait) or _more_workers_or_cheaper(r, c, wait))


def _data_wait(r: WatchResult, c: Context) -> _DataWait | None:
    share = r.phases["data"].share
    if share < DATA_SHARE or not r.steps.median_ms:
        return None
    workers = max((ld.num_workers for ld in r.loaders.each), default=0)
    cores = max(1, c.physical_cores)
    suggest = min(max(workers * 2, min(4, cores)), cores)  # worker processes beyond the cores share them
    evidence = f"waiting on the DataLoader took {burst_note(r, 'data')}; num_workers={workers}"
    if r.gpu_util.sawtooth:
        evidence += f"; GPU utilisation is a saw-tooth ({r.gpu_util.why})"
    evidence += _data_sites_note(r, share) + (_worker_sites_note(r) if workers else "")
    collates = sorted({ld.collate for ld in r.loaders.each if ld.collate})
    made = f"__getitem__ or the collate_fn `{'`, `'.join(collates)}`" if collates else "__getitem__"
    top = _top_line(r)
    whose = "of the worker processes' samples" if top is not None and top in r.sites.workers else "samples of the wait"
    first = f", starting with {top.where} (the line most {whose} name)," if top is not None else ""
    precompute = "precompute: tokenize or decode once, before training; cache" if collates else "precompute, cache"
    cheaper = (f"make {made} cheaper ({precompute}){first} or move the augmentation to the device" +
               ("; if it is cheap already (a dataset held in memory as tensors), num_workers=0 saves each batch "
                "its trip between processes" if workers else ""))
    pin = ", pin_memory=True" if r.model.device == "cuda" else ""
    starts = min(r.loaders.start_share or 0.0, share)  # a stop inside the run's last step can tip it over
    respawned = [ld for ld in r.loaders.each if ld.num_workers > 0 and not ld.persistent_workers]
    title = "The GPU waits for the DataLoader" if r.model.device == "cuda" else "The step waits for the DataLoader"
    brief = f"waiting for batches: {share:.0%} of the run, num_workers={workers}"
    return _DataWait(share, workers, cores, suggest, evidence, cheaper, pin, starts, respawned, title, brief,
                     top.where if top is not None else None)


def _restarted_every_step(r: WatchResult, w: _DataWait) -> Verdict | None:
    """A DataLoader iterator started every other step or more often (`next(iter(loader))` in the loop), its starts
    half the wait or more."""
    if not (r.loaders.starts >= 2 and r.loaders.starts >= STARTS_PER_STEP * r.steps.measured
            and w.starts >= START_SHARE * w.share):
        return None
    evidence = w.evidence + (
        f"; {w.starts:.0%} of the run's time is starting and stopping DataLoader iterators: {r.loaders.starts} "
        f"starts in {r.steps.measured} steps, {r.loaders.start_ms or 0.0:.1f} ms each with its first batch and its stop"
        + (f", each starting its {w.respawned[0].num_workers} worker processes anew" if w.respawned else "")
        + " (predicted speed-up is an upper bound: the run without those starts)")
    action = ("make the iterator once, before the loop (`it = iter(loader)`, then `next(it)` each step and a new "
              "`iter(loader)` only when it runs out), or loop `for x, y in loader:`; each `iter(loader)` starts a "
              "new pass over the data (a new shuffle" + (", new worker processes" if w.respawned else "")
              + (", batches prefetched that one `next()` then drops" if w.workers else "") + ")")
    brief = (f"{r.loaders.starts} iter(loader) calls in {r.steps.measured} steps, {ms(r.loaders.start_ms or 0.0)} "
             f"each: {w.starts:.0%} of the run")
    return Verdict("input_bound", evidence, action, speedup(1.0, 1 - w.starts),
                   title="A new DataLoader iterator every step", brief=brief,
                   fix="it = iter(loader) once before the loop, then next(it) each step", bound=True)


def _workers_respawned(r: WatchResult, w: _DataWait) -> Verdict | None:
    """A loader's worker processes started anew every epoch (persistent_workers=False), its starts half the wait or
    more."""
    if not (w.respawned and r.loaders.starts >= 2 and w.starts >= START_SHARE * w.share):
        return None
    evidence = w.evidence + (
        f"; {w.starts:.0%} of the run's time is the DataLoader starting and stopping: {r.loaders.starts} starts (one "
        f"per epoch), {r.loaders.start_ms or 0.0:.1f} ms each with its first batch and its stop, its "
        f"{w.respawned[0].num_workers} worker processes started anew every time (persistent_workers=False; "
        "predicted speed-up is an upper bound: the run without those starts)")
    action = (f"DataLoader(..., persistent_workers=True{w.pin}): the workers then live from one epoch to the next; "
              "a dataset already in memory as tensors needs no workers at all (num_workers=0)")
    alive = {"persistent_workers": True, **({"pin_memory": True} if w.pin else {})}
    paste = f"DataLoader(..., persistent_workers=True{w.pin})"
    brief = (f"{r.loaders.starts} starts of {w.respawned[0].num_workers} worker processes, "
             f"{ms(r.loaders.start_ms or 0.0)} each: {w.starts:.0%} of the run")
    return Verdict("input_bound", evidence, action, speedup(1.0, 1 - w.starts),
                   loader_lever(alive, _match(w.respawned[0]), paste),
                   title="DataLoader workers started anew every epoch", brief=brief, fix=paste, bound=True)


def _taken_row_by_row(r: WatchResult, c: Context, w: _DataWait) -> Verdict | None:
    """A TensorDataset fetched row by row where taking each batch whole (one index op per tensor, measured after the
    run) takes less than the wait."""
    loader = busiest_loader(r)
    if loader is None or not loader.batchable or c.batched_ms is None:
        return None
    step = run_step_ms(r)
    wait = w.share * step
    if c.batched_ms >= wait:
        return None
    evidence = w.evidence + (
        f"; the DataLoader takes each batch's {loader.batch_size} rows of a TensorDataset one by one and collates "
        f"them; taking the batch whole took {c.batched_ms:.2f} ms (measured after the run, {loader.batch_size} rows "
        "by one index per tensor)")
    whole = {"batched": True, **({"num_workers": 0} if w.workers else {})}
    paste = (f"DataLoader(dataset, batch_size=None, sampler=BatchSampler(RandomSampler(dataset), {loader.batch_size}, "
             f"drop_last=False){', num_workers=0' if w.workers else ''})")
    fix = (f"DataLoader(ds, batch_size=None, sampler=BatchSampler(RandomSampler(ds), {loader.batch_size}, False)"
           f"{', num_workers=0' if w.workers else ''})")
    brief = f"waiting for batches: {ms(wait)} a step; one whole batch took {ms(c.batched_ms)} (measured)"
    return Verdict("input_bound", evidence, _batched_action(loader, w.workers),
                   speedup(step, step - wait + c.batched_ms),  # of the mean step: the run's already
                   loader_lever(whole, _match(loader), paste),
                   title="The DataLoader fetches a TensorDataset row by row", brief=brief, fix=fix)


def _no_room_for_workers(r: WatchResult, w: _DataWait) -> Verdict | None:
    """As many workers as the physical cores already, or more: more would share them; each batch made cheaper."""
    if w.suggest > w.workers:
        return None
    kept, bound = _cheaper_bound(r, w, *_kept_by_a_cheaper_item(r, w.share), at_line=True)
    evidence = w.evidence + (
        f", {'as many as' if w.workers == w.cores else 'more than'} this machine's {w.cores} physical cores: more "
        "workers would share them" + bound)
    return Verdict("input_bound", evidence, w.cheaper, speedup(1.0, 1 - w.share + kept), site=w.site,
                   title=w.title, brief=f"{w.brief} already fills {w.cores} cores",
                   fix=_cheaper_fix(w), bound=True)


def _cheaper_bound(r: WatchResult, w: _DataWait, kept: float, kept_note: str, at_line: bool) -> tuple[float, str]:
    """(the share of the run's time that a cheaper batch leaves in the wait, the evidence's words on the prediction).
    Where the fix is the dataset's dearest line in the training process (`at_line`, `_top_line` at `w.site`), that
    line's share of the run by the wait's stack samples is what it takes out, not the whole wait: the run without its
    wait said 1.39x where a Pillow rotation moved to the batch measured 1.07x (`examples/realistic/pil_augment.py`).
    Else, and where the line is the worker processes' (their samples are of their own time, not the wait's), the run
    without its wait less what a cheaper __getitem__ leaves (`kept`, `kept_note`)."""
    top = _top_line(r) if at_line and w.site is not None else None
    if top is None or top.where != w.site or top not in r.sites.data:
        return kept, f" (predicted speed-up is an upper bound: the run without its wait{kept_note})"
    part = top.share_of_data * w.share
    return w.share - part, (f" (predicted speed-up: the run without that line's time, about {part:.0%} of it: an "
                            "upper bound for the line made cheap)")


def _cheaper_fix(w: _DataWait) -> str:
    """The cheaper-batch action in one line: at the dataset's dearest line where the samples name one."""
    return ("precompute or cache this, or augment on the device" if w.site else
            "a cheaper __getitem__: precompute, cache, or augment on the device")


def _more_workers_or_cheaper(r: WatchResult, c: Context, w: _DataWait) -> Verdict:
    """More workers, where they are predicted to make the run WORKERS_GAIN faster; else, where handing the batches
    over (or the cores they take) costs what they save, each batch made cheaper."""
    kept, kept_note = _kept_by_a_cheaper_item(r, w.share)
    new, suggest, why = _with_workers(r, c, w.share, w.workers, w.suggest)
    loader = busiest_loader(r)
    cheaper = w.cheaper
    if why and new >= 1 / WORKERS_GAIN:  # handing the batches over, or the cores they take, cost what they save
        if loader is not None and loader.dataset == "TensorDataset" and not loader.item_by_item:
            size = loader.batch_size or "B"
            cheaper = ("the batches are rows of tensors in memory, and the DataLoader's own Python is most of their "
                       "cost: index the tensors directly (perm = torch.randperm(len(x)), then x[perm[i:i + "
                       f"{size}]] and y[perm[i:i + {size}]] each step), or let trainspeed.fit do that")
            kept, kept_note = 0.0, ""  # indexing the tensors directly leaves none of the DataLoader's code
        elif loader is not None and loader.item_by_item:
            cheaper += ("; if __getitem__ only indexes data held in memory, take each batch whole: "
                        "DataLoader(dataset, batch_size=None, sampler=BatchSampler(RandomSampler(dataset), "
                        f"{loader.batch_size or 'B'}, drop_last=False)) hands __getitem__ the batch's list of indices")
            kept, kept_note = 0.0, ""  # a batch taken whole skips the per-item fetch and the collate
        fix = cheaper_fix = _cheaper_fix(w)
        if loader is not None and loader.dataset == "TensorDataset" and not loader.item_by_item:
            fix = "index the tensors: x[perm[i:i + B]] with perm = torch.randperm(len(x))"
        elif loader is not None and loader.item_by_item and not w.site:
            # where the samples name the dataset's dearest line (a Pillow rotation), that line is the fix: a batch
            # taken whole only helps a __getitem__ that indexes memory (the action says both)
            fix = (f"DataLoader(ds, batch_size=None, sampler=BatchSampler(RandomSampler(ds), "
                   f"{loader.batch_size or 'B'}, False))")
        kept, bound = _cheaper_bound(r, w, kept, kept_note, at_line=fix == cheaper_fix)
        evidence = w.evidence + (f"{why}, so workers would not make the run faster on this machine's {w.cores} "
                                 "physical cores" + bound)
        return Verdict("input_bound", evidence, cheaper, speedup(1.0, 1 - w.share + kept),
                       site=w.site if fix == cheaper_fix else None, title=w.title,
                       brief=f"{w.brief}; workers would not help", fix=fix, bound=True)
    threads = ""
    keep = _threads_beside(r, c, suggest)
    if keep < r.process.torch_threads:
        threads = (f" and torch.set_num_threads({keep}) (torch's {r.process.torch_threads} intra-op threads would take "
                   "the cores the workers need)")
    action = (f"DataLoader(..., num_workers={suggest}, persistent_workers=True{w.pin}){threads}; if that is not "
              f"enough, {cheaper}")
    evidence = w.evidence + (why + " (predicted speed-up is an upper bound)" if why else "")
    settings: dict[str, object] = {"num_workers": suggest, "persistent_workers": True,
                                   **({"pin_memory": True} if w.pin else {})}
    if keep < r.process.torch_threads:
        settings["threads"] = keep
    paste = f"DataLoader(..., num_workers={suggest}, persistent_workers=True{w.pin})" + (
        f"; torch.set_num_threads({keep})" if keep < r.process.torch_threads else "")
    return Verdict("input_bound", evidence, action, speedup(1.0, new),
                   loader_lever(settings, _match(loader), paste) if loader is not None else None,
                   title=w.title, brief=w.brief, fix=paste, bound=bool(why))


def _match(loader: LoaderInfo) -> dict[str, object]:
    """Which DataLoaders a lever applies to: those of the loader's dataset class and batch size."""
    return {"dataset": loader.dataset, "batch_size": loader.batch_size}


def loader_lever(settings: Mapping[str, object], match: dict[str, object], paste: str) -> Lever:
    """A DataLoader's arguments: the same batches in the same order (workers change where they are made, and a
    batch taken whole indexes each tensor once): the same arithmetic, unless the dataset draws random numbers or
    torch's threads change with them (a matmul's sums then run in another order)."""
    return Lever("dataloader", dict(settings), paste, same_arithmetic="threads" not in settings, match=match)


def _samples_of_wait(r: WatchResult, sites: list[DataSite] | None = None) -> int:
    """The stack samples taken while the script waited on data (the sites' shares are of them; 0: none); or those
    of other `sites` (the worker processes')."""
    sites = r.sites.data if sites is None else sites
    top = sites[0] if sites else None
    return round(top.samples / top.share_of_data) if top is not None and top.share_of_data > 0 else 0


def _enough_samples(r: WatchResult, sites: list[DataSite] | None = None) -> bool:
    """Whether the wait on data has DATA_SITE_SAMPLES stack samples, enough to split it by what the DataLoader ran
    (or the worker processes' `sites` have, to split what they ran)."""
    return _samples_of_wait(r, sites) >= DATA_SITE_SAMPLES


def _top_line(r: WatchResult) -> DataSite | None:
    """The line of the user's own code the most samples of the wait name, where it holds DATA_SITE_SHARE of them;
    else the worker processes' (their own samples, taken while they made batches)."""
    for sites in (r.sites.data, r.sites.workers):
        if _enough_samples(r, sites):
            found = next((d for d in sites if d.code and not d.machinery and d.share_of_data >= DATA_SITE_SHARE), None)
            if found is not None:
                return found
    return None


def _worker_sites_note(r: WatchResult) -> str:
    """What the worker processes ran while they made batches, by their own stack samples (from DATA_SITE_SAMPLES)."""
    named = [d for d in r.sites.workers[:3] if d.share_of_data >= DATA_SITE_SHARE]
    if not _enough_samples(r, r.sites.workers) or not named:
        return ""
    return (f"; in the worker processes, of the {_samples_of_wait(r, r.sites.workers)} stack samples taken while they "
            f"made batches: " + "; ".join(_site_text(d) for d in named))


def _kept_by_a_cheaper_item(r: WatchResult, share: float) -> tuple[float, str]:
    """The share of the run's time that a cheaper `__getitem__` leaves in the wait: the DataLoader's own code in
    the training process (collating, fetching item by item, drawing indices), by the stack samples of the wait
    (none without enough of them; waiting on workers is not kept: it shrinks with what they make). With the words
    the evidence adds to its upper bound."""
    if not _enough_samples(r):
        return 0.0, ""
    own = [d for d in r.sites.data if d.machinery and d.machinery != WORKER_WAIT]
    part = sum(d.share_of_data for d in own)
    if not part:
        return 0.0, ""
    whats = ", ".join(dict.fromkeys(d.machinery or "" for d in own))
    return share * part, (f", less the DataLoader's own code that a cheaper __getitem__ leaves: {part:.0%} of the "
                          f"samples, {whats}")


def _data_sites_note(r: WatchResult, share: float) -> str:
    """What the DataLoader ran while the script waited on it, by the stack samples (`WatchResult.sites.data`):
    the top sites, each with its share of the samples and the share of the run's time that is of the wait."""
    named = [d for d in r.sites.data[:3] if d.share_of_data >= DATA_SITE_SHARE]
    if not _enough_samples(r) or not named:
        return ""
    parts = [f"{_site_text(d)} (about {d.share_of_data * share:.0%} of the run's time)" for d in named]
    return f"; of the {_samples_of_wait(r)} stack samples taken while it waited: " + "; ".join(parts)


def _site_text(d: DataSite) -> str:
    """"60% at train.py:31: `x = ...`, most of its samples inside PIL": a data site with its share of the samples."""
    what = (f"the DataLoader's own code, {d.machinery} ({d.where})" if d.machinery else
            f"{d.where}: `{d.code}`" if d.code else d.where)
    inside = f", most of its samples inside {d.inside}" if d.inside and not d.machinery else ""
    return f"{d.share_of_data:.0%} at {what}{inside}"


def busiest_loader(r: WatchResult) -> LoaderInfo | None:
    """The loader that handed out the most batches to the training steps while watched (the training set's: a
    validation loader's batches, asked during evaluations, are not the steps')."""
    return max(r.loaders.each, key=lambda ld: ld.batches - ld.evaluation_batches, default=None)


def loader_candidate(r: WatchResult) -> bool:
    """Whether the run waited on data enough for `input_bound`: the loader probes are worth running."""
    return bool(r.loaders.each) and r.phases["data"].share >= DATA_SHARE and bool(r.steps.median_ms)


def _batched_action(loader: LoaderInfo, workers: int) -> str:
    size = loader.batch_size or "B"
    return (f"take each batch whole: DataLoader(dataset, batch_size=None, sampler=BatchSampler(RandomSampler(dataset), "
            f"{size}, drop_last=False){', num_workers=0' if workers else ''}) - TensorDataset then indexes each tensor "
            "once per batch (SequentialSampler for a loader without shuffle; torch.utils.data has both); or "
            "trainspeed.fit, which does that itself")


def _threads_beside(r: WatchResult, c: Context, workers: int) -> int:
    """torch's intra-op threads beside `workers` worker processes: as many as the hardware threads the workers
    leave (an OpenMP op waits for each of its threads to get a core), never more than now."""
    if r.process.torch_threads + workers <= c.logical_threads:
        return r.process.torch_threads
    return max(1, c.logical_threads - workers)


def _with_workers(r: WatchResult, c: Context, share: float, workers: int, suggest: int) -> tuple[float, int, str]:
    """The run's time with the best number of workers up to `suggest`, in shares of its time now, that number, and what
    the estimate rests on.

    Workers make batches beside the step, but each batch still costs the training process its handover (receiving and
    rebuilding it: `main_ms`, measured after the run with a worker handing over batches of the run's shapes), and a
    worker its making plus its handover (`wall_ms`). All of that shares the machine's cores with the step, whose compute
    keeps as many cores busy as the process's measured CPU use says (a CNN's forward and backward keep most of two cores
    busy): with fewer intra-op threads beside the workers (`_threads_beside`) it takes longer by the cores it loses. The
    run is no faster than the longest of that step with the handover, the workers' turn per batch, and all that work
    (both sides of the handover) spread over the cores. Cores are taken to run in parallel at full speed: an upper bound
    (two worker processes do not make batches twice as fast as one: BENCHMARKS.md, "Where the code's constants come
    from")."""
    busy = 1 - share
    if workers and r.steps.median_ms:
        return _more_workers(r, c, workers, suggest)
    if c.handover is None or not r.steps.median_ms:  # the making spread over `suggest` workers, the handover unknown
        return max(busy, share / suggest), suggest, ""
    step = run_step_ms(r)
    hand, main = c.handover.wall_ms / step, c.handover.main_ms / step
    cores = max(1, c.physical_cores)
    used = (r.process.cpu_percent or 0.0) / 100
    compute_cores = min(float(r.process.torch_threads), max(1.0, (used - share) / busy if used and busy > 0 else
                                                    float(min(r.process.torch_threads, cores))))
    plans = []
    for k in range(1, suggest + 1):
        slower = compute_cores / min(compute_cores, _threads_beside(r, c, k))
        plans.append((max(busy * slower + main, (share + hand) / k, (busy * compute_cores + main + share + hand) / cores),
                      k))
    new, best = min(plans)
    why = (f"; a worker process took {c.handover.wall_ms:.2f} ms to hand over each batch of this shape, "
           f"{c.handover.main_ms:.2f} ms of it in the training process (measured after the run), against "
           f"{share * step:.2f} ms to make one here")
    if compute_cores > 1.05:
        told = "the process's CPU use" if used else f"taken as its {r.process.torch_threads} intra-op threads' worth, unsampled"
        why += (f"; the step's compute kept {compute_cores:.1f} cores busy ({told}), with "
                f"{_threads_beside(r, c, best)} intra-op thread(s) beside {best} worker(s)")
    return new, best, why


def _own_share(r: WatchResult) -> float:
    """The training process's own part of the run beside its wait on data, in shares of the run's time: forward,
    backward and the optimizer at their medians where those are less (the mean holds the stalls of intra-op threads
    that waited for a core a worker held), the other phases at their shares (an evaluation every N steps stays)."""
    step = run_step_ms(r)
    computed = ("forward", "backward", "optimizer")
    return sum(min(r.phases[p].share, r.phases[p].host_ms / step) for p in computed) + \
        sum(stat.share for p, stat in r.phases.items() if p != "data" and p not in computed)


def _more_workers(r: WatchResult, c: Context, workers: int, suggest: int) -> tuple[float, int, str]:
    """The run's time with more than its `workers` worker processes, up to `suggest`, in shares of its time now; that
    number; and what the estimate rests on.

    The training process keeps its own work (`_own_share`) and its side of each handover (`main_ms`, probed after
    the run). Its own work is taken as one core's worth: its CPU use is no guide while it waits on workers, where an
    idle intra-op thread spins for its next task (a pandas `iloc` dataset's run stood at 99% of a core while it
    waited on its one worker for two thirds of the time). Where the workers' CPU time was measured
    (`loader_workers`: 9.7 ms per batch of that dataset, one handed over every 12.3 ms), k workers need at least
    that CPU per step over k, and all of the work shares the machine's cores: lower bounds on the time, so the
    speed-up is an upper bound. Unmeasured, the workers are taken as what the step waits for all along: together
    they hand over the batches at the run's pace now, and k of them workers/k as long.
    """
    step = run_step_ms(r)
    own = _own_share(r)
    main = c.handover.main_ms / step if c.handover is not None else 0.0
    cores = max(1, c.physical_cores)
    spent = r.machine.loader_workers
    cpu = workers_cores(r)
    plans = [(max(own + main, workers / k if cpu is None else max(cpu / k, (own + main + cpu) / cores)), k)
             for k in range(workers + 1, suggest + 1)]  # the caller asks only where suggest > workers
    new, best = min(plans)
    if spent is None or cpu is None:
        return new, best, (f"; with {best} workers, each making a batch as long as now, they would hand the batches "
                           f"over {best / workers:.1f}x as fast at best (their CPU time unmeasured)")
    every = r.steps.measured * step / spent.batches
    return new, best, (f"; the worker processes handed over {spent.batches} batches while measured (one every "
                       f"{every:.2f} ms), running {spent.cpu_ms_per_batch:.2f} ms of CPU for each (measured): "
                       f"{cpu * step:.2f} ms a step, {cpu * step / best:.2f} ms on each of {best} workers at best, "
                       f"and all of it shares this machine's {cores} physical cores with the step's own work")


def h2d_bound(r: WatchResult, c: Context) -> Verdict | None:
    share = r.phases["h2d"].share
    if share < H2D_SHARE or not r.steps.median_ms:
        return None
    step, h2d = r.steps.median_ms, phase_ms(r, "h2d")
    mib = r.steps.h2d_bytes_per_step / 2**20
    kinds = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in r.model.h2d_bytes_by_kind.items())
    evidence = (f"host-to-device copies of {mib:.1f} MiB per step take {h2d:.2f} ms of {step:.2f} ms ({share:.0%})"
                + (f"; in all: {kinds}" if kinds else ""))
    action = ("keep a dataset that fits on the device there once; otherwise DataLoader(pin_memory=True) and "
              ".to(device, non_blocking=True) so copies overlap compute")
    return Verdict("h2d_bound", evidence, action, step_speedup(r, step, step - h2d),
                   title="Copying batches to the GPU", brief=f"{mib:.1f} MiB copied a step: {of_step(h2d, step)}",
                   fix="DataLoader(..., pin_memory=True) and x.to(device, non_blocking=True)")
