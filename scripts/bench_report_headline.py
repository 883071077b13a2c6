"""BENCHMARKS.md's opening, for bench_report.py: fairlock against its peers
and against the limit, on loopback and on the emulated ~1 ms link, with
plain SVG bar charts (no plotting library), and what a figure means.

Its figures come from four runs: the lock bench (the floor, the unfair
SET NX cycle, fairlock's cycle and handoffs, the release script's server
time and a thread's wake-up) and the peers bench, each on loopback and
over the link. A run missing from target/ is taken from
docs/benchmarks/figures.json, which keeps each run's figures (and where
they came from) for the next report, so a report rewritten after one
bench still opens with all four.
"""
import datetime
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "docs" / "benchmarks" / "figures.json"
PLOTS = "docs/benchmarks"
NA = "n/a"


def _when(path):
    """The day a bench wrote `path` (its mtime), for "from"."""
    return datetime.date.fromtimestamp(path.stat().st_mtime).isoformat()


def _lock_run(own, own_path, link):
    """The lock bench's figures of the headline from one run, or None."""
    rt = own("round_trips", link)
    if not rt or rt.get("floor_us") is None:
        return None
    h, s, bd = own("handoff", link) or {}, own("handoff_same_client", link) or {}, own("breakdown", link) or {}
    release = next((o["us"] for o in bd.get("ops", []) if o["op"] == "release_handoff" and o["queued"] == 1), None)
    where = " over the ~1 ms link" if link else ""
    commit = f" (commit {bd['commit']})" if bd.get("commit") else ""
    return {"from": f"the lock bench of {_when(own_path('round_trips', link))}{where}{commit}",
            "link_delay_us": rt.get("link_delay_us"),
            "floor_us": rt["floor_us"], "cycle_us": rt.get("cycle_us"), "unfair_cycle_us": rt.get("unfair_cycle_us"),
            "handoff_p50_us": h.get("p50_us"), "handoff_p99_us": h.get("p99_us"),
            "same_client_p50_us": s.get("p50_us"), "same_client_p99_us": s.get("p99_us"),
            "release_handoff_us": release, "noop_us": bd.get("noop_us"), "wake_us": bd.get("condvar_wake_p50_us")}


def _peers_run(own, own_path, link):
    """The peers bench's figures from one run, or None."""
    data = own("peers", link)
    if not isinstance(data, dict) or not data.get("libraries") or not data.get("floor_ns"):
        return None
    where = " over the ~1 ms link" if link else ""
    return {"from": f"the peers bench of {_when(own_path('peers', link))}{where}",
            "floor_ns": data["floor_ns"], "floor_bursts_ns": data.get("floor_bursts_ns"),
            "libraries": data["libraries"]}


def figures(own, own_path):
    """The four runs' figures: this machine's last runs where target/ has
    them, else the snapshot's; the snapshot is rewritten with the result."""
    try:
        old = json.loads(SNAPSHOT.read_text())
    except FileNotFoundError:
        old = {}
    fresh = {"loopback_lock": _lock_run(own, own_path, False), "link_lock": _lock_run(own, own_path, True),
             "loopback_peers": _peers_run(own, own_path, False), "link_peers": _peers_run(own, own_path, True)}
    fig = {k: fresh[k] or old.get(k) for k in fresh}
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    SNAPSHOT.write_text(json.dumps(fig, indent=1, ensure_ascii=False) + "\n")
    return fig


def _rtt(x):
    """An RTT figure to three digits or so."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _time(x_us, floor_us):
    """A time in RTT of its run's floor, with µs (or ms) in brackets."""
    if x_us is None or not floor_us:
        return NA
    shown = f"{x_us / 1000:.1f} ms" if x_us >= 10_000 else f"{x_us:.0f} µs"
    return f"{_rtt(x_us / floor_us)} RTT ({shown})"


def _bar_chart(path, title, rows, refs, log=False):
    """A horizontal bar chart as plain SVG: `rows` are (label, value, text),
    `refs` (label, value) vertical lines (the limits); values in RTT."""
    label_w, plot_w, text_w, row_h, top = 150, 390, 90, 24, 52
    values = [v for _, v, _ in rows if v] + [v for _, v in refs]
    hi = max(values) * 1.1
    lo = 0.5 if log else 0.0

    def x(v):
        if log:
            return label_w + plot_w * math.log(max(v, lo) / lo) / math.log(hi / lo)
        return label_w + plot_w * v / hi

    height = top + row_h * len(rows) + 30
    width = label_w + plot_w + text_w
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="8" y="18" font-size="14" font-weight="bold">{title}</text>']
    ticks = [t for t in (1, 10, 100, 1000) if lo <= t <= hi] if log else \
        [t for t in range(0, int(hi) + 1) if t % max(1, int(hi) // 5) == 0]
    bottom = top + row_h * len(rows)
    for t in ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{top - 6}" x2="{x(t):.1f}" y2="{bottom}" stroke="#ddd"/>')
        out.append(f'<text x="{x(t):.1f}" y="{bottom + 14}" text-anchor="middle" fill="#555">{t:g}</text>')
    out.append(f'<text x="{label_w + plot_w / 2:.0f}" y="{bottom + 27}" text-anchor="middle" fill="#555">'
               f'RTT{" (log scale)" if log else ""}</text>')
    for i, (label, value, text) in enumerate(rows):
        y = top + i * row_h
        colour = "#2b6cb0" if label.startswith("fairlock") else "#a0aec0"
        out.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{label}</text>')
        if value:
            out.append(f'<rect x="{label_w}" y="{y + 4}" width="{max(1.0, x(value) - label_w):.1f}" '
                       f'height="{row_h - 8}" fill="{colour}"/>')
        out.append(f'<text x="{label_w + plot_w + 6}" y="{y + 15}">{text}</text>')
    legend = 8
    for (label, value), (colour, dash) in zip(refs, [("#c53030", "4 3"), ("#dd6b20", "1 2")]):
        out.append(f'<line x1="{x(value):.1f}" y1="{top - 4}" x2="{x(value):.1f}" y2="{bottom}" '
                   f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}"/>')
        out.append(f'<line x1="{legend}" y1="34" x2="{legend + 20}" y2="34" stroke="{colour}" stroke-width="1.5" '
                   f'stroke-dasharray="{dash}"/>')
        out.append(f'<text x="{legend + 24}" y="38" fill="{colour}">{label}</text>')
        legend += 30 + 7 * len(label)
    out.append("</svg>")
    (ROOT / path).write_text("\n".join(out) + "\n")
    return path


def _environment(name, slug, lock, peers):
    """One environment's table, summary and plots."""
    if not peers:
        return []
    pfloor = peers["floor_ns"] / 1000
    bursts = peers.get("floor_bursts_ns")
    bursts = f", the median of three bursts of {', '.join(f'{b / 1000:.1f}' for b in bursts)} µs" if bursts else ""
    libs = peers["libraries"]
    lfloor = (lock or {}).get("floor_us")
    unfair = (lock or {}).get("unfair_cycle_us")
    unfair_from = f"the unfair cycle from {lock['from']}, in RTT of its own floor" if unfair and lfloor else \
        "the unfair cycle not measured there yet"
    out = [f"### {name}", "",
           f"Times in RTT: round trips of a no-op EVALSHA of the same run (here {pfloor:.1f} µs{bursts}), µs in brackets;"
           f" the peers from {peers['from']}; {unfair_from}.", "",
           "| | uncontended lock + unlock | handoff p50 | handoff p99 | acquisitions/s, 8 threads |"
           " grants out of arrival order | busiest of 32 threads (fair: 3.1%) |",
           "|---|---|---|---|---|---|---|",
           f"| **the limit**: round trips alone | 2 RTT | 1 RTT | | ≤ {1e6 / pfloor:,.0f}/s handed over in turn"
           " (1 RTT each) | | |",
           f"| **the limit**: unfair `SET NX` + compare-and-delete | {_time(unfair, lfloor)} | none: waiters poll"
           " | | | | |"]
    for p in libs:
        ns = lambda k: None if p.get(k) is None else p[k] / 1000  # noqa: E731
        rate = p.get("contended_8_per_s")
        share = p.get("contended_32_max_share")
        fifo = NA if p.get("inversions") is None else f"{p['inversions']} of {p['grants']}"
        version = f" {p['version']}" if p.get("version") else ""
        out.append(f"| {p['name']}{version} | {_time(ns('cycle_ns'), pfloor)} |"
                   f" {_time(ns('handoff_p50_ns'), pfloor)} | {_time(ns('handoff_p99_ns'), pfloor)} |"
                   f" {NA if rate is None else f'{rate:,.0f}/s'} | {fifo} |"
                   f" {NA if share is None else f'{share * 100:.1f}%'} |")
    rtt = lambda p, k: None if p.get(k) is None else p[k] / peers["floor_ns"]  # noqa: E731
    refs = [("round trips alone: 2 RTT", 2.0)] + (
        [(f"unfair SET NX cycle: {unfair / lfloor:.2f} RTT", unfair / lfloor)] if unfair and lfloor else [])
    cycle = _bar_chart(f"{PLOTS}/{slug}-cycle.svg", f"Uncontended lock + unlock, {name.lower()}",
                       [(p["name"], rtt(p, "cycle_ns"), f"{_rtt(rtt(p, 'cycle_ns'))} RTT") for p in libs
                        if rtt(p, "cycle_ns")], refs)
    handoff = _bar_chart(f"{PLOTS}/{slug}-handoff.svg", f"Handoff p50, {name.lower()}",
                         [(p["name"], rtt(p, "handoff_p50_ns"), f"{_rtt(rtt(p, 'handoff_p50_ns'))} RTT") for p in libs
                          if rtt(p, "handoff_p50_ns")], [("round trips alone: 1 RTT", 1.0)], log=True)
    out += ["", f"![uncontended cycle, {name.lower()}]({cycle}) ![handoff p50, {name.lower()}]({handoff})", ""]
    out += _summary(libs, peers["floor_ns"])
    return out


def _summary(libs, floor_ns):
    """A few sentences computed from one peers run."""
    mine = next((p for p in libs if p["name"] == "fairlock"), None)
    floors = [p for p in libs if _is_floor(p)]
    others = [p for p in libs if not p["name"].startswith("fairlock") and not _is_floor(p)
              and p.get("handoff_p50_ns")]
    if not mine or not others or not mine.get("handoff_p50_ns"):
        return []
    rtt = lambda p, k: p[k] / floor_ns  # noqa: E731
    polling = [p for p in others if p.get("inversions")]
    fastest = max(others, key=lambda p: p.get("contended_8_per_s") or 0)
    text = [f"fairlock hands the lock to the next waiter in {_rtt(rtt(mine, 'handoff_p50_ns'))} RTT at the median,"
            " in arrival order" + (": on loopback the release script and the thread wake-ups, not the round trip,"
                                   " make most of that ([what a figure means](#what-a-figure-means))."
                                   if rtt(mine, "handoff_p50_ns") > 2 else ".")]
    if polling:
        lo = min(rtt(p, "handoff_p50_ns") for p in polling)
        hi = max(rtt(p, "handoff_p50_ns") for p in polling)
        text.append(f"The locks whose waiters poll `SET NX` ({', '.join(p['name'] for p in polling)}) take"
                    f" {lo:,.0f} to {hi:,.0f} RTT, since a waiter tries again only every 100 to 200 ms, and grant"
                    " in no particular order.")
    if fastest.get("contended_8_per_s") and mine.get("contended_8_per_s"):
        r = fastest["contended_8_per_s"] / mine["contended_8_per_s"]
        if r > 1:
            text.append(f"Under contention {fastest['name']} completes {r:.2f}x fairlock's acquisitions per second"
                        " with 8 threads, by letting the thread that releases take the lock again at once: its"
                        f" busiest of 32 threads got {fastest['contended_32_max_share'] * 100:.1f}% of the grants"
                        " where the fair share is 3.1%.")
        else:
            text.append(f"Under contention fairlock completes {1 / r:.2f}x the acquisitions per second of the"
                        f" fastest peer ({fastest['name']}) with 8 threads.")
    if mine.get("contended_8_clients_us") and fastest.get("contended_8_clients_us"):
        text.append(f"With 8 threads each fairlock acquisition cost {mine['contended_8_server_us']:.0f} µs of"
                    f" redis-server's CPU and {mine['contended_8_clients_us']:.0f} µs of its clients'"
                    f" (the server busy {mine['contended_8_server_busy'] * 100:.0f}% of the window, the clients"
                    f" {mine['contended_8_clients_busy']:.2f} of a core), each {fastest['name']} acquisition"
                    f" {fastest['contended_8_server_us']:.0f} µs and {fastest['contended_8_clients_us']:.0f} µs"
                    " ([where contended time goes](docs/performance.md#where-contended-time-goes)).")
    beyond = [p for p in others + floors if (p.get("contended_8_per_s") or 0) > 1e9 / floor_ns]
    if beyond:
        barging = [p for p in beyond if p in others]
        text.append(f"{', '.join(p['name'] for p in beyond)} went past the round trips' limit with 8 threads: that"
                    " limit counts, per grant handed from one thread to the next, one round trip as one thread"
                    " alone makes it, between idle cores; with 8 threads the cores are kept busy and a round trip is"
                    " shorter" + (f" ({', '.join(p['name'] for p in barging)}, whose releasing thread takes the lock"
                                  " again, also hands nothing over)." if barging else "."))
    paired = [p for p in others + floors
              if len(p.get("contended_8_rounds") or []) == len(mine.get("contended_8_rounds") or [])
              and len(p.get("contended_8_rounds") or []) > 1]
    for p in paired:
        ratios = sorted(m / o for m, o in zip(mine["contended_8_rounds"], p["contended_8_rounds"]) if o)
        if ratios:
            text.append(f"Window by window beside {p['name']} (8 threads, taken in turn), fairlock completed"
                        f" {ratios[0]:.2f}x to {ratios[-1]:.2f}x its acquisitions, {ratios[len(ratios) // 2]:.2f}x"
                        f" at the median of {len(ratios)}.")
    text += _floor_sentences(mine, floors, fastest)
    return [" ".join(text), ""]


def _is_floor(p):
    """A row of benches/fair_floor: the least a fair lock does, not a library."""
    return (p.get("kind") or "").startswith("floor")


def _floor_sentences(mine, floors, fastest):
    """What the floor of a fair lock says of the contended rates (8 threads)."""
    rate = lambda p: p.get("contended_8_per_s")  # noqa: E731
    by_blpop = next((p for p in floors if "BLPOP" in p["name"] and rate(p)), None)
    by_pubsub = next((p for p in floors if "pub/sub" in p["name"] and rate(p)), None)
    if not by_blpop or not rate(mine):
        return []
    text = [f"The least a fair lock through one Redis does (benches/fair_floor: a FIFO lock of two small scripts,"
            f" no lease, token or liveness, each waiter blocked in `BLPOP` on its own connection, so one thread is"
            f" woken per grant) completed {rate(by_blpop):,.0f}/s with 8 threads"]
    if rate(fastest):
        text[0] += f", {rate(by_blpop) / rate(fastest):.2f}x {fastest['name']}'s"
    if by_pubsub:
        text[0] += (f"; told by pub/sub through a subscriber thread, as fairlock's waiters are (two threads woken"
                    f" per grant), {rate(by_pubsub):,.0f}/s")
    text[0] += (f": fairlock completed {rate(mine) / rate(by_blpop):.2f}x the first" +
                (f" and {rate(mine) / rate(by_pubsub):.2f}x the second." if by_pubsub else "."))
    if rate(fastest) and rate(by_blpop) < rate(fastest):
        text.append(f"No fair lock reaches {fastest['name']}'s rate on this machine: a fair grant wakes another"
                    " thread, where a lock whose releasing thread takes it again wakes none.")
    return text


def section(fig):
    """The opening section: both environments, each against the limit."""
    out = ["", "## fairlock, its peers and the limit", "",
           "The same workloads on the same machine and redis-server: fairlock, four other Redis locks, and what no"
           " lock can beat (round trips alone; the unfair `SET NX` cycle, which keeps no queue). How each figure"
           " is measured and what an RTT is: [What a figure means](#what-a-figure-means).", ""]
    out += _environment("On loopback", "loopback", fig.get("loopback_lock"), fig.get("loopback_peers"))
    delay = (fig.get("link_lock") or {}).get("link_delay_us")
    link = f"On an emulated ~1 ms link ({delay} µs each way)" if delay else "On an emulated ~1 ms link"
    out += _environment(link, "link", fig.get("link_lock"), fig.get("link_peers"))
    return out


def meaning(fig):
    """What a figure means: RTT units, server time, the handoff's floor."""
    lock = fig.get("loopback_lock") or {}
    floor, release, wake = lock.get("floor_us"), lock.get("release_handoff_us"), lock.get("wake_us")
    out = ["", "## What a figure means", "",
           "- **RTT** is the median round trip of a no-op script call (`EVALSHA` of `return 1`) measured in the same"
           " run, over the same kind of connection. Figures are given in RTT so runs and machines compare: a lock"
           " cycle needs at least two round trips (take, release), a handoff at least one (the release goes to"
           " the server, the grant comes back to the waiter).",
           "- **Uncontended lock + unlock**: the median of one thread taking and releasing a free lock.",
           "- **Handoff**: from the holder's release call to the next waiter's lock call returning. Between"
           " clients the grant travels as a pub/sub message to the waiter's subscriber thread, which wakes the"
           " waiting thread; between threads of one client the release reply names the new holder.",
           "- **Contended**: acquisitions per second of threads that take the lock, release it at once and take"
           " it again (for the Rust libraries the median of 5 windows of 2 s, taken in rounds of every library in"
           " turn, so that the machine's speed, which moves during a run, weighs on each alike);"
           " **grants out of arrival order** count waiters served before one that queued earlier;"
           " **busiest** is the share of grants the luckiest thread got.",
           "- **Server time** is what Redis spent in the script (INFO commandstats), in µs or in no-op units"
           " (a `return 1` script call measured alongside); **instructions** are counted under callgrind, so"
           " they do not move with the load on the machine."]
    peers = next((p for p in (fig.get("loopback_peers") or {}).get("libraries", []) if p["name"] == "fairlock"), None)
    if peers and peers.get("handoff_p50_ns") and lock.get("handoff_p50_us"):
        out.append(
            "- In the peers bench each waiter has been parked at least 3 ms when the lock is released (so a"
            " polling lock is caught at a random point of its polling period); waking threads that have been idle"
            f" costs more, so fairlock's handoff there ({peers['handoff_p50_ns'] / 1000:.0f} µs at the median) is"
            f" slower than in the lock bench's back-to-back handoffs ({lock['handoff_p50_us']:.0f} µs, the"
            " detail below).")
    if floor and release and wake:
        out.append(
            f"- **Why loopback figures look high in RTT**: on loopback a round trip is only {floor:.1f} µs here,"
            f" so the work a handoff does besides travelling is as large as the trip: the release script that"
            f" hands over takes {release:.1f} µs of server time and waking a parked thread {wake:.1f} µs, so"
            f" no handoff between clients goes below about {floor + release + wake:.0f} µs"
            f" ({(floor + release + wake) / floor:.1f} RTT) here. Over a real network (a round trip of 100 µs to"
            " 1 ms) the same work is a small part: on the emulated ~1 ms link fairlock's handoff is close to"
            " 1 RTT. `scripts/demo` prints each of its figures beside that floor, measured on your machine.")
    out.append("- The machine is a shared, noisy 2-core VM: compare ratios within a run, not absolute times"
               " across runs.")
    return out
