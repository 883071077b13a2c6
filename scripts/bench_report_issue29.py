"""BENCHMARKS.md's "Issue 29's targets" section, for bench_report.py.

Each target of issue 29 (fair for the price of unfair) with its figure from
the last runs and a verdict: server_cost.json (instructions, callgrind),
round_trips.json (the floor, fairlock's uncontended cycle and the unfair
cycle), handoff*.json, breakdown.json and breakdown_kinds.json (server
time in no-op units), peers.json (the barging peers), and the link runs.
What a run did not produce reads n/a.
"""

NA = "n/a"


def _verdict(ok):
    return NA if ok is None else ("met" if ok else "**not met**")


def _op(b, op, queued, kind=None):
    for o in (b or {}).get("ops", []):
        if o["op"] == op and o["queued"] == queued and o.get("kind") == kind:
            return o["noops"]
    return None


def _p50_rtt(own, name, floor, link=False):
    h = own(name, link)
    if not h or not floor or h.get("p50_us") is None:
        return None
    return h["p50_us"] / floor


def section(own, against_barging):
    rows = []
    cost = own("server_cost")
    # 1. Server work per uncontended cycle against the unfair cycle.
    if cost and cost.get("cycles"):
        by = {c["by"]: c for c in cost["cycles"] if c.get("kind", "mutex") == "mutex"}
        best = by.get("FCALL") or by.get("EVALSHA")
        r = best["uncontended"] / cost["unfair_cycle"]
        rows.append(("mutex server work per uncontended cycle ≤ 3x the unfair cycle's (callgrind, same run)",
                     f"{r:.2f}x by {best['by']}", _verdict(r <= 3)))
    else:
        rows.append(("mutex server work per uncontended cycle ≤ 3x the unfair cycle's", NA, NA))
    # 2. Client time per uncontended cycle against the unfair cycle.
    rt = own("round_trips") or {}
    floor, cycle, unfair = rt.get("floor_us"), rt.get("cycle_us"), rt.get("unfair_cycle_us")
    r = cycle / unfair if cycle and unfair else None
    rows.append(("uncontended cycle (client) ≤ 1.15x the unfair cycle's (loopback, same run)",
                 NA if r is None else f"{r:.2f}x ({cycle:.1f} µs against {unfair:.1f} µs)", _verdict(None if r is None else r <= 1.15)))
    # 3. Handoff p50 in RTT.
    a, b = _p50_rtt(own, "handoff", floor), _p50_rtt(own, "handoff_same_client", floor)
    ok = None if a is None or b is None else a <= 2 and b <= 1.5
    rows.append(("handoff p50 ≤ 2 RTT between clients, ≤ 1.5 RTT between threads of one client (loopback)",
                 f"{NA if a is None else f'{a:.2f}'} / {NA if b is None else f'{b:.2f}'} RTT", _verdict(ok)))
    # 4. Handoff cycle against the uncontended cycle, server time.
    bd = own("breakdown")
    un = _op(bd, "uncontended_cycle", 0)
    ratios = [(q, _op(bd, "handoff_cycle", q)) for q in (1, 100, 1000, 10000)]
    ratios = [(q, h / un) for q, h in ratios if h is not None and un]
    worst = max((r for _, r in ratios), default=None)
    rows.append(("handoff cycle ≤ 1.5x the uncontended cycle's server time, 1 to 10 000 queued",
                 NA if worst is None else ", ".join(f"{q:,}: {r:.2f}x" for q, r in ratios),
                 _verdict(None if worst is None else worst <= 1.5)))
    # 5. The counted engine against the mutex: server instructions where
    # server_cost ran (callgrind: the same on a busy machine), else the
    # server time of the breakdown benches.
    kinds = own("breakdown_kinds")
    parts, worst = [], None
    counted = [c for c in (cost or {}).get("cycles", []) if c.get("kind", "mutex") != "mutex"]
    if counted:
        how = "FCALL" if any(c["by"] == "FCALL" for c in counted) else "EVALSHA"
        mutex = next(c for c in cost["cycles"] if c["by"] == how and c.get("kind") == "mutex")
        for c in [c for c in counted if c["by"] == how]:
            r = c["uncontended"] / mutex["uncontended"]
            worst = max(worst or 0, r)
            text = f"{c['kind']} {r:.2f}x"
            if c.get("handoff") is not None:
                h = c["handoff"] / mutex["handoff"]
                worst = max(worst, h)
                text += f" (handoff {h:.2f}x)"
            parts.append(text)
        parts.append(f"by {how}, callgrind, 1 queued")
    elif kinds and bd:
        for kind, label in [("semaphore", "semaphore"), ("rwlock_read", "read"), ("rwlock_write", "write")]:
            k = _op(kinds, "uncontended_cycle", 0, kind)
            if k is not None and un:
                parts.append(f"{label} {k / un:.2f}x")
                worst = max(worst or 0, k / un)
        for q in (1, 100, 1000, 10000):
            m = _op(bd, "handoff_cycle", q)
            for kind in ["semaphore", "rwlock"]:
                k = _op(kinds, "handoff_cycle", q, kind)
                if k is not None and m:
                    worst = max(worst or 0, k / m)
        handoffs = [(_op(kinds, "handoff_cycle", q, k), _op(bd, "handoff_cycle", q))
                    for q in (1, 100, 1000, 10000) for k in ["semaphore", "rwlock"]]
        handoffs = [k / m for k, m in handoffs if k is not None and m]
        if handoffs:
            parts.append(f"handoff cycles {min(handoffs):.2f}-{max(handoffs):.2f}x")
    rows.append(("semaphore and rwlock server time per uncontended and per handoff cycle ≤ 1.2x the mutex's",
                 ", ".join(parts) or NA, _verdict(None if worst is None else worst <= 1.2)))
    # 6. Contended against the fastest barging peer.
    peers = own("peers")
    libs = peers.get("libraries") if isinstance(peers, dict) else peers
    ratio, text = against_barging(libs or [])
    rows.append(("contended (8 and 32 threads) ≥ 1.0x the fastest barging peer, 0 FIFO inversions, busiest ≤ 1.2x fair",
                 text, _verdict(None if ratio is None else ratio >= 1.0)))
    # 7. On the link.
    lrt = own("round_trips", True) or {}
    lfloor = lrt.get("floor_us")
    lh = _p50_rtt(own, "handoff", lfloor, True)
    rows.append(("on the ~1 ms link, handoff p50 ≤ 1.08 RTT", NA if lh is None else f"{lh:.2f} RTT",
                 _verdict(None if lh is None else lh <= 1.08)))
    out = ["", "## Issue 29's targets", "",
           "Each figure from this report's own results (the sections below); n/a where the run it needs is missing"
           " from this machine.", "", "| target | measured | result |", "|---|---|---|"]
    out += [f"| {t} | {m} | {v} |" for t, m, v in rows]
    return out
