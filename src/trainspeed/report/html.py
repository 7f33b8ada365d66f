"""A self-contained HTML report (jinja2; plots embedded as PNG data URIs)."""

from __future__ import annotations

import base64

from jinja2 import Environment, select_autoescape

from trainspeed._version import __version__
from trainspeed.diagnose.op_clock import on_phase_clock, outgrown
from trainspeed.diagnose.report import DoctorReport
from trainspeed.load.view import others_busy
from trainspeed.report.doctor_brief import load_line
from trainspeed.report.doctor_text import prediction_words, process_line, window_lines
from trainspeed.report.plots import doctor_histogram_png, doctor_phases_png, doctor_util_png
from trainspeed.report.tried import applied_words, edit_place, measured_words
from trainspeed.watch.result import STEP_PHASES

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>trainspeed doctor: {{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 980px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }
td:first-child, th:first-child, td:has(> code) { text-align: left; }
.verdict { border-left: 4px solid #2a7ab0; padding: 4px 12px; margin: 10px 0; background: #f5f9fc; }
.muted { color: #777; } code { background: #f2f2f2; padding: 1px 4px; }
</style></head><body>
<h1>trainspeed doctor</h1>
<p class="muted">trainspeed {{ version }}{% if r.when %}, {{ r.when }}{% endif %}{% if r.command %}: <code>{{ r.command }}</code>{% endif %}</p>
<p><b>{{ title }}</b> on {{ w.model.device|upper }}{% if r.fate %} &mdash; {{ r.fate }}{% endif %}.
{{ w.steps.seen }} steps seen, {{ w.steps.measured }} measured{% if w.steps.median_ms is not none %}: median
{{ "%.3f"|format(w.steps.median_ms) }} ms, p90 {{ "%.3f"|format(w.steps.p90_ms) }} ms per step{% if w.steps.host_median_ms is not none %}
(the GPU's pace; the host's {{ "%.3f"|format(w.steps.host_median_ms) }} ms){% endif %}{% endif %}.{% if process %}
<span class="muted">{{ process[0]|upper }}{{ process[1:] }}.</span>{% endif %}{% for line in window %}
<span class="muted">{{ line }}</span>{% endfor %}</p>
<h2>Verdicts <span class="muted">(most important first; speed-ups are predictions)</span></h2>
{% if load %}<p><b>{{ load }}</b></p>{% endif %}
{% for v in r.verdicts %}<div class="verdict"><b>{{ loop.index }}. {{ v.title or v.id }}</b> <span class="muted">[{{ v.id }}]</span>{% if v.predicted_speedup %}
&mdash; {{ label(r, v) }}{% elif v.unpredicted %} &mdash; no prediction: {{ v.unpredicted }}{% endif %}<br>
{% if v.brief %}{{ v.brief }}<br>{% endif %}{% if v.fix %}<span class="muted">fix{% if v.site %} at <code>{{ v.site }}</code>{% endif %}</span> <code>{{ v.fix }}</code><br>{% endif %}
<details><summary class="muted">the whole evidence</summary>
<span class="muted">evidence</span> {{ v.evidence }}<br><span class="muted">action</span> {{ v.action }}{% if v.lever %}
<br><span class="muted">lever</span> <code>{{ v.lever.paste }}</code>{% endif %}</details></div>
{% else %}<p>{% if w.steps.median_ms is none %}No training step completed, so there is nothing to judge.{% else %}No rule
found a problem worth a tenth of the step.{% endif %}</p>{% endfor %}
{% if t %}<h2>Tried <span class="muted">({{ t.rounds }} round{{ "s" if t.rounds != 1 }} of alternated runs{% if t.steps %},
{{ t.steps }} steps each{% endif %}, {{ "%.0f"|format(t.seconds) }} s in all)</span></h2>
{% if t.rows %}<p class="muted">Measured: {{ t.timed }}.</p>
<table><tr><th>verdict</th><th>predicted</th><th>measured [95%]</th><th>applied as</th></tr>
{% for row in t.rows %}<tr><td>{{ row.verdict }}</td><td>{{ "%.2fx"|format(row.predicted) if row.predicted else "-" }}</td>
<td>{{ measured(row) }}</td><td style="text-align:left"><code>{{ row.lever.paste }}</code>{% if applied(row) %}<br>
<span class="muted">{{ applied(row) }}</span>{% endif %}</td></tr>{% endfor %}</table>{% endif %}
{% for e in t.edits %}<p class="muted">not tried: {{ e.verdict }} needs an edit {{ place(e) }}: {{ e.action }}</p>{% endfor %}
{% if t.interrupted %}<p>Interrupted (Ctrl-C): the table holds the rounds finished until then.</p>{% endif %}
{% for n in t.notes %}<p class="muted">note: {{ n }}</p>{% endfor %}{% endif %}
{% if r.patch %}<h2>Patch <span class="muted">(--fix{% if r.patch.written %}: <code>git apply {{ r.patch.written }}</code>
in the script's repository{% endif %})</span></h2>
{% for h in r.patch.hunks %}<p>{{ h.verdict }}, line{{ "s" if "-" in h.span }} {{ h.span }}:
{{ h.said }}{% if h.recipe %} <span class="muted">(changes the recipe: {{ h.recipe }})</span>{% endif %}</p>{% endfor %}
{% for k in r.patch.skipped %}<p class="muted">{{ k.verdict }}: no patch: {{ k.reason }}</p>{% endfor %}
{% if r.patch.diff %}<pre>{{ r.patch.diff }}</pre>{% endif %}{% endif %}
<h2>Where a step's time goes</h2>
<table><tr><th>phase</th><th>host ms</th><th>device ms</th><th>share</th></tr>
{% for name, s in w.phases.items() %}<tr><td>{{ name }}</td><td>{{ "%.3f"|format(s.host_ms) }}</td>
<td>{{ "%.3f"|format(s.device_ms) if s.device_ms is not none else "-" }}</td><td>{{ "%.1f"|format(100 * s.share) }}%</td></tr>
{% endfor %}</table>
{% if w.model.device == "cuda" %}<p class="muted">device ms: the stream's time from a phase's first edge to its last, idle gaps
included; the GPU's own work is below.</p>{% endif %}
<p>Per step: {{ "%.2f"|format(w.steps.syncs_per_step) }} syncs (host reads of device data){% if w.steps.host_reads_per_step %}, {{ "%.2f"|format(w.steps.host_reads_per_step) }} reads of CPU tensors (no wait){% endif %}, {{ "%.2f"|format(w.steps.h2d_bytes_per_step / 1048576) }} MiB
host&rarr;device, {{ "%.0f"|format(w.window.ops_per_step) if w.window.ops_per_step is not none else "?" }} aten ops{% if w.window.other_ops_per_step %}
({{ "%.0f"|format(w.window.other_ops_per_step) }} of them in 'other'){% endif %}{% if w.window.kernels_per_step is not none %},
{{ "%.0f"|format(w.window.kernels_per_step) }} CUDA kernels{% endif %}{% if w.window.gpu_busy_ms_per_step is not none and w.steps.median_ms %}
(the GPU works {{ "%.3f"|format(w.window.gpu_busy_ms_per_step) }} ms of the step, {{ "%.0f"|format(100 * w.window.gpu_busy_ms_per_step / w.steps.median_ms) }}%){% endif %}.</p>
{% for name, png in plots %}<p><img alt="{{ name }}" src="data:image/png;base64,{{ png }}">{% if name == "per-step phases" %}
<br><span class="muted">The {{ w.steps.samples|length }} steps drawn are the measured run's detailed steps, in order (at most its
first 400): forward, backward and the optimizer are timed apart on detailed steps only, every step for the first 50
and then runs of them about one step in 32; the histogram below holds every measured step.</span>{% endif %}</p>{% endfor %}
{% macro reads(title, sites) %}{% if sites %}<h2>{{ title }}</h2><table><tr><th>where</th><th>op</th><th>count</th><th>total ms</th></tr>
{% for s in sites[:20] %}<tr><td><code>{{ s.where }}</code></td><td>{{ s.op }}</td><td>{{ s.count }}</td><td>{{ "%.2f"|format(s.total_ms) }}</td></tr>{% endfor %}</table>{% endif %}{% endmacro %}
{{ reads("Host reads of device data", w.reads.sync_sites) }}
{{ reads("Reads of CPU tensors (no sync)", w.reads.host_read_sites) }}
{% if w.sites.other %}<h2>Time outside every phase ("other"), by line</h2><table><tr><th>where</th><th>code</th><th>share of samples</th></tr>
{% for o in w.sites.other %}<tr><td><code>{{ o.where }}</code></td><td><code>{{ o.code }}</code></td><td>{{ "%.0f"|format(100 * o.share_of_other) }}%</td></tr>{% endfor %}</table>{% endif %}
{% if w.sites.loop %}<h3>By the training loop's line (with the functions it calls)</h3><table><tr><th>where</th><th>code</th><th>share of samples</th></tr>
{% for o in w.sites.loop %}<tr><td><code>{{ o.where }}</code></td><td><code>{{ o.code }}</code></td><td>{{ "%.0f"|format(100 * o.share_of_other) }}%</td></tr>{% endfor %}</table>{% endif %}
{% if w.sites.data %}<h2>Waiting on the DataLoader, by what it ran</h2><table><tr><th>where</th><th>code, or what it does</th><th>share of samples</th></tr>
{% for d in w.sites.data %}<tr><td><code>{{ d.where }}</code></td><td>{% if d.code %}<code>{{ d.code }}</code>{% else %}{{ d.machinery or "" }}{% endif %}</td><td>{{ "%.0f"|format(100 * d.share_of_data) }}%</td></tr>{% endfor %}</table>{% endif %}
{% if w.window.op_times %}{% set step_ops = w.window.op_times|selectattr("in_step")|list %}{% set other_ops = w.window.op_times|rejectattr("in_step")|list %}
{% if step_ops %}<h2>The step's slowest ops <span class="muted">(forward, backward, optimizer; profiler window, host ms per step; on the CPU an op's own time{% if busy %}, less its threads' waits for a core, summed: beside busy processes a parallel op's can read below its work{% endif %})</span></h2>
{% for p in outgrown %}<p class="muted">Timed one call at a time, the {{ p.phase }}'s ops came to {{ "%.3f"|format(p.ops_ms) }} ms a step, more than the {{ p.phase }}'s {{ "%.3f"|format(p.phase_ms) }} ms: below, each of their {{ "{:,.0f}".format(p.calls) }} calls is {{ "%.1f"|format(p.excess_us) }} us less (0 at the least), so that they add to it.</p>{% endfor %}
<table><tr><th>op</th><th>dtype</th><th>phase</th><th>calls</th><th>ms</th><th>GFLOP/s</th></tr>
{% for o in step_ops[:12] %}{% set ms = clock(o) %}<tr><td><code>{{ o.op }}</code></td><td>{{ o.dtype or "-" }}</td><td>{{ o.phase or "-" }}</td><td>{{ "%.0f"|format(o.calls) }}</td>
<td>{{ "%.3f"|format(ms) }}</td><td>{{ "%.1f"|format(o.flops / (ms * 1e6)) if o.flops and ms and not busy else "" }}</td></tr>{% endfor %}</table>{% endif %}
{% if other_ops %}<h3>Ops outside the step's work <span class="muted">(the DataLoader's collate in "data", a save's in "checkpoint")</span></h3>
<table><tr><th>op</th><th>dtype</th><th>phase</th><th>calls</th><th>ms</th></tr>
{% for o in other_ops[:6] %}<tr><td><code>{{ o.op }}</code></td><td>{{ o.dtype or "-" }}</td><td>{{ o.phase }}</td><td>{{ "%.0f"|format(o.calls) }}</td>
<td>{{ "%.3f"|format(o.ms) }}</td></tr>{% endfor %}</table>{% endif %}{% endif %}
<h2>Hardware</h2><p>{{ r.hardware.cpu.model }} ({{ r.hardware.cpu.microarchitecture or "generation unknown" }}),
{{ r.hardware.cpu.physical_cores }} cores / {{ r.hardware.cpu.logical_threads }} threads; torch {{ r.hardware.torch_version }}.
{% for g in r.hardware.gpu.gpus %}<br>GPU {{ g.index }}: {{ g.name }}{% endfor %}
<br>Measured here: one tiny op costs {{ "%.2f"|format(r.context.dispatch_us) }} us to dispatch{% if r.context.cuda_op_us is not none %}
({{ "%.2f"|format(r.context.cuda_op_us) }} us on CUDA, a kernel launch included){% endif %}; matmul runs at {{ "%.0f"|format(r.context.matmul_gflops) }} GFLOP/s{% for d, g in r.context.dtype_gflops.items() %}
({{ "%.1f"|format(g) }} in {{ d }}){% endfor %}{% if r.context.optimizer_ms %}; one {{ w.optimizers.info.kind }} step on the run's
{{ w.optimizers.info.tensors }} parameter shapes takes {{ "%.2f"|format(r.context.optimizer_ms[0]) }} ms as configured,
{{ "%.2f"|format(r.context.optimizer_ms[1]) }} ms fused{% endif %}.</p>
{% for n in w.notes + r.notes %}<p class="muted">note: {{ n }}</p>{% endfor %}
</body></html>
"""


def doctor_html(report: DoctorReport) -> str:
    """Render the report as one HTML page with its plots inside."""
    w = report.watch
    plots = []
    if w.steps.samples:
        plots.append(("per-step phases", base64.b64encode(doctor_phases_png(w)).decode()))
    if w.steps.times_ms:
        plots.append(("step-time histogram", base64.b64encode(doctor_histogram_png(w)).decode()))
    util = doctor_util_png(w)
    if util is not None:
        plots.append(("GPU utilisation", base64.b64encode(util).decode()))
    env = Environment(autoescape=select_autoescape(default=True))
    return env.from_string(_TEMPLATE).render(r=report, w=w, plots=plots, title=report.script or "watched loop",
                                              label=prediction_words, process=process_line(report), window=window_lines(report),
                                              version=__version__, t=report.tried, measured=measured_words,
                                              applied=applied_words, place=edit_place, load=load_line(report),
                                              busy=others_busy(w), clock=lambda op: on_phase_clock(w, op),
                                              outgrown=outgrown(w, STEP_PHASES))
