"""BENCHMARKS.md's "Server work per fast path" section, for bench_report.py.

Reads target/fairlock-bench/server_cost.json, which `cargo bench --bench
server_cost` writes (redis-server under callgrind: instructions inside
Redis's call(), what INFO commandstats times, per operation), and
benchmarks/before-fd397f8/server_cost.json, the same bench run on the
commit before the scripts' second performance pass (the before column). Either may be
missing: its figures read n/a.
"""
from pathlib import Path

NA = "n/a"
BEFORE = Path(__file__).resolve().parent.parent / "benchmarks" / "before-fd397f8" / "server_cost.json"
PARTS = [("call", "the call with its KEYS and ARGV"),
         ("prelude", "prelude: helper closures and argument checks"),
         ("commands", "its commands alone"),
         ("rest", "the rest: reading and building values")]


def _k(x):
    return NA if x is None else f"{x / 1000:.1f}k"


def _path(data, name):
    for row in (data or {}).get("paths", []):
        if row["path"] == name:
            return row
    return None


def _cycle(data, a, b):
    ra, rb = _path(data, a), _path(data, b)
    return None if ra is None or rb is None else ra["whole"] + rb["whole"]


def section(own, load):
    after, before = own("server_cost"), load(BEFORE)
    if not after:
        return []
    names = [row["path"] for row in after["paths"]]
    out = ["", "## Server work per fast path (instructions, callgrind)", "",
           "Counted, not timed, so a busy machine does not move it: `cargo bench --bench server_cost` runs"
           " redis-server under valgrind's callgrind and counts the instructions Redis spends inside its"
           " `call()` (what INFO commandstats times) per operation, over batches of"
           f" {after['batch']} after as many of warm-up. Split: the call itself (a `return 1` script given"
           " the path's KEYS and ARGV), the prelude (the path's script cut before it first reads the lock:"
           " the helper closures it builds and its argument checks), its commands alone (a script sending only"
           " them, values of the same size) and the rest (the whole minus those three: parsing and building"
           " values). The queued paths are split into the call and the prelude only; their commands are"
           " counted. The unfair cycle is `SET NX PX` plus a compare-and-delete script.",
           "",
           f"Server: {after['server']}. Before: {before.get('commit', '?') if before else NA}"
           f" ({before['server'] if before else NA}).", "",
           "| path | before | after | after ÷ before | " + " | ".join(t for _, t in PARTS) + " | commands sent |",
           "|---|---|---|---|" + "---|" * len(PARTS) + "---|"]
    for name in names:
        a, b = _path(after, name), _path(before, name)
        ratio = NA if b is None else f"{a['whole'] / b['whole']:.2f}x"
        parts = " | ".join(_k(a.get(key)) for key, _ in PARTS)
        sent = ", ".join(f"{k} {v:g}" if v != 1 else k for k, v in a["sent"].items())
        out.append(f"| {name} | {_k(b and b['whole'])} | {_k(a['whole'])} | {ratio} | {parts} | {sent} |")
    out += ["", "| cycle | before | after | before ÷ unfair | after ÷ unfair |", "|---|---|---|---|---|"]
    for label, x, y in [("uncontended (take + release that frees)", "take", "release that frees"),
                        ("handoff (arrival + release that hands over, 1 queued)",
                         "arrival that queues (1 queued)", "release that hands over (1 queued)")]:
        ca, cb = _cycle(after, x, y), _cycle(before, x, y)
        ua, ub = after["unfair_cycle"], before and before["unfair_cycle"]
        out.append(f"| {label} | {_k(cb)} | {_k(ca)} | {NA if cb is None else f'{cb / ub:.2f}x'} |"
                   f" {ca / ua:.2f}x |")
    for row in [c for c in after.get("cycles", []) if c.get("kind", "mutex") == "mutex"]:
        b = next((c for c in (before or {}).get("cycles", []) if c["by"] == row["by"]
                  and c.get("kind", "mutex") == "mutex"), None)
        ua, ub = after["unfair_cycle"], before and before["unfair_cycle"]
        for what, label in [("uncontended", "uncontended"), ("handoff", "handoff (1 queued)"),
                            ("handoff_7", "handoff (7 queued, as when 8 threads contend)")]:
            cb, ca = b and b.get(what), row.get(what)
            if ca is None:
                continue
            out.append(f"| {label}, whole cycles sent by {row['by']} | {_k(cb)} | {_k(ca)} |"
                       f" {NA if cb is None else f'{cb / ub:.2f}x'} | {ca / ua:.2f}x |")
    take, free = _path(after, "take"), _path(after, "release that frees")
    if take and free and take.get("commands") is not None:
        bare = take["call"] + take["commands"] + free["call"] + free["commands"]
        out.append(f"| uncontended, its calls and commands alone (no Lua work at all) | | {_k(bare)} | |"
                   f" {bare / after['unfair_cycle']:.2f}x |")
    out.append(f"| unfair (`SET NX PX` + compare-and-delete) | {_k(before and before['unfair_cycle'])} |"
               f" {_k(after['unfair_cycle'])} | 1x | 1x |")
    redisson = after.get("redisson")
    if redisson:
        for what, label in [("uncontended", "uncontended (lock + unlock)"),
                            ("handoff", "handoff (the unlock that wakes the head, the head's take, a newcomer"
                                        " that queues)")]:
            out.append(f"| Redisson's `RedissonFairLock`, replayed by {redisson['by']} (benches/redisson/):"
                       f" {label} | | {_k(redisson[what])} | | {redisson[what] / after['unfair_cycle']:.2f}x |")
    out.append(f"| no-op EVALSHA (the unit of the tables above) | {_k(before and before['noop'])} |"
               f" {_k(after['noop'])} | | |")
    if redisson:
        mine = [c for c in after.get("cycles", []) if c["by"] == "FCALL" and c.get("handoff")]
        if mine:
            out += ["", "Against Redisson's fair lock (its lock, unlock and wake-up scripts replayed from their"
                    " public description, one run with fairlock's): " + "; ".join(
                        f"{c.get('kind', 'mutex')} by FCALL {c['uncontended'] / redisson['uncontended']:.2f}x its"
                        f" uncontended cycle, {c['handoff'] / redisson['handoff']:.2f}x its handoff" for c in mine)
                    + "."]
    out += _floors(after)
    kinds = [c for c in after.get("cycles", []) if "kind" in c]
    if kinds:
        out += ["", "Every kind's cycles as a client sends them, in call() instructions (the handoff with one waiter"
                " queued; a read does not queue behind a read), and each against the mutex's by the same command:", "",
                "| kind | by | uncontended (before) | uncontended | ÷ the mutex's (before) | ÷ the mutex's |"
                " handoff cycle (before) | handoff cycle | ÷ the mutex's (before) | ÷ the mutex's |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        old_kinds = [c for c in (before or {}).get("cycles", []) if "kind" in c]

        def of(rows, by, kind):
            return next((c for c in rows if c["by"] == by and c["kind"] == kind), None)

        def vs(a, b):
            return NA if a is None or b is None else f"{a / b:.2f}x"

        for row in kinds:
            m = of(kinds, row["by"], "mutex")
            b, bm = of(old_kinds, row["by"], row["kind"]), of(old_kinds, row["by"], "mutex")
            cells = [_k(b and b["uncontended"]), _k(row["uncontended"]),
                     vs(b and b["uncontended"], bm and bm["uncontended"]), vs(row["uncontended"], m["uncontended"]),
                     _k(b and b["handoff"]), _k(row["handoff"]),
                     vs(b and b["handoff"], bm and bm["handoff"]), vs(row["handoff"], m["handoff"])]
            out.append(f"| {row['kind']} | {row['by']} | " + " | ".join(cells) + " |")
    return out


def _floors(after):
    """The floors' table: fairlock's mutex by FCALL beside the scripts that do
    only what its paths do (benches/floor/), each handoff against its own
    uncontended cycle; [] when the run measured no floor."""
    floors = after.get("floors") or []
    mine = next((c for c in after.get("cycles", []) if c["by"] == "FCALL"
                 and c.get("kind", "mutex") == "mutex"), None)
    if not floors or not mine:
        return []
    unfair = after["unfair_cycle"]

    def ratio(a, b):
        return NA if a is None or b is None else f"{a / b:.2f}x"

    out = ["", "The floors (`benches/floor/`: Functions that do only what the mutex's paths do, with every"
           " guarantee they keep; see docs/performance.md), by FCALL, each handoff against the uncontended"
           " cycle of its own row:", "",
           "| | uncontended | ÷ unfair | handoff (1 queued) | ÷ its uncontended | handoff (7 queued) |",
           "|---|---|---|---|---|---|"]
    rows = [("fairlock's mutex", mine)] + [(f"floor, {f['layout']}", f) for f in floors]
    for label, row in rows:
        out.append(f"| {label} | {_k(row['uncontended'])} | {ratio(row['uncontended'], unfair)} |"
                   f" {_k(row.get('handoff'))} | {ratio(row.get('handoff'), row['uncontended'])} |"
                   f" {_k(row.get('handoff_7'))} |")
    return out
