"""A `Report` as one self-contained HTML page: inline CSS, SVG and script, nothing fetched.

Every string that came from a run (ids, task names, exception messages) is escaped; the
report's JSON rides along in a `<script type="application/json">` block so the file alone
carries both views. Each KPI card carries its exact value in `data-value` (what a test or a
script reads), and its text is the same value formatted for people.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections.abc import Iterable

from services.audit.verdict import verdict_kind
from services.core.alignment import fmt_value
from services.core.text import dumps
from services.core.times import fmt_duration, iso_z
from services.report.assets import CSS, JS
from services.report.model import Comparison, ExceptionGroup, Histogram, Kpis, Report, Ring, RunReport, TaskRow

NUM = ' class="num"'
STATUS_ICON = {"pass": "✓", "warn": "!", "fail": "✗", "skip": "–"}
RING_COLORS = (("passed", "var(--pass)"), ("partial", "var(--partial)"), ("failed", "var(--fail)"),
               ("errored", "var(--err)"), ("running", "var(--run)"))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\udc80-\udcff]")
_LONE = re.compile("[\ud800-\udfff]")


def esc(v: object) -> str:
    """Text for HTML: escaped, control characters shown as \\xNN (a report printed to a
    terminal must not carry a name's escape sequences into it), and a name's bytes that are
    not UTF-8 (read as lone surrogates) as \\xNN, as term_safe shows them."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "" if v is None else str(v))
    text = _SURROGATE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)
    text = _LONE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return html.escape(text, quote=True)


# ---- number formats (shared with the JSON only through the model: these are for people) ----

def fmt_score(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def fmt_pct(v: float | None, nd: int = 1) -> str:
    return "—" if v is None else f"{100 * v:.{nd}f}%"


def fmt_count(v: int | None) -> str:
    if v is None:
        return "—"
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.1f}{unit}"
    return str(v)


def fmt_cost(v: float | None) -> str:
    return "—" if v is None else f"${v:,.2f}"


def fmt_dur(v: float | None) -> str:
    return "—" if v is None else fmt_duration(v)


def _num(v: float | int | None) -> str:
    """A data-sort / data-value attribute: the exact number, or empty."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return repr(v) if isinstance(v, float) else str(v)


def _signed(v: float | None) -> str:
    if v is None:
        return '<span class="muted">—</span>'
    cls = "pos" if v > 0 else "neg" if v < 0 else "muted"
    return f'<span class="{cls}">{v:+.3f}</span>'


# ---- pieces ---------------------------------------------------------------------------------

def kpi_cards(k: Kpis, error_limit: float | None, valid_min: float | None = None) -> str:
    over = error_limit is not None and k.error_fraction is not None and k.error_fraction > error_limit
    short = (valid_min is not None and k.expected is not None and k.valid_fraction is not None
             and k.valid_fraction < valid_min)
    tok_sub = (f"in {fmt_count(k.n_input_tokens)} · out {fmt_count(k.n_output_tokens)}"
               if k.tokens is not None else "not recorded")
    cards = [
        ("score", "Score", fmt_score(k.score), _num(k.score), "the run's own mean", False, ""),
        ("valid", "Valid / expected", f"{k.valid}/{k.expected if k.expected is not None else '?'}",
         _num(k.valid), f"{fmt_pct(k.valid_fraction)} of expected", short,
         f' data-expected="{_num(k.expected)}"'),
        ("errors", "Error %", fmt_pct(k.error_fraction), _num(k.error_fraction),
         f"{k.invalid_errors} invalid errors / {k.finished} finished · {k.errored} errored"
         + (f" (limit {fmt_pct(error_limit, 0)})" if error_limit else ""),
         over, ""),
        ("tokens", "Tokens", fmt_count(k.tokens), _num(k.tokens), tok_sub, False, ""),
        ("cost", "Cost", fmt_cost(k.cost_usd), _num(k.cost_usd), "USD" if k.cost_usd is not None else "not recorded",
         False, ""),
        ("duration", "Duration", fmt_dur(k.duration_s), _num(k.duration_s),
         f"{k.running} still running" if k.running else "first start to last finish", False, ""),
    ]
    out = ['<div class="kpis">']
    for key, label, text, value, sub, bad, extra in cards:
        out.append(f'<div class="kpi{" bad" if bad else ""}" data-kpi="{key}" data-value="{esc(value)}"{extra}>'
                   f'<span class="label">{esc(label)}</span><span class="value">{esc(text)}</span>'
                   f'<span class="sub">{esc(sub)}</span></div>')
    out.append("</div>")
    return "".join(out)


def ring_svg(r: Ring) -> str:
    radius, width = 52.0, 16.0
    circ = 2 * math.pi * radius
    total = r.finished + r.running
    parts = [f'<svg class="ring" viewBox="0 0 140 140" width="140" height="140" role="img" '
             f'aria-label="pass rate {esc(fmt_pct(r.pass_rate))}">',
             f'<circle cx="70" cy="70" r="{radius}" fill="none" stroke="var(--line)" stroke-width="{width}"/>']
    offset = 0.0
    for name, color in RING_COLORS:
        n = getattr(r, name)
        if not n or not total:
            continue
        length = circ * n / total
        parts.append(f'<circle class="seg {name}" data-count="{n}" cx="70" cy="70" r="{radius}" fill="none" '
                     f'stroke="{color}" stroke-width="{width}" stroke-dasharray="{length:.3f} {circ - length:.3f}" '
                     f'stroke-dashoffset="{-offset:.3f}" transform="rotate(-90 70 70)"/>')
        offset += length
    parts.append(f'<text x="70" y="68" text-anchor="middle" font-size="22" font-weight="700" fill="currentColor" '
                 f'class="ring-rate">{esc(fmt_pct(r.pass_rate, 0))}</text>'
                 f'<text x="70" y="88" text-anchor="middle" font-size="11" fill="currentColor" opacity=".7">'
                 f'passed</text></svg>')
    legend = "".join(f'<li><span class="sw" style="background:{c}"></span>{esc(n)} {getattr(r, n)}</li>'
                     for n, c in RING_COLORS if getattr(r, n))
    return (f'<figure class="pass-ring" data-pass-rate="{_num(r.pass_rate)}">{"".join(parts)}'
            f'<ul class="legend">{legend}</ul><figcaption>attempts by outcome; a pass is full marks '
            f'(reward ≥ 1)</figcaption></figure>')


def histogram_svg(h: Histogram) -> str:
    w, hgt, pad = 300.0, 140.0, 18.0
    n = len(h.counts)
    top = max(h.counts, default=0) or 1
    bar_w = (w - 2 * pad) / max(n, 1)
    parts = [f'<svg class="hist" viewBox="0 0 {w:g} {hgt:g}" width="{w:g}" height="{hgt:g}" role="img" '
             f'aria-label="reward histogram">']
    base = hgt - pad
    for i, c in enumerate(h.counts):
        bh = (base - pad) * c / top
        x = pad + i * bar_w
        parts.append(f'<rect class="bin" data-lo="{h.edges[i]:g}" data-hi="{h.edges[i + 1]:g}" data-count="{c}" '
                     f'x="{x + 1:.2f}" y="{base - bh:.2f}" width="{bar_w - 2:.2f}" height="{bh:.2f}" '
                     f'fill="var(--accent)"><title>{h.edges[i]:g}–{h.edges[i + 1]:g}: {c}</title></rect>')
        if c:
            parts.append(f'<text x="{x + bar_w / 2:.2f}" y="{base - bh - 3:.2f}" text-anchor="middle" '
                         f'font-size="9" fill="currentColor">{c}</text>')
    parts.append(f'<line x1="{pad}" y1="{base}" x2="{w - pad}" y2="{base}" stroke="var(--line)"/>'
                 f'<text x="{pad}" y="{hgt - 4}" font-size="10" fill="currentColor">0</text>'
                 f'<text x="{w / 2}" y="{hgt - 4}" font-size="10" text-anchor="middle" fill="currentColor">0.5</text>'
                 f'<text x="{w - pad}" y="{hgt - 4}" font-size="10" text-anchor="end" fill="currentColor">1</text>'
                 '</svg>')
    note = f"; {h.outside} outside [0, 1], clipped" if h.outside else ""
    return (f'<figure class="reward-hist">{"".join(parts)}<figcaption>rewards of valid attempts '
            f'({sum(h.counts)}){esc(note)}</figcaption></figure>')


def audit_block(run: RunReport) -> str:
    a = run.audit
    rows = "".join(
        f'<tr data-check="{esc(c.id)}"><td class="status {esc(c.status.value)}">'
        f'{STATUS_ICON.get(c.status.value, "")} {esc(c.status.value)}</td><td>{esc(c.title)}</td>'
        f'<td>{esc(c.evidence)}</td><td>{esc(c.action or "")}</td></tr>'
        for c in a.checks)
    notes = "".join(f"<li>{esc(n)}</li>" for n in a.notes)
    return (f'<h3>Audit</h3><p>Verdict <span class="verdict {verdict_kind(a.verdict)}" data-verdict="{esc(a.verdict)}">'
            f'{esc(a.verdict.upper())}</span> {esc(a.reason)}</p>'
            + (f'<p class="ask">Decide: {esc(a.ask)}</p>' if a.ask and a.ask != a.reason else "")
            + '<div class="scroll"><table class="checks"><thead><tr><th></th><th>check</th><th>evidence</th>'
            f'<th>action</th></tr></thead><tbody>{rows}</tbody></table></div>'
            + (f'<ul class="notes">{notes}</ul>' if notes else ""))


def alignment_block(run: RunReport) -> str:
    res = run.alignment
    if res is None:
        return ""
    al = res.alignment
    head = f'<h3>Alignment with baseline {esc(res.baseline)}</h3>'
    if res.baseline_source:
        head += f'<p class="muted">from {esc(res.baseline_source)}</p>'
    body = f'<p class="status {esc(res.status.value)}" data-alignment="{esc(res.status.value)}">{esc(res.evidence)}</p>'
    if al is not None:
        ci = res.ci
        body += (f'<p>actual <b data-actual="{_num(al.actual)}">{al.actual:.3f}</b>'
                 + (f" (95% CI {ci[0]:.3f}–{ci[1]:.3f})" if ci else "")
                 + f' vs expected <b data-expected="{_num(al.expected)}">{al.expected:.3f}</b> over '
                 f'{al.compared} attempts</p>')
    if res.drift:
        rows = "".join(
            f'<tr data-field="{esc(d.field)}"><td>{esc(d.field)}</td><td>{esc(fmt_value(d.expected))}</td>'
            f'<td>{esc(fmt_value(d.actual) if d.known else "not recorded")}</td>'
            f'<td class="status {"fail" if d.differs else "skip" if not d.known else "pass"}">'
            f'{"drift" if d.differs else "unknown" if not d.known else "same"}</td></tr>' for d in res.drift)
        body += (f'<div class="scroll"><table class="drift"><thead><tr><th>field</th><th>baseline</th><th>run</th>'
                 f'<th></th></tr></thead><tbody>{rows}</tbody></table></div>')
    if al is not None and al.gaps:
        rows = "".join(f'<tr><td>{esc(g.task)}</td><td class="num">{g.expected:.2f}</td>'
                       f'<td class="num">{g.actual:.2f}</td><td class="num">{g.attempts}</td></tr>' for g in al.gaps)
        body += ('<div class="scroll"><table class="gaps"><thead><tr><th>top gap task</th><th class="num">expected'
                 f'</th><th class="num">actual</th><th class="num">attempts</th></tr></thead><tbody>{rows}</tbody>'
                 '</table></div>')
    return head + body


def exceptions_block(groups: list[ExceptionGroup]) -> str:
    if not groups:
        return '<h3>Exceptions</h3><p class="muted">none: every finished attempt has a reward</p>'
    rows = "".join(
        f'<tr data-exception="{esc(g.exception)}"><td>{esc(g.exception)}</td><td class="num">{g.count}</td>'
        f'<td>{esc(g.failure_class or "")}</td><td>{"benign" if g.benign else ""}</td>'
        f'<td>{esc(g.example.task)}<br><span class="muted">{esc(g.example.trial)}</span></td>'
        f'<td class="msg">{esc(g.example.message or "")}</td></tr>'
        for g in groups)
    return ('<h3>Exceptions</h3><div class="scroll"><table class="exceptions"><thead><tr><th>exception</th>'
            '<th class="num">count</th><th>class</th><th></th><th>example</th><th>message</th></tr></thead>'
            f'<tbody>{rows}</tbody></table></div>')


TASK_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("task", "task", False), ("attempts", "attempts", True), ("valid", "valid", True),
    ("errored", "errored", True), ("passed", "passed", True), ("mean_reward", "mean reward", True),
    ("outcome", "outcome", True), ("exceptions", "exceptions", False), ("duration", "mean dur.", True),
    ("tokens", "tokens", True),
)


def _task_cells(t: TaskRow) -> Iterable[tuple[str, str]]:
    yield esc(t.task), esc(t.task)
    yield str(t.attempts), str(t.attempts)
    yield str(t.valid), str(t.valid)
    yield str(t.errored), str(t.errored)
    yield str(t.passed), str(t.passed)
    yield _num(t.mean_reward), fmt_score(t.mean_reward)
    yield _num(t.outcome), fmt_score(t.outcome)
    yield esc(", ".join(t.exceptions)), esc(", ".join(t.exceptions))
    yield _num(t.mean_duration_s), fmt_dur(t.mean_duration_s)
    yield _num(t.tokens), fmt_count(t.tokens)


def tasks_table(run: RunReport, table_id: str) -> str:
    head = "".join(f'<th data-key="{k}"{NUM if num else ""}>{esc(label)}</th>'
                   for k, label, num in TASK_COLUMNS)
    body = []
    for t in run.tasks:
        cells = "".join(f'<td data-sort="{sort}"{NUM if num else ""}>{text}</td>'
                        for (sort, text), (_, _, num) in zip(_task_cells(t), TASK_COLUMNS, strict=True))
        body.append(f'<tr data-task="{esc(t.task)}">{cells}</tr>')
    return (f'<h3>Tasks ({len(run.tasks)})</h3><p class="muted">click a header to sort; outcome is the mean over '
            f'finished attempts with errors as 0</p><div class="scroll"><table class="sortable tasks" '
            f'id="{esc(table_id)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')


def run_section(run: RunReport, index: int, error_limit: float | None, valid_min: float | None = None) -> str:
    where = " · ".join(esc(x) for x in (run.benchmark or "—", run.model or "—",
                                           f"{run.state}" + (f" ({run.state_raw})" if run.state_raw else ""),
                                           run.source_label or run.source) if x)
    problems = ("<h3>Read problems</h3><ul>" + "".join(f"<li>{esc(p)}</li>" for p in run.problems[:50]) + "</ul>"
                if run.problems else "")
    return (f'<section class="run" id="run-{index}" data-experiment="{esc(run.id)}">'
            f'<h2>{esc(run.id)}</h2><p class="muted">{where}</p>'
            f'{kpi_cards(run.kpis, error_limit, valid_min)}'
            f'<div class="charts">{ring_svg(run.ring)}{histogram_svg(run.histogram)}</div>'
            f'{audit_block(run)}{alignment_block(run)}{exceptions_block(run.exceptions)}'
            f'{tasks_table(run, f"tasks-{index}")}{problems}</section>')


def comparison_section(c: Comparison, runs: list[RunReport]) -> str:
    heads = "".join(f'<th class="num run-id">{esc(r.id)}</th>' for r in runs)
    kpi_rows = [
        ("score", [fmt_score(r.kpis.score) for r in runs], c.score_delta),
        ("pass rate", [fmt_pct(r.ring.pass_rate) for r in runs], c.pass_rate_delta),
        ("valid / expected", [f"{r.kpis.valid}/{r.kpis.expected or '?'}" for r in runs], None),
        ("error %", [fmt_pct(r.kpis.error_fraction) for r in runs], None),
        ("tokens", [fmt_count(r.kpis.tokens) for r in runs], None),
        ("cost", [fmt_cost(r.kpis.cost_usd) for r in runs], None),
        ("verdict", [r.audit.verdict for r in runs], None),
    ]
    krows = "".join(f'<tr><td>{esc(name)}</td>' + "".join(f'<td class="num">{esc(v)}</td>' for v in vals)
                    + f'<td class="num">{_signed(d) if d is not None else ""}</td></tr>'
                    for name, vals, d in kpi_rows)
    task_heads = "".join(f'<th class="num run-id" data-key="run{i}">{esc(r.id)}</th>' for i, r in enumerate(runs))
    trows = "".join(
        f'<tr data-task="{esc(t.task)}"><td data-sort="{esc(t.task)}">{esc(t.task)}</td>'
        + "".join(f'<td class="num" data-sort="{_num(o)}">{fmt_score(o)}</td>' for o in t.outcomes)
        + f'<td class="num" data-sort="{_num(t.delta)}">{_signed(t.delta)}</td></tr>'
        for t in c.tasks)
    only = "".join(f"<li>only in {esc(k)}: {esc(', '.join(v[:30]))}{' …' if len(v) > 30 else ''}</li>"
                   for k, v in c.only_in.items())
    return (f'<section class="comparison" id="comparison"><h2>{esc(c.benchmark)}: runs compared</h2>'
            f'<p class="muted">delta = last run − first run; per task, the outcome is the mean over finished '
            f'attempts with errors as 0</p>'
            f'<div class="scroll"><table class="kpi-compare"><thead><tr><th></th>{heads}<th class="num">delta</th>'
            f'</tr></thead><tbody>{krows}</tbody></table></div>'
            + (f"<ul>{only}</ul>" if only else "")
            + f'<h3>Per-task deltas ({len(c.tasks)})</h3><div class="scroll"><table class="sortable deltas" '
            f'id="deltas"><thead><tr><th data-key="task">task</th>{task_heads}<th class="num" data-key="delta">delta'
            f'</th></tr></thead><tbody>{trows}</tbody></table></div></section>')


def report_json(report: Report, indent: int | None = None) -> str:
    """The report as JSON: any name survives (bytes that are not UTF-8 as \\udcXX, which JSON
    readers take back exactly), and no raw control character reaches the output."""
    return dumps(report.model_dump(mode="json"), indent=indent)


# the CSP names the one script the page runs by its hash: nothing else inline may run
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()


def _json_block(report: Report) -> str:
    data = report_json(report)
    # a JSON string can hold "</script>": keep the block closed where it should be
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="evaldesk-report">{data}</script>'


def render_html(report: Report, error_limit: float | None = None, valid_min: float | None = None) -> str:
    """The page; `error_limit` and `valid_min` are the policy's thresholds (the cards that cross
    them are marked), never written here."""
    runs = report.runs
    cols = min(len(runs), 3) if report.comparison is not None else 1
    notes = "".join(f"<li>{esc(n)}</li>" for n in report.notes)
    sections = "".join(run_section(r, i, error_limit, valid_min) for i, r in enumerate(runs))
    comparison = comparison_section(report.comparison, runs) if report.comparison else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
        f'script-src \'{SCRIPT_HASH}\'; img-src data:">'
        f'<title>evaldesk report — {esc(report.title)}</title><style>{CSS}</style></head><body>'
        f'<header><h1>{esc(report.title)}</h1><p class="meta">evaldesk report · generated '
        f'{esc(iso_z(report.generated_at))} · {len(runs)} run(s)</p>'
        + (f'<ul class="notes">{notes}</ul>' if notes else "")
        + f'</header>{comparison}<div class="runs" style="--cols:{cols}">{sections}</div>'
        '<footer>One self-contained file: no network, no external assets. The same content as JSON is in the '
        '<code>evaldesk-report</code> block of this page and from <code>evaldesk --batch report --format json</code>.'
        f'</footer>{_json_block(report)}<script>{JS}</script></body></html>\n'
    )
