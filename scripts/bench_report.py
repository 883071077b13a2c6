"""Turns the last benchmark runs into BENCHMARKS.md and its plots (plain SVG
under docs/benchmarks/).

Reads criterion's estimates (<target>/criterion/<group>/<bench>/new/
estimates.json, median per iteration; <target> is $CARGO_TARGET_DIR or
target/) and the figures the benches write themselves:
target/fairlock-bench/*.json from the loopback runs, target/fairlock-bench/
link/*.json from the runs on an emulated link, and benchmarks/before-42f1eee/
breakdown.json (scripts/bench-before) for the "before" column of server
time. The semaphore's and rwlock's section is bench_report_kinds.py's, the
server work per fast path (instructions) bench_report_cost.py's, the opening
(fairlock against its peers and the limit) bench_report_headline.py's. Any
run may be missing: a section whose run is missing is kept from the last
report, the opening's figures from docs/benchmarks/figures.json. Nothing in
the report is typed by hand: rerun the benches and this script to refresh it.
"""
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import bench_report_cost
import bench_report_headline
import bench_report_kinds

ROOT = Path(__file__).resolve().parent.parent
CRITERION = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "criterion"
OWN = ROOT / "target" / "fairlock-bench"
LINK = OWN / "link"
BEFORE = ROOT / "benchmarks" / "before-42f1eee" / "breakdown.json"
NA = "n/a"


def median_ns(group, bench, param=None):
    """Median time per iteration in ns, or None when that bench did not run."""
    path = CRITERION / group / bench
    if param is not None:
        path = path / str(param)
    path = path / "new" / "estimates.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())["median"]["point_estimate"]


def load(path):
    """A JSON file's content, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        print(f"bench-report: ignoring {path}: {err}", file=sys.stderr)
        return None


def own_path(name, link=False):
    return (LINK if link else OWN) / f"{name}.json"


def own(name, link=False):
    return load(own_path(name, link))


def peers_of(data):
    """(floor in ns or None, rows) of a peers.json: an object with `libraries`
    now, a bare list of rows before."""
    if data is None:
        return None, []
    if isinstance(data, list):
        return None, data
    return data.get("floor_ns"), data.get("libraries") or []


def first_line(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def machine():
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return [
        f"- CPU: {cpu}, {os.cpu_count()} cores; {platform.system()} {platform.release()}",
        f"- {first_line(['redis-server', '--version'])}",
        f"- {first_line(['rustc', '--version'])}",
        "- Redis on loopback, started by the bench itself (`--save \"\"`); shared, noisy 2-core VM:"
        " read ratios, not absolute times.",
    ]


def us(ns):
    return NA if ns is None else f"{ns / 1000:.1f} µs"


def fmt_us(x):
    """A figure already in µs."""
    return NA if x is None else f"{x:.1f} µs"


def num(x, digits=2, suffix=""):
    return NA if x is None else f"{x:.{digits}f}{suffix}"


def ratio(a, b):
    return None if a is None or not b else a / b


def floor_and_cycle_us(link=False):
    """The round-trip floor and the uncontended cycle in µs: the bench's own
    medians (round_trips.json), else criterion's (loopback only)."""
    rt = own("round_trips", link) or {}
    floor, cycle = rt.get("floor_us"), rt.get("cycle_us")
    if not link:
        ns = median_ns("round_trips", "floor_evalsha_noop")
        floor = floor if floor is not None else (ns and ns / 1000)
        ns = median_ns("round_trips", "uncontended_lock_unlock")
        cycle = cycle if cycle is not None else (ns and ns / 1000)
    return floor, cycle


def contended_rows(link=False):
    """contended.json's rows, or (loopback, before it existed) criterion's
    rates with fifo.json's inversions."""
    rows = own("contended", link)
    if rows is not None:
        return rows
    if link:
        return []
    out = []
    for row in own("fifo") or []:
        ns = median_ns("contended", "acquisitions", row["threads"])
        out.append({"threads": row["threads"], "clients": row["threads"],
                    "acq_per_s": None if ns is None else 1e9 / ns,
                    "inversions": row["inversions"], "grants": row["grants"]})
    return out


def contended_label(row):
    t, c = row["threads"], row.get("clients", row["threads"])
    return f"{t} threads in one client" if c == 1 else f"{t} threads on {c} clients"


def share_text(row):
    """The busiest thread's share against the fair one, or n/a."""
    if row.get("busiest_share") is None:
        return NA
    return (f"{row['busiest_share'] * 100:.1f}% (fair {row['fair_share'] * 100:.1f}%,"
            f" {row['busiest_share'] / row['fair_share']:.2f}x)")


def how_to_run():
    return ["## How to run", "",
            "```sh",
            "cargo bench --bench lock                  # loopback: floor, cycle, handoffs, contended, server time, memory;",
            "                                          # the semaphore's and rwlock's rows too (same run, same floor)",
            "cargo test --bench lock                   # a quick smoke run of every bench above (small bounds, writes nothing)",
            "scripts/peers-setup && cargo bench --features peers --bench peers   # loopback: against the peers",
            "FAIRLOCK_BENCH_LINK_DELAY_US=500 cargo bench --bench lock           # the latency benches on a ~1 ms link",
            "FAIRLOCK_BENCH_LINK_DELAY_US=500 cargo bench --features peers --bench peers   # the peers on that link",
            "scripts/bench-before 42f1eee              # the breakdown on the commit before the first script rewrite (the before column)",
            "cargo bench --bench server_cost           # the server's instructions per fast path, under callgrind (needs valgrind)",
            "scripts/bench-report                      # rewrites this file and docs/benchmarks/*",
            "```", "",
            "`FAIRLOCK_BENCH_LINK_DELAY_US` puts every connection of the latency benches (the floor's, fairlock's,"
            " each peer's, the Python peers' through the URL they get) through a relay in the bench process that"
            " holds each chunk that many µs each way (`common::Link`); those runs write to"
            " `target/fairlock-bench/link/` and name their criterion groups `<group>_link`, and skip the"
            " server-side benches, so one loopback run and one link run both feed this report. Link figures are"
            " in RTT units of the same run's own floor (a no-op EVALSHA over the same link).", ""]


def limit_rows(floor, cycle, handoff, same_client, contended):
    """The rows of "fairlock against the limit" (loopback)."""
    rows = [("floor: one EVALSHA of a no-op script (1 RTT)", fmt_us(floor), "1 RTT", "1.00")]
    rate_ratio = ratio(2 * floor, cycle) if floor else None
    rows.append((
        "uncontended `lock()` + unlock, one thread", fmt_us(cycle), f"2 RTT = {fmt_us(floor and 2 * floor)}",
        NA if rate_ratio is None else f"{rate_ratio:.2f} of the 2-RTT rate ({cycle / floor:.2f} RTT)"))
    for label, h in [("between two clients", handoff), ("between two threads of one client", same_client)]:
        if not h:
            continue
        rows.append((
            f"handoff {label}: release call → next waiter's `lock()` returns, p50 ({h['samples']} handoffs)",
            fmt_us(h["p50_us"]), "1 RTT", num(ratio(h["p50_us"], floor), 2, " RTT")))
        rows.append((f"handoff {label}, p99", fmt_us(h["p99_us"]), "", num(ratio(h["p99_us"], floor), 2, " RTT")))
    for row in contended:
        rate = row.get("acq_per_s")
        per = None if not rate or not floor else 1e6 / rate / floor
        inv = row.get("inversions")
        fifo = NA if inv is None else f"{inv} inversions in {row['grants']} queued grants"
        rows.append((
            f"contended, {contended_label(row)}, empty critical section",
            NA if rate is None else f"{rate:,.0f} acquisitions/s", "",
            (NA if per is None else f"{per:.2f} RTT per acquisition") + f"; busiest thread {share_text(row)}; {fifo}"))
    base = median_ns("queue_scaling_server_time", "waiters", 0)
    for n in [0, 100, 1000, 10000]:
        ns = median_ns("queue_scaling_server_time", "waiters", n)
        if ns is None or base is None:
            continue
        r = ns / base
        rows.append((
            f"server time per lock cycle, {n:,} waiters queued (INFO commandstats)",
            us(ns), "", f"{r:.2f}x of 0 waiters"))
    one = median_ns("queue_scaling_server_time", "waiters", 100)
    big = median_ns("queue_scaling_server_time", "waiters", 10000)
    if one and big:
        rows.append(("server time, 10 000 vs 100 waiters (both cycles hand over; O(log N) reads flat)", "", "",
                     f"{big / one:.2f}x"))
    return rows


def footprint_rows(footprint, memory):
    rows = []
    if footprint:
        idle, busy = footprint["idle"], footprint["waiting_1000"]
        rows.append(("threads per client, idle / with 1 000 waiting threads (besides the waiters)",
                     f"{idle['threads']} / {busy['threads_besides_waiters']}", "2 background + r2d2's 1", ""))
        rows.append(("redis connections per client, idle / with 1 000 waiting threads",
                     f"{idle['connections']} / {busy['connections']}", f"≤ pool ({footprint['pool_size']}) + 1", ""))
        per = footprint["server_bytes_per_waiter"]
        rows.append(("server memory per queued waiter (its queue and deadline entries, MEMORY USAGE)",
                     f"{per:.0f} bytes", "", ""))
        if "server_bytes_per_waiter_with_connections" in footprint:
            rows.append(("server memory per waiting thread, with the pool connections 1 000 threads open"
                         " (used_memory)", f"{footprint['server_bytes_per_waiter_with_connections']:.0f} bytes",
                         "", ""))
    if memory:
        rows.append((f"server memory per held lock ({memory['names']:,} distinct names held)",
                     f"{memory['bytes_per_held_lock']:.0f} bytes", "", f"{memory['keys_per_held_lock']:.2f} keys"))
        rows.append((f"server memory per released name (its lock key, kept {memory['fence_life_s'] / 60:g} min:"
                     " the fence life)", f"{memory['bytes_per_released_name']:.0f} bytes", "",
                     f"{memory['keys_per_released_name']:.2f} keys"))
        rows.append((f"a service locking {memory['names_per_hour']:,} distinct names an hour keeps"
                     f" {memory['released_names_alive']:,.0f} released names", f"{memory['released_names_mb']:.1f} MB",
                     "", ""))
    return rows


def op_figure(b, op, queued):
    """(µs, no-ops) of one operation in a breakdown.json, or (None, None)."""
    if not b or "ops" not in b:
        return None, None
    for o in b["ops"]:
        if o["op"] == op and o["queued"] == queued:
            return o["us"], o["noops"]
    return None, None


def handoff_ratio(b, queued):
    for r in (b or {}).get("handoff_cycle_vs_uncontended", []):
        if r["queued"] == queued:
            return r["ratio"]
    return None


OPS = [("take", "take (free lock, nobody queued)"),
       ("release_free", "release that frees (nobody queued)"),
       ("uncontended_cycle", "uncontended cycle (take + release that frees)")]
QUEUED_OPS = [("arrival", "arrival that queues"),
              ("release_handoff", "release that hands over"),
              ("handoff_cycle", "handoff cycle (arrival + release that hands over)")]


def server_time_section():
    """Server time per operation in no-op units, before and after the first script rewrite."""
    after, before = own("breakdown"), load(BEFORE)
    if not after:
        return []

    def who(b, what):
        if not b:
            return f"{what}: n/a"
        return f"{what} ({b.get('commit', '?')}, Redis {b.get('redis_version', '?')})"

    out = ["", "## Server time per operation (no-op EVALSHA units)", "",
           "Server time from INFO commandstats (EVALSHA's usec) around batches of one kind of call, one call at"
           " a time, not pipelined; a no-op is a `return 1` EVALSHA with no keys measured the same way in the same"
           " rounds. Rounds interleave the scenes; figures are medians over the rounds (no-ops and ratios are"
           " medians of each round's own quotients). A queue of N stays N: each release hands over to the head,"
           " each arrival queues at the tail. \"Before\" is the same bench (`benches/breakdown/`) run on the"
           " commit before the script rewrite by `scripts/bench-before`.", "",
           f"| operation | queued | {who(before, 'before')} µs | before no-ops | {who(after, 'after')} µs | after no-ops |",
           "|---|---|---|---|---|---|"]

    def row(label, op, queued):
        bu, bn = op_figure(before, op, queued)
        au, an = op_figure(after, op, queued)
        out.append(f"| {label} | {queued:,} | {num(bu, 1)} | {num(bn, 1)} | {num(au, 1)} | {num(an, 1)} |")

    out.append(f"| no-op EVALSHA (the unit) | 0 | {num((before or {}).get('noop_us'), 2)} | 1 |"
               f" {num((after or {}).get('noop_us'), 2)} | 1 |")
    for op, label in OPS:
        row(label, op, 0)
    queued = sorted({o["queued"] for b in (before, after) if b and "ops" in b for o in b["ops"] if o["queued"]})
    for n in queued:
        for op, label in QUEUED_OPS:
            row(label, op, n)
    for n in queued:
        out.append(f"| handoff cycle ÷ uncontended cycle | {n:,} | | {num(handoff_ratio(before, n), 2, 'x')} |"
                   f" | {num(handoff_ratio(after, n), 2, 'x')} |")
    return out


def link_section():
    """fairlock and the peers on the emulated link, in RTT units of each run's own floor."""
    rt = own("round_trips", link=True)
    peer_floor, peers = peers_of(own("peers", link=True))
    if not rt and not peers:
        return []
    floor, cycle = floor_and_cycle_us(link=True)
    delay = (rt or {}).get("link_delay_us")
    out = ["", "## On an emulated link", "",
           f"Every connection through a relay holding each chunk {delay if delay is not None else '?'} µs each way"
           " (`FAIRLOCK_BENCH_LINK_DELAY_US`); times in RTT units of the same run's floor (a no-op EVALSHA over the"
           " same link).", "",
           "| figure | fairlock (median) | in RTT |", "|---|---|---|",
           f"| floor: one EVALSHA of a no-op script | {fmt_us(floor)} | 1.00 |",
           f"| uncontended `lock()` + unlock | {fmt_us(cycle)} | {num(ratio(cycle, floor))} |"]
    for label, name in [("between two clients", "handoff"), ("between two threads of one client", "handoff_same_client")]:
        h = own(name, link=True)
        if not h:
            continue
        out.append(f"| handoff {label}, p50 ({h['samples']} handoffs) | {fmt_us(h['p50_us'])} |"
                   f" {num(ratio(h['p50_us'], floor))} |")
        out.append(f"| handoff {label}, p99 | {fmt_us(h['p99_us'])} | {num(ratio(h['p99_us'], floor))} |")
    for row in contended_rows(link=True):
        rate = row.get("acq_per_s")
        per = None if not rate or not floor else 1e6 / rate / floor
        out.append(f"| contended, {contended_label(row)} | {NA if rate is None else f'{rate:,.0f} acquisitions/s'} |"
                   f" {num(per)} per acquisition; {row.get('inversions', NA)} FIFO inversions, busiest"
                   f" {share_text(row)} |")
    if peers:
        out += ["", f"The peers on the same link (their own run; its floor: {us(peer_floor)}):", ""]
        out += peers_table(peers, peer_floor, in_rtt=True)
    return out


def peers_table(peers, floor_ns, in_rtt=False):
    """The peers' table: times with their ratio to fairlock's (or in RTT of
    `floor_ns` when in_rtt), rates, busiest shares, FIFO."""
    mine = next((p for p in peers if p["name"] == "fairlock"), None)

    def dur(ns):
        if ns is None:
            return NA
        if in_rtt:
            return f"{ns / floor_ns:.2f} RTT" if floor_ns else NA
        return f"{ns / 1e6:.1f} ms" if ns >= 10e6 else us(ns)

    def vs_mine(p, key):
        if p is mine or not mine or p.get(key) is None or not mine.get(key):
            return ""
        return f" ({p[key] / mine[key]:.2f}x)"

    def time_cell(p, key):
        return dur(p.get(key)) + ("" if in_rtt else vs_mine(p, key))

    def rate_cell(p, key):
        return (NA if p.get(key) is None else f"{p[key]:,.0f}/s") + vs_mine(p, key)

    def fifo_cell(p):
        if p.get("inversions") is None:
            return NA
        cell = f"{p['inversions']} in {p['grants']} grants"
        rounds, waiters = p.get("fifo_rounds"), p.get("fifo_waiters")
        if p.get("inverted_pairs") is not None and rounds and waiters:
            cell += f" ({p['inverted_pairs']} of {rounds * waiters * (waiters - 1) // 2} pairs)"
        return cell

    def share_cell(p, threads):
        share = p.get(f"contended_{threads}_max_share")
        return NA if share is None else f"{share * 100:.1f}%"

    unit = "in RTT" if in_rtt else "median"
    out = [f"| library | uncontended cycle ({unit}) | handoff p50 | handoff p99 "
           "| contended, 2 threads | 8 threads | 32 threads | busiest of 8 threads (fair: 12.5%) "
           "| busiest of 32 threads (fair: 3.1%) | FIFO inversions (queued waiters) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for p in peers:
        version = f" {p['version']}" if p.get("version") else ""
        out.append("| " + " | ".join([
            f"{p['name']}{version}",
            time_cell(p, "cycle_ns"),
            time_cell(p, "handoff_p50_ns"),
            time_cell(p, "handoff_p99_ns"),
            rate_cell(p, "contended_2_per_s"),
            rate_cell(p, "contended_8_per_s"),
            rate_cell(p, "contended_32_per_s"),
            share_cell(p, 8),
            share_cell(p, 32),
            fifo_cell(p),
        ]) + " |")
    return out


def peer_section(lock_floor_us):
    """The section for the peers bench (`cargo bench --features peers --bench peers`), if it ran:
    each library's figures from target/fairlock-bench/peers.json with its ratio to fairlock's."""
    floor_ns, peers = peers_of(own("peers"))
    if not peers:
        return []
    out = ["", "## fairlock against its peers (same machine, same redis-server, same workload)", "",
           "How to run: `scripts/peers-setup && cargo bench --features peers --bench peers && scripts/bench-report`"
           " (a few minutes; the bench runs `scripts/peers-setup` itself when target/peers-venv is missing).", "",
           "In brackets: the ratio to fairlock's figure (times: above 1 is slower than fairlock;"
           " acquisitions/s: above 1 is more than fairlock).", ""]
    out += peers_table(peers, floor_ns)
    if floor_ns:
        out += ["", f"One round trip (a no-op EVALSHA, median, this run) took {us(floor_ns)}."]
    elif lock_floor_us:
        out += ["", f"One round trip (a no-op EVALSHA, from `cargo bench --bench lock`) took {fmt_us(lock_floor_us)}."]
    out += ["",
            "Each library runs with one client (one connection) per thread and an empty critical section, but"
            " fairlock (one client), whose threads all take their handles from one shared client."
            " Cycle: lock + release of a free lock, one thread. Handoff: two workers take strict turns; the holder"
            " releases once the other is in its lock call (after 3 ms plus a random pause as long as the"
            " library's polling period, so the release falls at a random point of the waiter's polling cycle);"
            " a sample runs from the release call to the other's lock call returning (at most 500 handoffs or 4 s)."
            " Contended: acquisitions completed within a 2 s window; a lock that lets the releasing thread take"
            " it again at once (barging) scores high here and shows it in the busiest thread's share."
            " FIFO: a holder holds, 8 waiters start one after another (each once the previous is seen waiting,"
            " or 75 ms apart where the library's queue cannot be seen), the holder releases; 5 rounds;"
            " inversions are adjacent grants out of arrival order, pairs are all pairs out of order."
            " fairlock's handoff is slower here than in the ping-pong of `benches/lock.rs` because its waiter"
            " (and its subscriber thread) have been parked for at least 3 ms: waking idle threads on an idle"
            " vCPU costs more than waking ones that parked a moment ago."
            " The two \"fair floor\" rows are no library but the least a fair lock through one Redis does"
            " (benches/fair_floor: a holder key and a list of waiters, one small script to take or queue and one"
            " to hand over, no lease, token or liveness), its waiters told of a grant by their own `BLPOP` (one"
            " thread woken per grant) or by pub/sub through a subscriber thread, as fairlock's are (two): what"
            " every fair lock pays on this machine.",
            "", "Handoffs measured (over 50 or fewer, the p99 is the slowest one): " + ", ".join(
                f"{p['name']} {p['handoff_samples']}" for p in peers if p.get("handoff_samples") is not None) + ".",
            "", "Configurations:", ""]
    for p in peers:
        out.append(f"- {p['name']} ({p.get('kind') or '?'}): {p.get('config') or 'not run'}")
    noted = [p for p in peers if p.get("note")]
    if noted:
        out += ["", "Not measured or failed:", ""]
        out += [f"- {p['name']}: {p['note']}" for p in noted]
    return out


# The line a section kept from the last report starts with (see kept()).
KEPT = "_Kept from the last report: this section's results were not on the machine when it was rewritten._"


def previous_sections():
    """The last BENCHMARKS.md's sections, by heading: each a list of lines
    from the blank line before its `## ` heading to the next one."""
    try:
        lines = (ROOT / "BENCHMARKS.md").read_text().splitlines()
    except FileNotFoundError:
        return {}
    sections, heading = {}, None
    for line in lines:
        if line.startswith("## "):
            heading = line[3:]
            sections[heading] = ["", line]
        elif heading is not None:
            sections[heading].append(line)
    for body in sections.values():
        while body and body[-1] == "":
            body.pop()
    return sections


def kept(heading, fresh, previous):
    """`fresh` when this run has the section's results, else the last
    report's section of that heading (marked as kept), else nothing: a
    report rewritten after one bench keeps the figures of the others."""
    if fresh:
        return fresh
    old = without_targets(previous.get(heading) or [])
    if not old:
        return []
    if KEPT in old:
        return old
    return old[:2] + ["", KEPT] + old[2:]


def without_targets(lines):
    """A kept section's tables without the target and result columns of
    older reports (the targets' history is in docs/performance.md)."""
    out, drop = [], None
    for line in lines:
        if not line.startswith("|"):
            drop = None
            out.append(line)
            continue
        cells = line.strip().strip("|").split("|")
        if drop is None:  # a table's header
            drop = {i for i, c in enumerate(cells) if c.strip() in ("target", "result")}
        cells = [c for i, c in enumerate(cells) if i not in drop]
        out.append("|" + "|".join(cells) + "|")
    return out


def main():
    floor, cycle = floor_and_cycle_us()
    previous = previous_sections()
    handoff, same_client = own("handoff"), own("handoff_same_client")
    plot = make_plot(handoff)
    fig = bench_report_headline.figures(own, own_path)

    out = ["# Benchmarks", "",
           "How fairlock compares with other Redis locks and with what no lock can beat, then the detail of every"
           " benchmark. Generated by `scripts/bench-report` from the last benchmark runs; do not edit by hand."
           " The targets the project set itself along the way, and how far it got:"
           " [docs/performance.md](docs/performance.md#history-of-targets)."]
    out += bench_report_headline.section(fig) + bench_report_headline.meaning(fig) + [""]
    out += how_to_run()
    out += ["## Machine", ""] + machine()
    limit = []
    if floor is not None:
        rows = limit_rows(floor, cycle, handoff, same_client, contended_rows())
        rows += footprint_rows(own("footprint"), own("memory"))
        limit = ["", "## fairlock against the limit (loopback)", "",
                 "| figure | fairlock (median) | limit | ratio |",
                 "|---|---|---|---|"]
        limit += ["| " + " | ".join(r) + " |" for r in rows]
        if plot:
            limit += ["", f"![handoff latency distribution]({plot})", ""]
    sections = [
        ("fairlock against the limit (loopback)", limit),
        ("Server time per operation (no-op EVALSHA units)", server_time_section()),
        ("Server work per fast path (instructions, callgrind)", bench_report_cost.section(own, load)),
        ("fairlock against its peers (same machine, same redis-server, same workload)", peer_section(floor)),
        ("On an emulated link", link_section()),
        ("Where the time goes", breakdown_section(floor, cycle, handoff)),
        ("Semaphore and reader-writer lock", bench_report_kinds.section(own)),
        ("Throughput across shards (Redis Cluster against one server)", shards_section()),
    ]
    for heading, fresh in sections:
        out += kept(heading, fresh, previous)
    if len(out) < 20:
        sys.exit("no results: run `cargo bench --bench lock` (or another bench) first")
    (ROOT / "BENCHMARKS.md").write_text("\n".join(out) + "\n")
    print("wrote BENCHMARKS.md and docs/benchmarks/")


def breakdown_section(floor, cycle, handoff):
    """Where the time goes, from the breakdown bench; explains unmet targets."""
    b = own("breakdown")
    if not b or "ops" not in b or not floor or not cycle:
        return []
    take, _ = op_figure(b, "take", 0)
    release, _ = op_figure(b, "release_free", 0)
    un_us, un_noops = op_figure(b, "uncontended_cycle", 0)
    hand, _ = op_figure(b, "release_handoff", 100)
    arrive, _ = op_figure(b, "arrival", 100)
    wake = b.get("condvar_wake_p50_us")
    noop = b["noop_us"]
    out = ["", "## Where the time goes", "",
           "| step | time |", "|---|---|",
           f"| one round trip (floor, whole client-server-client path) | {fmt_us(floor)} |",
           f"| server time of a no-op EVALSHA (fixed cost of any script call) | {fmt_us(noop)} |",
           f"| take (acquire, lock free, no queue) | {fmt_us(take)} |",
           f"| release that frees | {fmt_us(release)} |",
           f"| release that hands over (100 queued) | {fmt_us(hand)} |",
           f"| arrival that queues (100 queued) | {fmt_us(arrive)} |",
           f"| condvar wake-up of a parked thread (p50) | {fmt_us(wake)} |", ""]
    extra = un_us - 2 * noop
    out.append(
        f"- Uncontended cycle: two round trips ({2 * floor:.1f} µs) plus what the two scripts do beyond a"
        f" no-op ({extra:.1f} µs of server time; {un_noops:.1f} no-ops in all). On loopback, where a round trip"
        f" is only {floor:.0f} µs, that work is {extra / floor:.2f} RTT. Measured {cycle:.1f} µs ="
        f" {cycle / floor:.2f} RTT; over a real network (RTT of 100 µs or more) the same server work is a"
        " small fraction.")
    if handoff and hand is not None and wake is not None:
        path = hand + 2 * wake
        out.append(
            f"- Handoff between clients: the releaser's request reaches Redis (≈ RTT/2), the release script hands"
            f" over ({hand:.1f} µs), the grant message reaches the waiter's subscriber thread (≈ RTT/2), which"
            f" wakes the waiting thread through its condvar; each of the two thread wake-ups (socket → subscriber,"
            f" subscriber → waiter) costs about {wake:.0f} µs here. Script plus wake-ups alone are ≈ {path:.0f} µs"
            f" before any network time; measured p50 {handoff['p50_us']:.0f} µs. Within one client the release"
            " reply names the new holder, which is woken from it: one thread hop and no pub/sub leg.")
    return out


def make_plot(handoff):
    """The handoff latency distribution (fraction of handoffs within a time,
    log scale) as plain SVG under docs/benchmarks/, or None without samples."""
    if not handoff or not handoff.get("all_us"):
        return None
    samples = sorted(handoff["all_us"])
    n, w, h, left, top = len(samples), 640, 300, 50, 30
    lo, hi = max(samples[0], 1.0), samples[-1] * 1.05
    x = lambda v: left + (w - left - 20) * math.log(max(v, lo) / lo) / math.log(hi / lo)  # noqa: E731
    y = lambda f: top + (h - top - 40) * (1 - f)  # noqa: E731
    step = max(1, n // 400)
    points = " ".join(f"{x(v):.1f},{y(i / n):.1f}" for i, v in enumerate(samples) if i % step == 0 or i == n - 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="8" y="18" font-size="14" font-weight="bold">fairlock handoff latency, {n} handoffs'
           f' (p50 {handoff["p50_us"]:.0f} µs)</text>']
    for t in [10 ** k * m for k in range(0, 7) for m in (1, 2, 5) if lo <= 10 ** k * m <= hi]:
        out.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{y(0):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x(t):.1f}" y="{y(0) + 14:.1f}" text-anchor="middle" fill="#555">{t:g}</text>')
    for f in (0, 0.5, 0.9, 1):
        out.append(f'<text x="{left - 4}" y="{y(f) + 4:.1f}" text-anchor="end" fill="#555">{f:g}</text>')
    out += [f'<polyline points="{points}" fill="none" stroke="#2b6cb0" stroke-width="1.5"/>',
            f'<text x="{(w + left) / 2:.0f}" y="{h - 8}" text-anchor="middle" fill="#555">'
            'µs (log scale), release call → next lock() returns; up: fraction of handoffs within</text>', "</svg>"]
    path = "docs/benchmarks/handoff.svg"
    (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
    (ROOT / path).write_text("\n".join(out) + "\n")
    return path


def shards_section():
    """The section for the shards bench (`cargo bench --bench shards`), if it ran: the same
    many-names workload on one redis-server and on a Redis Cluster, from
    target/fairlock-bench/shards.json, with an interpretation computed from the figures."""
    sh = own("shards")
    if not sh:
        return []
    single, cluster = sh["single"], sh["cluster"]
    cores = sh["cores"]
    nodes = cluster["masters"] + cluster["replicas"]
    n_windows = len(single["windows"])

    def cpu(d):
        return d["server_cores_masters"] + d["server_cores_replicas"] + d["bench_process_cores"]

    def per_name(d):
        p = d["per_name_acq_per_s"]
        return f"{p['min']:,.0f} / {p['median']:,.0f} / {p['max']:,.0f}"

    rows = [("one redis-server", single),
            (f"Redis Cluster, {cluster['masters']} masters + {cluster['replicas']} replicas", cluster)]
    out = ["", "## Throughput across shards (Redis Cluster against one server)", "",
           "How to run: `cargo bench --bench shards && scripts/bench-report` (under a minute; the bench"
           " starts its own redis-server, then its own cluster, on loopback, one after the other).", "",
           f"Workload, the same on both: {sh['names']} lock names; {sh['clients']} clients with the default"
           f" timings, each running one thread per name, so {sh['threads_per_name']} threads from"
           f" {sh['clients']} clients contend for every name ({sh['threads']} threads, nearly all parked"
           f" waiting their turn); empty critical sections. After a {sh['warm_up_s']:g} s warm-up,"
           f" acquisitions are counted over {n_windows} windows of {sh['window_s']:g} s. Floor: median of"
           f" {sh['samples']} no-op EVALSHAs (a plain connection to the server, the redis crate's"
           " `ClusterClient` on the cluster); cycle: median of as many uncontended `lock()` + unlock of one"
           " name on one thread. CPU (server time from INFO cpu, this process's from /proc) is in cores"
           " busy during the windows. Two holders of one name at once, checked inside every critical"
           f" section: {single['overlaps']} on the server, {cluster['overlaps']} on the cluster.", "",
           "| deployment | floor RTT (median) | uncontended cycle (median) | acquisitions/s, median"
           f" [min–max of {n_windows} windows] | ratio to one server | acquisitions/s per name,"
           " min / median / max | server CPU (cores) | bench process CPU (cores) |",
           "|---|---|---|---|---|---|---|---|"]
    for label, d in rows:
        server = f"{d['server_cores_masters']:.2f}"
        if d["replicas"]:
            server += f" + replicas {d['server_cores_replicas']:.2f}"
        out.append("| " + " | ".join([
            label,
            f"{d['floor_us']:.1f} µs",
            f"{d['cycle_us']:.1f} µs ({d['cycle_us'] / d['floor_us']:.2f} RTT)",
            f"{d['acq_per_s_median']:,.0f} [{d['acq_per_s_min']:,.0f}–{d['acq_per_s_max']:,.0f}]",
            f"{d['acq_per_s_median'] / single['acq_per_s_median']:.2f}",
            per_name(d),
            server,
            f"{d['bench_process_cores']:.2f}",
        ]) + " |")
    masters = cluster["per_master"]
    out += ["", "The cluster's masters during the windows (subscriber connections on each; a client listens on"
            " every node of the slot map):", "",
            "| master | names served | subscriber connections | share of acquisitions | acquisitions/s per name |",
            "|---|---|---|---|---|"]
    for i, m in enumerate(masters, 1):
        out.append(f"| {i} | {m['names']} | {m['subscribers']} | {m['acq_share'] * 100:.1f}% |"
                   f" {m['acq_per_name_per_s']:,.0f} |")

    ratio = sh["ratio"]
    if ratio >= 1.5:
        trend = "locks on different names scaled with the masters here"
    elif ratio > 1.1:
        trend = "a gain, well short of one server's rate per master"
    elif ratio >= 0.9:
        trend = "no gain"
    else:
        trend = "less than one server managed"
    text = [f"The cluster completed {ratio:.2f}x the single server's acquisitions per second"
            f" ({cluster['acq_per_s_median']:,.0f} against {single['acq_per_s_median']:,.0f}): {trend}."]
    busy_single, busy_cluster = cpu(single), cpu(cluster)

    def load(busy):
        if busy >= 0.85 * cores:
            return "saturated"
        return f"{cores - busy:.2f} cores idle on average"

    text.append(
        f"This machine has {cores} cores for the bench process ({sh['threads']} worker threads plus each"
        f" client's background threads) and, on the cluster, {nodes} redis-servers; busy during the windows:"
        f" {busy_single:.2f} cores with one server (the server {single['server_cores_masters']:.2f};"
        f" {load(busy_single)}), {busy_cluster:.2f} with the cluster (masters"
        f" {cluster['server_cores_masters']:.2f}, replicas {cluster['server_cores_replicas']:.2f};"
        f" {load(busy_cluster)})"
        + (", so the extra masters had no idle core to run on." if busy_cluster >= 0.85 * cores else "."))
    fast = [m for m in masters if m["subscribers"] > 0]
    slow = [m for m in masters if m["subscribers"] == 0 and m["names"] > 0]
    if fast and slow:
        def rate(ms):
            done = sum(m["acq_per_name_per_s"] * m["names"] for m in ms)
            return done / max(1, sum(m["names"] for m in ms))
        fast_rate, slow_rate = rate(fast), rate(slow)
        subs = sum(m["subscribers"] for m in fast)
        where = ("the master" if len(fast) == 1 else "the masters") + f" holding the {subs} subscribers"
        if [m.get("url_position") for m in fast] == [0]:
            where = f"the first node of the URL, where all {subs} subscriber connections sit,"
        sentence = (
            f"The masters did not share the work by their names: names on {where}"
            f" ran at {fast_rate:,.0f} acquisitions/s each, names on the"
            f" other masters at {slow_rate:,.0f} ({fast_rate / max(slow_rate, 1e-9):.1f}x fewer): a handoff"
            " there reaches the next waiter's subscriber only through the cluster bus, which carries every"
            f" PUBLISH to every other node ({cluster['bus_publishes_per_acquisition']:.1f} bus deliveries per"
            " acquisition)")
        extra_ms = 1000 / slow_rate - 1000 / fast_rate if slow_rate > 0 else 0
        if extra_ms >= 1:
            sentence += (
                f", and each acquisition there took {extra_ms:.1f} ms longer (a round trip is"
                f" {cluster['floor_us']:.0f} µs), consistent with small writes held back on the bus links"
                " (Nagle's algorithm against delayed ACKs: Redis sets TCP_NODELAY on the bus connections it"
                " accepts, not on those it opens, cf. valkey-io/valkey#1758)")
        text.append(sentence + ".")
    elif masters and all(m["subscribers"] > 0 for m in masters):
        rates = [m["acq_per_name_per_s"] for m in masters if m["names"] > 0]
        text.append(
            f"Every master has subscriber connections, so each handoff is read on the node that published"
            f" it: names ran at {min(rates):,.0f} to {max(rates):,.0f} acquisitions/s each on the"
            f" {len(rates)} masters ({max(rates) / max(min(rates), 1e-9):.2f}x apart); the bus still"
            f" copies every PUBLISH to the other nodes ({cluster['bus_publishes_per_acquisition']:.1f}"
            " deliveries per acquisition), which costs server CPU but not handoff latency.")
    counts = [m["names"] for m in masters]
    text.append(
        f"The names themselves spread {' / '.join(map(str, counts))} over the masters"
        f" (even would be {sh['names'] / len(masters):.0f} each); whether the rate grows with the masters"
        " needs a core per node and the clients elsewhere, which this run does not have.")
    return out + ["", " ".join(text)]


if __name__ == "__main__":
    main()
