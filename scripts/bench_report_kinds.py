"""BENCHMARKS.md's "Semaphore and reader-writer lock" section, for
bench_report.py.

Reads, through the `own(name, link)` loader it is given (a dict from
target/fairlock-bench[/link]/<name>.json, or None), what `cargo bench --bench
lock` writes in one run: the floor and the mutex's rows (round_trips,
handoff, handoff_same_client, contended, breakdown), the semaphore's
client-level rows (semaphore_round_trips, semaphore_handoff,
semaphore_handoff_same_client, semaphore_contended: benches/kinds/), the
rwlock's once it has a client API (rwlock_round_trips, rwlock_handoff,
rwlock_handoff_same_client, rwlock_contended), and the server time of both
primitives' scripts (breakdown_kinds: benches/breakdown_kinds/). Missing
figures read n/a.
"""

NA = "n/a"

# A handoff cycle with up to 10 000 queued within this of the 1-queued one
# counts as flat (the mutex's issue-12 target for O(log N), the same 1.5x).
FLAT = 1.5


def _us(x):
    return NA if x is None else f"{x:.1f} µs"


def _num(x, digits=2, suffix=""):
    return NA if x is None else f"{x:.{digits}f}{suffix}"


def _ratio(a, b):
    return None if a is None or not b else a / b


def _mutex_8_on_8(own, link):
    """The mutex's "8 threads on 8 clients" contended row, or None."""
    for row in own("contended", link) or []:
        if row.get("threads") == 8 and row.get("clients") == 8:
            return row
    return None


def _rate(row):
    return None if not row else row.get("acq_per_s")


def client_table(own, link=False):
    """The client-level table: each semaphore (and rwlock) row in RTT of the
    same run's floor and against the mutex's same row; [] when the
    semaphore's rows did not run."""
    rt = own("round_trips", link) or {}
    floor, mutex_cycle = rt.get("floor_us"), rt.get("cycle_us")
    sem_rt = own("semaphore_round_trips", link)
    sem_contended = own("semaphore_contended", link) or []
    if not sem_rt and not sem_contended:
        return []
    rows = []

    def time_row(label, mine, mutex):
        rows.append((label, _us(mine), _num(_ratio(mine, floor), 2, " RTT"), _us(mutex),
                     _num(_ratio(mine, mutex), 2, "x")))

    rows.append(("floor: one EVALSHA of a no-op script (1 RTT)", _us(floor), "1.00 RTT", "", ""))
    time_row("uncontended acquire + release, one thread (1 permit) / the mutex's `lock()` + unlock",
             (sem_rt or {}).get("cycle_us"), mutex_cycle)
    for label, name in [("between two clients", "handoff"), ("between two threads of one client",
                                                              "handoff_same_client")]:
        mine, mutex = own(f"semaphore_{name}", link), own(name, link)
        if not mine:
            continue
        for p in ["p50", "p99"]:
            time_row(f"handoff {label} (1 permit): release call → next `acquire()` returns, {p}"
                     f" ({mine['samples']} handoffs)", mine[f"{p}_us"], (mutex or {}).get(f"{p}_us"))
    mutex_row = _mutex_8_on_8(own, link)
    for row in sem_contended:
        rate, mutex_rate = _rate(row), _rate(mutex_row)
        per = None if not rate or not floor else 1e6 / rate / floor
        busiest = row.get("busiest_share")
        notes = [f"most holders inside at once {row.get('most_inside', NA)}"]
        if busiest is not None:
            notes.append(f"busiest thread {busiest * 100:.1f}% (fair {row['fair_share'] * 100:.1f}%)")
        if row.get("inversions") is not None:
            notes.append(f"{row['inversions']} FIFO inversions in {row['grants']} queued grants")
        rows.append((
            f"contended, {row['threads']} threads on {row['clients']} clients, {row['permits']}"
            f" permit{'s' if row['permits'] != 1 else ''}, empty critical section ({'; '.join(notes)})",
            NA if rate is None else f"{rate:,.0f} acquisitions/s",
            NA if per is None else f"{per:.2f} RTT per acquisition",
            NA if mutex_rate is None else f"{mutex_rate:,.0f} acquisitions/s",
            _num(_ratio(rate, mutex_rate), 2, "x")))
    rows += _rwlock_rows(own, link, floor, mutex_cycle, mutex_row)
    out = ["| figure | median | in RTT (floor) | the mutex's same row, same run | ratio to the mutex |",
           "|---|---|---|---|---|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def _rwlock_rows(own, link, floor, mutex_cycle, mutex_row):
    """The rwlock's client-level rows, from benches/kinds/'s `rwlock` once it
    is filled (the file names and fields its doc comment lists)."""
    rows = []
    rt = own("rwlock_round_trips", link) or {}
    for access in ["read", "write"]:
        mine = rt.get(f"{access}_cycle_us")
        if mine is not None:
            rows.append((f"rwlock: uncontended {access} + release, one thread", _us(mine),
                         _num(_ratio(mine, floor), 2, " RTT"), _us(mutex_cycle),
                         _num(_ratio(mine, mutex_cycle), 2, "x")))
    for label, name in [("between two clients", "handoff"), ("between two threads of one client",
                                                              "handoff_same_client")]:
        mine, mutex = own(f"rwlock_{name}", link), own(name, link) or {}
        if mine:
            rows.append((f"rwlock: writer handoff {label}, p50 ({mine['samples']} handoffs)",
                         _us(mine["p50_us"]), _num(_ratio(mine["p50_us"], floor), 2, " RTT"),
                         _us(mutex.get("p50_us")), _num(_ratio(mine["p50_us"], mutex.get("p50_us")), 2, "x")))
    for row in own("rwlock_contended", link) or []:
        rate, mutex_rate = _rate(row), _rate(mutex_row)
        per = None if not rate or not floor else 1e6 / rate / floor
        readers = row.get("readers", 0)
        rows.append((
            f"rwlock: contended, {row['threads']} threads on {row['clients']} clients, {readers} of them"
            " readers, empty critical section",
            NA if rate is None else f"{rate:,.0f} acquisitions/s",
            NA if per is None else f"{per:.2f} RTT per acquisition",
            NA if mutex_rate is None else f"{mutex_rate:,.0f} acquisitions/s",
            _num(_ratio(rate, mutex_rate), 2, "x")))
    return rows


FAST_OPS = [("take", "take (free, nobody queued)"),
            ("release_free", "release with nobody waiting"),
            ("uncontended_cycle", "uncontended cycle (take + release)")]

QUEUED_OPS = [("arrival", "arrival that queues at the tail"),
              ("release_handoff", "release that hands over (admits the head)"),
              ("handoff_cycle", "handoff cycle (arrival + release that hands over)")]


def _op(breakdown, op, queued, kind=None):
    """(µs, no-ops) of one operation, or (None, None)."""
    for o in (breakdown or {}).get("ops", []):
        if o["op"] == op and o["queued"] == queued and o.get("kind") == kind:
            return o["us"], o["noops"]
    return None, None


def _cell(figure):
    us, noops = figure
    return NA if noops is None else f"{noops:.1f} ({us:.1f} µs)"


def server_time_tables(own):
    """Server time per script path in no-op units beside the mutex's same
    operation, and the flatness of the handoff cycles."""
    kinds = own("breakdown_kinds")
    if not kinds:
        return []
    mutex = own("breakdown")
    out = [f"Redis {kinds['redis_version']}, commit {kinds['commit']}; {kinds['calls_each']} calls of each path;"
           f" a no-op EVALSHA took {kinds['noop_us']:.2f} µs of server time (the unit). Cells: no-ops (server µs)."
           " The mutex's column is its own bench's (`benches/breakdown/`) in the same run.", "",
           "Fast paths, nobody queued:", "",
           "| operation | mutex | semaphore (1 permit) | rwlock, reading | rwlock, writing |",
           "|---|---|---|---|---|"]
    for op, label in FAST_OPS:
        cells = [_op(mutex, op, 0)] + [_op(kinds, op, 0, k) for k in ["semaphore", "rwlock_read", "rwlock_write"]]
        out.append(f"| {label} | " + " | ".join(_cell(c) for c in cells) + " |")
    out += ["", "With waiters queued (the rwlock's alternating readers and writers behind a writer):", "",
            "| queued | operation | mutex | semaphore (1 permit) | rwlock |", "|---|---|---|---|---|"]
    queued = sorted({o["queued"] for o in kinds["ops"] if o["queued"] > 0})
    for q in queued:
        for op, label in QUEUED_OPS:
            cells = [_op(mutex, op, q)] + [_op(kinds, op, q, k) for k in ["semaphore", "rwlock"]]
            out.append(f"| {q:,} | {label} | " + " | ".join(_cell(c) for c in cells) + " |")
    flat = kinds.get("handoff_cycle_vs_queued_1", [])
    if flat:
        out += ["", f"Handoff cycle against queue length: the median of each round's cycle ÷ the same round's cycle"
                f" with 1 queued; O(log N) shows as flat, within {FLAT:g}x:", "",
                "| queued | semaphore | rwlock |", "|---|---|---|"]
        for q in sorted({f["queued"] for f in flat}):
            r = {f["kind"]: f["vs_queued_1"] for f in flat if f["queued"] == q}
            sem, rw = r.get("semaphore"), r.get("rwlock")
            out.append(f"| {q:,} | {_num(sem, 2, 'x')} | {_num(rw, 2, 'x')} |")
    return out


def section(own):
    """The whole section; [] when neither part ran."""
    client = client_table(own)
    server = server_time_tables(own)
    if not client and not server:
        return []
    out = ["", "## Semaphore and reader-writer lock", "",
           "Measured by `cargo bench --bench lock` in the same run as the floor and the mutex's rows above, on the"
           " shared, noisy VM described under Machine: re-run on a quiet machine before quoting absolute figures;"
           " the ratios (to the floor, to the mutex, to the 1-queued cycle) are what this section is for.", "",
           "Method. Client level (`benches/kinds/`): the public API on a private redis-server over loopback,"
           " through exactly the mutex's workloads (`benches/turns/`). Cycle: median of single acquire + release"
           " calls of a free semaphore of 1 permit, one thread. Handoff: two threads take turns on 1 permit; a"
           " sample runs from the holder's release call to the other thread's `acquire()` returning; between two"
           " clients (the grant travels as a pub/sub message) and between two threads of one client (the release"
           " reply names the new holder). Contended: 8 threads, each on a client of its own, acquire and release"
           " with an empty critical section, with 1 and with 4 permits; median acquisitions/s over criterion's"
           " samples; the most threads inside at once is checked against N; FIFO inversions from the mutex's"
           " queued-waiters workload (1 permit only: with N > 1 several waiters are admitted at once and their"
           " order is the threads' race). Ratios: to the floor (a no-op EVALSHA) and to the mutex's same row"
           " (its 8 threads on 8 clients for the contended ones); above 1x is slower for times, more for rates.",
           "",
           "Server time (`benches/breakdown_kinds/`): the scripts driven directly with the library's protocol"
           " values; EVALSHA's usec in INFO commandstats around batches of one kind of call, one call at a time,"
           " in no-op units (a `return 1` EVALSHA measured in the same interleaved rounds), medians over rounds."
           " Queues are filled with pipelined first-call acquires and stay at their length: each release hands"
           " over to the head, each arrival queues at the tail. The rwlock's queue alternates readers and"
           " writers behind a writer, so its releases admit a reader (after a writer) and a writer (after that"
           " reader) in turn. The mutex's column is `benches/breakdown/`'s figure from the same run.", ""]
    if client:
        out += ["### Client level (loopback)", ""] + client + [""]
    if not own("rwlock_round_trips") and not own("rwlock_contended"):
        out += ["The reader-writer lock's client-level rows are not measured yet: its client API (`FairRwLock`)"
                " is not on this branch; `rwlock` in `benches/kinds/mod.rs` is where they go.", ""]
    link = client_table(lambda name, _=False: own(name, True))
    if link:
        out += ["### Client level on the emulated link", "",
                "The same rows from a `FAIRLOCK_BENCH_LINK_DELAY_US` run, against that run's floor and mutex.",
                ""] + link + [""]
    if server:
        out += ["### Server time per operation (no-op EVALSHA units)", ""] + server
    return out
