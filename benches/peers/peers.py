"""The Python peers of `cargo bench --features peers --bench peers`.

    peers.py REDIS_URL WORKLOAD [--quick]

WORKLOAD is one of `cycle`, `handoff`, `contended`, `fifo`. Runs it for
python-redis-lock and for redis-py's `Lock` against the given server and
prints one JSON object on stdout: {library name: {figure: value, ...}}; a
library that failed gets {"error": "..."} instead. `--quick` shrinks every
bound (the smoke run of `cargo test`).

The workloads are those of benches/peers.rs, step for step (read its module
comment for the definitions): threads, each with its own redis client (so
its own connection), an empty critical section, every run bounded in time
and count. Only the standard library and the two peers are used; run
`scripts/peers-setup` to get them into target/peers-venv.
"""
import json
import random
import sys
import threading
import time

import redis
import redis_lock

NS = 1_000_000_000


class Bounds:
    def __init__(self, quick):
        self.cycle_max, self.cycle_secs = (50, 0.2) if quick else (20_000, 1.5)
        self.handoff_max, self.handoff_secs = (10, 1.0) if quick else (500, 4.0)
        self.contended_secs = 0.2 if quick else 2.0
        self.threads = [2, 8, 32]
        self.fifo_waiters, self.fifo_rounds = (4, 1) if quick else (8, 5)


# How long the holder waits, once the other worker has entered its lock
# call, before it releases: SETTLE so that the call has reached its wait,
# plus a uniform random part as long as the library's polling period, so
# that the release falls at a random point of the waiter's polling cycle.
SETTLE = 0.003
# Between two waiters' starts in the queued-waiters workload, for libraries
# whose queue (if any) cannot be seen.
ARRIVAL_GAP = 0.075


class PythonRedisLock:
    """python-redis-lock: SET NX, then BLPOP on a signal list that release
    pushes to (push wake-up, no polling). Defaults: no expiry, no renewal."""

    name = "python-redis-lock"
    poll_period = 0.0
    config = "redis_lock.Lock(conn, name), acquire(blocking=True): defaults (no expiry, no renewal); " \
             "waits in BLPOP on the lock's signal list"

    def __init__(self, conn, key):
        self.lock = redis_lock.Lock(conn, key)

    def locked(self, critical):
        assert self.lock.acquire(blocking=True)
        critical()
        self.lock.release()

    @staticmethod
    def queued(conn, n):
        """Waiters blocked in BLPOP are visible: INFO's blocked_clients."""
        return conn.info("clients")["blocked_clients"] >= n


class RedisPyLock:
    """redis-py's Lock: SET NX PX, retried every `sleep` (0.1 s by default)."""

    name = "redis-py Lock"
    poll_period = 0.1
    config = "conn.lock(name, blocking=True, sleep=0.1) (the default sleep; no timeout): polls SET NX every 100 ms"

    def __init__(self, conn, key):
        self.lock = conn.lock(key, blocking=True, sleep=0.1)

    def locked(self, critical):
        assert self.lock.acquire()
        critical()
        self.lock.release()

    queued = None


LIBS = [PythonRedisLock, RedisPyLock]


def locker(lib, url, key):
    """A per-thread locker on its own client, its connection made and its
    scripts loaded (one cycle on a private key)."""
    conn = redis.Redis.from_url(url)
    conn.ping()
    lib(conn, f"{key}:warm:{random.getrandbits(64):x}").locked(lambda: None)
    return lib(conn, key)


def percentile(sorted_values, p):
    return sorted_values[round((len(sorted_values) - 1) * p)]


def cycle(lib, url, bounds):
    me = locker(lib, url, "peers:py:cycle")
    for _ in range(100):
        me.locked(lambda: None)
    samples = []
    deadline = time.perf_counter() + bounds.cycle_secs
    while len(samples) < bounds.cycle_max and time.perf_counter() < deadline:
        t0 = time.perf_counter_ns()
        me.locked(lambda: None)
        samples.append(time.perf_counter_ns() - t0)
    samples.sort()
    return {"cycle_ns": percentile(samples, 0.5), "cycle_samples": len(samples)}


def handoff(lib, url, bounds):
    """Two workers on two clients take strict turns. A worker enters its lock
    call only once the other holds the lock; the holder releases once the
    other has entered (plus SETTLE and the jitter); sample = release call →
    the other's lock call returning."""
    cond = threading.Condition()
    state = {"holder": None, "entering": None, "released_at": None, "done": False}
    samples = []
    started = time.perf_counter()
    errors = []
    rng = random.Random(1)

    def worker(i):
        try:
            me = locker(lib, url, "peers:py:handoff")
            other = 1 - i
            while True:
                with cond:
                    # Worker 0 starts; afterwards, each waits for the other to hold.
                    while not (state["done"] or (i == 0 and state["holder"] is None)
                               or state["holder"] == other):
                        cond.wait()
                    if state["done"]:
                        return
                    state["entering"] = i
                    cond.notify_all()

                def critical():
                    now = time.perf_counter_ns()
                    with cond:
                        if state["released_at"] is not None:
                            samples.append(now - state["released_at"])
                            state["released_at"] = None
                        state["holder"] = i
                        state["entering"] = None
                        if len(samples) >= bounds.handoff_max or time.perf_counter() - started > bounds.handoff_secs:
                            state["done"] = True
                        cond.notify_all()
                        if state["done"]:
                            return
                        while state["entering"] != other:
                            cond.wait()
                        pause = SETTLE + rng.random() * lib.poll_period
                    time.sleep(pause)
                    with cond:
                        state["released_at"] = time.perf_counter_ns()

                me.locked(critical)
                with cond:
                    if state["done"]:
                        return
        except Exception as err:  # noqa: BLE001 - reported to the caller
            errors.append(repr(err))
            with cond:
                state["done"] = True
                cond.notify_all()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(bounds.handoff_secs + 30)
    if errors:
        raise RuntimeError(errors[0])
    samples.sort()
    return {
        "handoff_p50_ns": percentile(samples, 0.5),
        "handoff_p99_ns": percentile(samples, 0.99),
        "handoff_samples": len(samples),
    }


def contended(lib, url, bounds):
    """`threads` threads on as many clients lock and unlock one lock with an
    empty critical section for a fixed window; acquisitions that completed
    inside the window, per second, and the busiest thread's share of them."""
    out = {}
    for n in bounds.threads:
        key = f"peers:py:contended:{n}"
        counts = [0] * n
        stop = threading.Event()
        ready = threading.Barrier(n + 1)
        errors = []

        def worker(i):
            try:
                me = locker(lib, url, key)
            except Exception as err:  # noqa: BLE001
                errors.append(repr(err))
                ready.abort()
                return
            ready.wait()

            def critical():
                if not stop.is_set():
                    counts[i] += 1

            try:
                while not stop.is_set():
                    me.locked(critical)
            except Exception as err:  # noqa: BLE001
                errors.append(repr(err))

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        ready.wait()
        start = time.perf_counter()
        time.sleep(bounds.contended_secs)
        stop.set()
        window = time.perf_counter() - start
        for t in threads:
            t.join(30)
        if errors:
            raise RuntimeError(errors[0])
        total = sum(counts)
        out[f"contended_{n}_per_s"] = total / window
        out[f"contended_{n}_max_share"] = max(counts) / total if total else 0.0
    return out


def fifo(lib, url, bounds):
    """The queued-waiters workload: a holder holds; waiters on their own
    clients start one after another, each once the previous is waiting
    (seen in the server's queue where the library has one, otherwise after
    ARRIVAL_GAP); the holder releases; grant order against arrival order.
    inversions = adjacent grants out of arrival order; inverted_pairs = all
    pairs out of order."""
    key = "peers:py:fifo"
    n = bounds.fifo_waiters
    holder = locker(lib, url, key)
    watcher = redis.Redis.from_url(url)
    inversions = inverted_pairs = grants = 0
    for _ in range(bounds.fifo_rounds):
        order = []
        order_lock = threading.Lock()
        go = [threading.Event() for _ in range(n)]
        ready = threading.Barrier(n + 1)
        errors = []

        def waiter(i):
            try:
                me = locker(lib, url, key)
                ready.wait()
                go[i].wait()

                def critical():
                    with order_lock:
                        order.append(i)

                me.locked(critical)
            except Exception as err:  # noqa: BLE001
                errors.append(repr(err))

        threads = [threading.Thread(target=waiter, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        ready.wait()

        def hold():
            for i in range(n):
                go[i].set()
                if lib.queued is not None:
                    deadline = time.perf_counter() + 10
                    while not lib.queued(watcher, i + 1):
                        if time.perf_counter() > deadline:
                            raise RuntimeError(f"waiter {i} not queued within 10 s")
                        time.sleep(0.001)
                else:
                    time.sleep(ARRIVAL_GAP)

        holder.locked(hold)
        for t in threads:
            t.join(60)
        if errors:
            raise RuntimeError(errors[0])
        if len(order) != n:
            raise RuntimeError(f"only {len(order)} of {n} waiters were granted within 60 s")
        inversions += sum(1 for a, b in zip(order, order[1:]) if b < a)
        inverted_pairs += sum(1 for x in range(n) for y in range(x + 1, n) if order[y] < order[x])
        grants += n
    return {"inversions": inversions, "inverted_pairs": inverted_pairs, "grants": grants,
            "fifo_rounds": bounds.fifo_rounds, "fifo_waiters": n}


WORKLOADS = {"cycle": cycle, "handoff": handoff, "contended": contended, "fifo": fifo}


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2 or args[1] not in WORKLOADS:
        sys.exit(f"usage: {argv[0]} REDIS_URL {{{'|'.join(WORKLOADS)}}} [--quick]")
    url, workload = args
    bounds = Bounds("--quick" in argv)
    out = {}
    for lib in LIBS:
        try:
            figures = WORKLOADS[workload](lib, url, bounds)
            figures["config"] = lib.config
            figures["version"] = (redis_lock.__version__ if lib is PythonRedisLock else redis.__version__)
            out[lib.name] = figures
        except Exception as err:  # noqa: BLE001 - one library's failure is a result
            out[lib.name] = {"error": f"{workload}: {err!r}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
