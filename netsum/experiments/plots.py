"""The experiment plots (PNG), from the rows of a sweep's CSV files.

Owns: time vs tensor size, per-worker goodput vs workers, the ring/INA speed-up next to the
2(n-1)/n law, retransmissions vs injected loss, the chunk-latency CDF and per-link
utilisation over time.  Every plot shows the median of a point's repetitions with min-max
bars, the theory it is compared with as dashed lines, titles, units and legends; a plot with
no data for it says so on the figure instead of being left out.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from netsum.experiments.points import as_float as _f  # noqa: E402
from netsum.experiments.points import size_text  # noqa: E402

__all__ = ["PLOTS", "TELEMETRY_COLUMNS", "QUANTILES", "write_all", "write_from", "main",
           "pick_utilisation_runs", "utilisation_series", "latency_quantile_rows",
           "plot_time_vs_size", "plot_goodput_vs_workers", "plot_speedup", "plot_retx_vs_loss",
           "plot_latency_cdf", "plot_utilisation"]

Row = Mapping[str, object]
COLOURS = {"ina": "tab:blue", "ring": "tab:orange", "ps": "tab:green"}
NAMES = {"ina": "INA (switch)", "ring": "ring (hosts, TCP)", "ps": "parameter server (TCP)"}
#: Colour maps of the same hues, for several lines of one algorithm (light to dark).
CMAPS = {"ina": "Blues", "ring": "Oranges", "ps": "Greens"}
MARKERS = {"single": "o", "tree": "s"}
TOPO_COLOURS = {"single": "tab:purple", "tree": "tab:brown"}


def _ok(r: Row) -> bool:
    return str(r.get("ok")) in ("True", "true", "1")


def _median(v: Sequence[float]) -> float:
    s = sorted(x for x in v if not math.isnan(x))
    if not s:
        return float("nan")
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def _stats(rows: Sequence[Row], field: str) -> tuple[float, float, float]:
    v = [_f(r[field]) for r in rows]
    v = [x for x in v if not math.isnan(x)]
    if not v:
        return float("nan"), float("nan"), float("nan")
    return _median(v), min(v), max(v)


def _group(rows: Sequence[Row], keys: Sequence[str]) -> dict[tuple[object, ...], list[Row]]:
    out: dict[tuple[object, ...], list[Row]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def _mb(size_bytes: object) -> float:
    return _f(size_bytes) / 2**20


def _conditions(rows: Sequence[Row], skip: Sequence[str]) -> str:
    """The settings every row shares, for a title ('K=256, 20 Mb/s links, ...')."""
    parts = []
    for key, fmt in (("k", "K={}"), ("bw_mbps", "{} Mb/s links"), ("loss", "loss {}"),
                     ("target", "{} switch"), ("size_bytes", "{} per worker")):
        if key in skip:
            continue
        vals = {r[key] for r in rows}
        if len(vals) == 1:
            v = vals.pop()
            if key == "bw_mbps":
                v = f"{_f(v):g}" if _f(v) else "unshaped"
                parts.append(f"{v} Mb/s links" if v != "unshaped" else "unshaped links")
                continue
            if key == "size_bytes":
                v = size_text(v)
            if key == "loss":
                v = f"{100 * _f(v):g} %"
            parts.append(fmt.format(v))
    return ", ".join(parts)


def _empty(ax: Axes, title: str, what: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center", transform=ax.transAxes,
            fontsize=12, color="gray")


def _errbar(ax: Axes, xs: list[float], med: list[float], lo: list[float], hi: list[float],
            label: str, color: str | None = None, marker: str = "o") -> None:
    """Medians joined by a line, with bars from the min to the max."""
    yerr = [[max(0.0, m - a) for m, a in zip(med, lo)], [max(0.0, b - m) for m, b in zip(med, hi)]]
    ax.errorbar(xs, med, yerr=yerr, capsize=3, linewidth=1.5, markersize=6, label=label,
                color=color, marker=marker)


def _baseline_loss(rows: Sequence[Row]) -> list[Row]:
    """The rows at the sweep's smallest loss (normally 0)."""
    ok = [r for r in rows if _ok(r)]
    if not ok:
        return []
    low = min(_f(r["loss"]) for r in ok)
    return [r for r in ok if _f(r["loss"]) == low]


def plot_time_vs_size(rows: Sequence[Row], ax: Axes) -> None:
    data = _baseline_loss(rows)
    if not data:
        return _empty(ax, "All-reduce time vs tensor size", "no successful runs")
    for (algo, n, topo), grp in sorted(_group(data, ("algo", "workers", "topo")).items(),
                                       key=lambda kv: str(kv[0])):
        pts = sorted(_group(grp, ("size_bytes",)).items(), key=lambda kv: _f(kv[0][0]))
        xs = [_mb(k[0]) for k, _ in pts]
        st = [_stats(g, "time_s") for _, g in pts]
        colour = COLOURS.get(str(algo), "black")
        _errbar(ax, xs, [s[0] for s in st], [s[1] for s in st], [s[2] for s in st],
                color=colour, marker=MARKERS.get(str(topo), "o"),
                label=f"{NAMES.get(str(algo), algo)}, n={n}, {topo}")
        theory = [_median([_f(r["theory_time_s"]) for r in g]) for _, g in pts]
        if not all(math.isnan(t) for t in theory):
            ax.plot(xs, theory, linestyle="--", color=colour, alpha=0.6, linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tensor size per worker (MiB of float32)")
    ax.set_ylabel("all-reduce time (s)")
    ax.set_title("All-reduce time vs tensor size\n" + _conditions(data, ("size_bytes",)) +
                 "; dashed: link-rate theory", fontsize=10)
    ax.legend(fontsize=7)


def plot_goodput_vs_workers(rows: Sequence[Row], ax: Axes) -> None:
    data = _baseline_loss(rows)
    if data:
        big = max(_f(r["size_bytes"]) for r in data)
        data = [r for r in data if _f(r["size_bytes"]) == big]
    if not data:
        return _empty(ax, "Per-worker goodput vs workers", "no successful runs")
    theory_drawn: set[str] = set()
    for (algo, topo), grp in sorted(_group(data, ("algo", "topo")).items(),
                                    key=lambda kv: str(kv[0])):
        pts = sorted(_group(grp, ("workers",)).items(), key=lambda kv: _f(kv[0][0]))
        xs = [_f(k[0]) for k, _ in pts]
        st = [_stats(g, "goodput_mbps") for _, g in pts]
        colour = COLOURS.get(str(algo), "black")
        meds = [s[0] for s in st]
        change = ""
        if len(meds) > 1 and meds[0] > 0 and not math.isnan(meds[-1]):
            change = f": n={xs[0]:g} to {xs[-1]:g} {100 * (meds[-1] / meds[0] - 1):+.0f} %"
        _errbar(ax, xs, meds, [s[1] for s in st], [s[2] for s in st],
                color=colour, marker=MARKERS.get(str(topo), "o"),
                label=f"{NAMES.get(str(algo), algo)}, {topo}{change}")
        theory = [32 * _f(g[0]["elements"]) / _f(g[0]["theory_time_s"]) / 1e6
                  if _f(g[0]["theory_time_s"]) > 0 else float("nan") for _, g in pts]
        if str(algo) not in theory_drawn and not all(math.isnan(t) for t in theory):
            theory_drawn.add(str(algo))
            ax.plot(xs, theory, linestyle="--", color=colour, alpha=0.6, linewidth=1,
                    label=f"theory {algo} (link rate, its framing)")
    bw = {_f(r["bw_mbps"]) for r in data}
    if len(bw) == 1 and next(iter(bw)) > 0:
        ax.axhline(next(iter(bw)), color="gray", linestyle=":", linewidth=1, label="link rate")
    ax.set_xlabel("workers (n)")
    ax.set_ylabel("goodput per worker (Mb/s of float32 tensor)")
    ax.set_ylim(bottom=0)
    ax.set_xticks(sorted({_f(r["workers"]) for r in data}))
    ax.set_title("Per-worker goodput vs workers\n" + _conditions(data, ()), fontsize=10)
    ax.legend(fontsize=7, loc="lower left")


def plot_speedup(rows: Sequence[Row], ax: Axes) -> None:
    data = _baseline_loss(rows)
    series: dict[tuple[object, ...], list[tuple[float, float, float, float, float]]] = {}
    for key, grp in _group(data, ("topo", "size_bytes", "bw_mbps", "k", "workers")).items():
        ina = [r for r in grp if r["algo"] == "ina"]
        ring = [r for r in grp if r["algo"] == "ring"]
        if not ina or not ring:
            continue
        (im, ilo, ihi), (rm, rlo, rhi) = _stats(ina, "time_s"), _stats(ring, "time_s")
        model = _f(ring[0]["theory_time_s"]) / _f(ina[0]["theory_time_s"]) \
            if _f(ina[0]["theory_time_s"]) > 0 else float("nan")
        series.setdefault(key[:4], []).append((_f(key[4]), rm / im, rlo / ihi, rhi / ilo, model))
    if not series:
        return _empty(ax, "INA speed-up over the ring all-reduce",
                      "needs ina and ring runs at the same point")
    n_max = 2.0
    for (topo, size, bw, k), pts in sorted(series.items(), key=lambda kv: str(kv[0])):
        pts.sort()
        xs = [p[0] for p in pts]
        n_max = max(n_max, max(xs))
        label = f"measured, {topo}, {size_text(size)}, K={k}"
        if len(series) == 1:
            label = f"measured, {topo}"
        _errbar(ax, xs, [p[1] for p in pts], [p[2] for p in pts], [p[3] for p in pts],
                marker=MARKERS.get(str(topo), "o"), label=label,
                color=TOPO_COLOURS.get(str(topo)))
        if not all(math.isnan(p[4]) for p in pts):
            ax.plot(xs, [p[4] for p in pts], linestyle="--", linewidth=1, color="dimgray",
                    marker=MARKERS.get(str(topo), "o"), markersize=3,
                    label=f"link-rate model with each one's framing, {topo}")
    grid = [2 + i * (n_max - 2) / 50 for i in range(51)]
    ax.plot(grid, [2 * (n - 1) / n for n in grid], color="black", linewidth=1.2,
            label="theory 2(n-1)/n")
    ax.plot(grid, [0.9 * 2 * (n - 1) / n for n in grid], color="gray", linestyle=":",
            linewidth=1, label="goal: 90 % of theory")
    ax.axhline(1.0, color="gray", linewidth=0.6)
    ax.set_xlabel("workers (n)")
    ax.set_ylabel("speed-up: ring time / INA time")
    ax.set_ylim(bottom=0)
    ax.set_title("INA speed-up over the ring all-reduce\n" +
                 _conditions(data, ("workers",)), fontsize=10)
    ax.legend(fontsize=7, loc="lower right")


def plot_retx_vs_loss(rows: Sequence[Row], axes: Sequence[Axes]) -> None:
    ok = [r for r in rows if _ok(r)]
    ax, ax2 = axes
    if not ok:
        _empty(ax, "Retransmissions vs injected loss", "no successful runs")
        return _empty(ax2, "Slow-down under loss", "no successful runs")
    base: dict[tuple[object, ...], float] = {}
    for key, grp in _group(ok, ("algo", "workers", "topo", "size_bytes")).items():
        low = min(_f(r["loss"]) for r in grp)
        base[key] = _stats([r for r in grp if _f(r["loss"]) == low], "time_s")[0]
    losses: set[float] = set()
    for (algo, n, topo, size), grp in sorted(
            _group(ok, ("algo", "workers", "topo", "size_bytes")).items(),
            key=lambda kv: str(kv[0])):
        pts = sorted(_group(grp, ("loss",)).items(), key=lambda kv: _f(kv[0][0]))
        xs = [100 * _f(k[0]) for k, _ in pts]
        losses.update(xs)
        st = [_stats(g, "retx_fraction") for _, g in pts]
        colour = COLOURS.get(str(algo), "black")
        label = f"{NAMES.get(str(algo), algo)}, n={n}, {topo}"
        _errbar(ax, xs, [100 * s[0] for s in st], [100 * s[1] for s in st],
                [100 * s[2] for s in st], color=colour, marker=MARKERS.get(str(topo), "o"),
                label=label)
        b = base[(algo, n, topo, size)]
        slow = [_stats(g, "time_s") for _, g in pts]
        _errbar(ax2, xs, [s[0] / b for s in slow], [s[1] / b for s in slow],
                [s[2] / b for s in slow], color=colour, marker=MARKERS.get(str(topo), "o"),
                label=label)
    grid = sorted(losses | {0.0})
    ax.plot(grid, [100 * (1 - (1 - p / 100) ** 2) for p in grid], color="black",
            linestyle="--", linewidth=1, label="a round trip lost: 1-(1-p)^2")
    ax.set_xlabel("injected loss per link and direction (%)")
    ax.set_ylabel("retransmitted / sent packets (%)")
    ax.set_title("Retransmissions vs injected loss\n" + _conditions(ok, ("loss",)), fontsize=10)
    ax.legend(fontsize=7)
    ax2.axhline(1.0, color="gray", linewidth=0.6)
    ax2.set_xlabel("injected loss per link and direction (%)")
    ax2.set_ylabel("time / time without loss")
    ax2.set_title("Slow-down under loss", fontsize=10)
    ax2.legend(fontsize=7)


def plot_latency_cdf(quantiles: Sequence[Row], ax: Axes) -> None:
    """`quantiles`: rows (label, algo, q, latency_ms) with q from 0 to 1; `label` reads
    'ALGO n=N TOPO SIZE loss P'.  With both topologies, the tree only at its largest n."""
    if not quantiles:
        return _empty(ax, "Chunk-latency CDF", "no chunk latencies recorded")
    groups = _group(quantiles, ("label", "algo"))
    trees = [str(label) for label, _ in groups if " tree " in str(label)]
    stars = [str(label) for label, _ in groups if " tree " not in str(label)]

    def n_of(label: str) -> int:
        part = next((p for p in label.split() if p.startswith("n=")), "n=0")
        return int(part[2:])

    def loss_of(label: str) -> float:
        return _f(label.rsplit(" ", 1)[-1])
    keep_tree = set(trees) if not stars else {
        t for t in trees if n_of(t) == max(n_of(x) for x in trees)}
    shown = [((str(label), str(algo)), grp) for (label, algo), grp in groups.items()
             if " tree " not in str(label) or str(label) in keep_tree]
    shown.sort(key=lambda kv: (kv[0][1], n_of(kv[0][0]), loss_of(kv[0][0]), kv[0][0]))
    per_algo: dict[str, int] = {}
    for (_, algo), _grp in shown:
        per_algo[algo] = per_algo.get(algo, 0) + 1
    seen: dict[str, int] = {}
    for (label, algo), grp in shown:
        # One colour family per algorithm, light to dark in (n, loss) order: a sweep over
        # workers or over loss both read line by line.
        i, count = seen.get(algo, 0), per_algo[algo]
        seen[algo] = i + 1
        shade = 0.45 + 0.55 * (i / (count - 1) if count > 1 else 1.0)
        cmap = matplotlib.colormaps[CMAPS.get(algo, "Greys")]
        pts = sorted((_f(r["latency_ms"]), _f(r["q"])) for r in grp)
        ax.plot([max(p[0], 1e-3) for p in pts], [p[1] for p in pts], label=label,
                color=cmap(shade), linestyle="--" if " tree " in label else "-",
                linewidth=1.3)
    ax.set_xscale("log")
    ax.set_xlabel("chunk latency (ms): first send of this worker's contribution -> sum held")
    ax.set_ylabel("fraction of chunks")
    ax.set_ylim(0, 1)
    ax.set_title("Chunk-latency CDF (the workers of a run pooled; first repetition)",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left")


def plot_utilisation(series: Mapping[str, Sequence[tuple[float, str, float]]],
                     axes: Sequence[Axes], bw: float | None) -> None:
    """`series`: run label -> (time s, 'HOST up|down', utilisation 0..1) samples.  Thin lines:
    every link and direction; bold: the mean over links, per direction."""
    if not series:
        return _empty(axes[0], "Per-link utilisation", "no telemetry of shaped links")
    for ax, (label, pts) in zip(axes, series.items()):
        by: dict[str, list[tuple[float, float]]] = {}
        for t, link, u in pts:
            by.setdefault(link, []).append((t, 100 * u))
        for i, (link, vals) in enumerate(sorted(by.items())):
            vals.sort()
            ax.plot([v[0] for v in vals], [v[1] for v in vals], linewidth=0.6, alpha=0.45,
                    linestyle="-" if link.endswith("up") else "--",
                    color=plt.cm.tab10(i // 2 % 10))
        for direction, style in (("up", "-"), ("down", "--")):
            lines = [sorted(v) for k, v in by.items() if k.endswith(direction)]
            if not lines:
                continue
            times = [t for t, _ in lines[0]]
            mean = [sum(ln[i][1] for ln in lines if i < len(ln)) /
                    sum(1 for ln in lines if i < len(ln)) for i in range(len(times))]
            ax.plot(times, mean, color="black", linewidth=1.8, linestyle=style,
                    label=f"mean of {len(lines)} links, "
                          f"{'host to switch' if direction == 'up' else 'switch to host'}")
        ax.set_ylabel("utilisation (% of link)")
        ax.set_xlabel("time since the workers' common start (s)")
        ax.set_title(label, fontsize=9)
        ax.set_ylim(0, 115)
        ax.legend(fontsize=7, loc="lower center")


PLOTS = ("time_vs_size.png", "goodput_vs_workers.png", "speedup.png", "retx_vs_loss.png",
         "latency_cdf.png", "utilisation.png")


def _save(path: Path, fill: Callable[[], None], fig: plt.Figure) -> Path:
    try:
        fill()
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path


def write_all(out_dir: Path, rows: Sequence[Row], quantiles: Sequence[Row],
              utilisation: Mapping[str, Sequence[tuple[float, str, float]]],
              bw: float | None, suptitle: str = "") -> list[Path]:
    """Every plot of PLOTS into out_dir; returns the paths."""
    out = []
    fig, ax = plt.subplots(figsize=(8, 5.5))
    out.append(_save(out_dir / PLOTS[0], lambda: plot_time_vs_size(rows, ax), fig))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    out.append(_save(out_dir / PLOTS[1], lambda: plot_goodput_vs_workers(rows, ax), fig))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    out.append(_save(out_dir / PLOTS[2], lambda: plot_speedup(rows, ax), fig))
    fig, axs = plt.subplots(1, 2, figsize=(12, 5))
    out.append(_save(out_dir / PLOTS[3], lambda: plot_retx_vs_loss(rows, axs), fig))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    out.append(_save(out_dir / PLOTS[4], lambda: plot_latency_cdf(quantiles, ax), fig))
    n = max(1, len(utilisation))
    fig, axs_u = plt.subplots(n, 1, figsize=(10, 3.2 * n + 0.6), squeeze=False)
    util_axes = [a[0] for a in axs_u]

    def fill_util() -> None:
        plot_utilisation(utilisation, util_axes, bw)
        fig.suptitle("Per-link utilisation over time, 0.5 s averages (solid: host to switch, "
                     "dashed: switch to host; thin: each link)" +
                     (f"; {suptitle}" if suptitle else ""), fontsize=10)
    out.append(_save(out_dir / PLOTS[5], fill_util, fig))
    return out


def utilisation_series(telemetry: Sequence[Row], run: str, bw: float | None,
                       window: float = 0.5) -> list[tuple[float, str, float]]:
    """(mid-interval time, 'host up|down', fraction of the link rate) of every host interface
    of `run`, averaged over intervals of at least `window` seconds (htb sends in bursts, so
    0.1 s samples of a 2 Mb/s link swing around the rate), from telemetry rows in long format
    (netsum.experiments.telemetry)."""
    if not bw:
        return []
    cap = bw * 1e6 / 8
    cum: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in telemetry:
        if r["run"] != run or r["source"] != "iface" or not str(r["node"]).startswith("h"):
            continue
        if r["metric"] not in ("tx_bytes", "rx_bytes"):
            continue
        direction = "up" if r["metric"] == "tx_bytes" else "down"
        cum.setdefault((str(r["node"]), direction), []).append((_f(r["t_s"]), _f(r["value"])))
    out = []
    for (node, direction), pts in cum.items():
        pts.sort()
        t0, v0 = pts[0]
        for t1, v1 in pts[1:]:
            if t1 - t0 >= window - 1e-9:
                out.append(((t0 + t1) / 2, f"{node} {direction}", (v1 - v0) / (t1 - t0) / cap))
                t0, v0 = t1, v1
    return out


QUANTILES = tuple(i / 100 for i in range(101)) + (0.995, 0.999)


def latency_quantile_rows(label: str, algo: str, latencies_s: Sequence[float]) -> list[Row]:
    """Rows (label, algo, q, latency_ms) of the pooled latencies' quantiles, for the CDF."""
    s = sorted(latencies_s)
    if not s:
        return []
    out: list[Row] = []
    for q in sorted(QUANTILES):
        pos = q * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        v = s[lo] + (s[hi] - s[lo]) * (pos - lo)
        out.append({"label": label, "algo": algo, "q": q, "latency_ms": v * 1e3})
    return out


TELEMETRY_COLUMNS = ("run", "t_s", "source", "node", "item", "metric", "value")


def pick_utilisation_runs(rows: Sequence[Row]) -> dict[str, Row]:
    """Per algorithm, the run the utilisation plot shows: first repetition, lowest loss, the
    star before the tree, then the most workers and the biggest tensor."""
    best: dict[str, tuple[tuple[object, ...], Row]] = {}
    low = min((_f(r["loss"]) for r in rows), default=0.0)
    for r in rows:
        if _f(r["rep"]) != 0 or not _f(r["bw_mbps"]):
            continue
        key = (_f(r["loss"]) == low, r["topo"] == "single", _f(r["workers"]),
               _f(r["size_bytes"]))
        algo = str(r["algo"])
        if algo not in best or key > best[algo][0]:
            best[algo] = (key, r)
    order = {a: i for i, a in enumerate(("ina", "ring", "ps"))}
    return {algo: r for algo, (_, r) in sorted(best.items(),
                                                key=lambda kv: order.get(kv[0], 9))}


def write_from(out_dir: Path, rows: Sequence[Row], quantiles: Sequence[Row],
               telemetry: Sequence[Row]) -> list[Path]:
    """Every plot from a sweep's rows (results.csv, latency_quantiles.csv, telemetry)."""
    util: dict[str, list[tuple[float, str, float]]] = {}
    bw: float | None = None
    picked = pick_utilisation_runs(rows)
    wanted = {str(r["run"]) for r in picked.values()}
    mine = [t for t in telemetry if str(t["run"]) in wanted]
    for algo, r in picked.items():
        bw = _f(r["bw_mbps"]) or None
        series = utilisation_series(mine, str(r["run"]), bw)
        if series:
            label = (f"{NAMES.get(algo, algo)}: n={r['workers']}, {r['topo']}, "
                     f"{size_text(r['size_bytes'])}, loss {_f(r['loss']):g}, "
                     f"{_f(r['bw_mbps']):g} Mb/s links; {_f(r['time_s']):.2f} s")
            util[label] = series
    return write_all(out_dir, rows, quantiles, util, bw)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m netsum.experiments.plots DIR`: redraw a sweep's plots from its CSV files."""
    import argparse
    import csv
    import gzip

    from netsum.experiments.points import read_csv
    p = argparse.ArgumentParser(prog="python -m netsum.experiments.plots",
                                description="Redraw the plots of a sweep's output directory.")
    p.add_argument("dir", type=Path)
    a = p.parse_args(argv)
    try:
        rows = read_csv(a.dir / "results.csv")
        quantiles = read_csv(a.dir / "latency_quantiles.csv")
        tel_path = a.dir / "telemetry.csv.gz"
        telemetry: list[Row] = []
        if tel_path.exists():
            with gzip.open(tel_path, "rt", newline="") as fh:
                telemetry = [{k: (v if k in ("run", "source", "node", "item", "metric")
                                  else _f(v)) for k, v in r.items()}
                             for r in csv.DictReader(fh)]
    except OSError as exc:
        print(f"expplots: error: {exc.filename}: {exc.strerror}")
        return 1
    paths = write_from(a.dir, rows, quantiles, telemetry)
    print(f"expplots: wrote {', '.join(p.name for p in paths)} in {a.dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
