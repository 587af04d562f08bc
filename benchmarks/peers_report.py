"""The report of ``benchmarks.peers_run``: which peers are installed, and the markdown table."""

from __future__ import annotations

from . import peers

QHYBRID_ROWS = ("qhybrid", "qhybrid GraphQLayer")


def availability() -> dict[str, str]:
    """Peer -> "installed" or why it cannot run ("not installed (No module named 'jax')")."""
    return {s: peers.available(s) or "installed" for s in peers.SYSTEMS if s not in QHYBRID_ROWS}


def _t(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _baseline(rows: dict) -> tuple[str | None, float | None]:
    for s in QHYBRID_ROWS:
        if rows.get(s, {}).get("status") == "ok":
            return s, rows[s]["median_s"]
    return None, None


def _cell(row: dict, base: tuple[str | None, float | None], system: str) -> tuple[str, str, str]:
    """(first step, steady median, ratio) cells of one row at one thread count."""
    if row is None:
        return "", "", ""
    if row.get("status") != "ok":
        return row["status"], "", ""
    if "median_s" not in row:
        return _t(row["first_s"]), row.get("note", ""), ""
    name, q = base
    ratio = ""
    if q and system != name:
        ratio = f"{row['median_s'] / q:.2f}x" + ("" if name == "qhybrid" else f" (vs {name})")
    steady = f"{_t(row['median_s'])} (x{row['repeats']})"
    return _t(row["first_s"]), steady, ratio


def markdown(report: dict) -> str:
    v = report["versions"]
    lines = [
        "# qhybrid vs the compiled peers" + (" (--quick: few steps, noisy)" if report.get("quick") else ""),
        "",
        f"Machine: {report['machine']}",
        "",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
        "",
        "Peers: " + "; ".join(f"{s}: {why}" for s, why in report["availability"].items()),
        "",
        "Step = loss and every gradient (inputs x too on W1/W2/W5). *first* = build + first step (JIT "
        "compilation, plan search); *steady* = median of the timed steps after one more warm-up, systems "
        "alternating round-robin in one process; ratio = peer / qhybrid (> 1: qhybrid faster). *max dev* = "
        f"max |loss and gradient difference| against the reference row (tolerance {report['tolerance']:g}).",
    ]
    runs = [r for r in report["runs"] if r.get("workloads")]
    for r in report["runs"]:
        if "error" in r:
            lines += ["", f"**{r['threads']} thread(s): {r['error']}**"]
    if not runs:
        return "\n".join(lines) + "\n"
    lines += ["", "Threads: " + "; ".join(
        f"{r['threads']}: cores {r['cpus']}, torch {r['torch_threads']}, XLA_FLAGS '{r['xla_flags']}'" for r in runs)]
    wids = list(dict.fromkeys(w for r in runs for w in r["workloads"]))
    head = "| workload | system |" + "".join(
        f" first ({r['threads']}t) | steady ({r['threads']}t) | ratio ({r['threads']}t) |" for r in runs)
    lines += ["", head + " max dev |", "|---|---|" + "---|---|---|" * len(runs) + "---|"]
    for wid in wids:
        systems = list(dict.fromkeys(s for r in runs for s in r["workloads"].get(wid, {})))
        for s in systems:
            cells, dev = [], ""
            for r in runs:
                rows = r["workloads"].get(wid, {})
                row = rows.get(s)
                cells += _cell(row, _baseline(rows), s)
                if row and "max_dev" in row and not dev:
                    dev = f"{row['max_dev']:.1e}" + (" **MISMATCH**" if row.get("mismatch") else "")
            lines.append(f"| {wid} | {s} | " + " | ".join(cells) + f" | {dev} |")
    lines += ["", f"Whole run: {report['wall_s'] / 60:.1f} min."]
    return "\n".join(lines) + "\n"
