#!/usr/bin/env python3
"""Where the server's instructions go in one kept callgrind dump of the
server-cost bench (FAIRLOCK_SERVER_COST_PROFILE=<dir>, see
benches/server_cost.rs): two tables per cycle, read from callgrind_annotate.

  python3 benches/server_cost_profile.py <dir>/FCALL-mutex-uncontended.cg [ops]

- inclusive: the steps of a script call as a tree (each line's count
  includes those of the lines below it; "rest" is what its children leave);
- self: every function's own instructions by kind of work (these add up to
  the whole dump: processCommand, of which call() is all but ~1%).

`ops` is the operations in the dump (the bench's batch, 400). A readable
profile needs a redis-server with symbols (Debian's is stripped: build the
same version from its source package and point FAIRLOCK_TEST_REDIS_SERVER
at it); its counts match the stripped binary's to ~1%.
"""

import re
import subprocess
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*([\d,]+)\s+\([ \d.]+%\)\s+(\*\s+)?(\S.*?)(\s+\[(.*)\])?\s*$")


def annotate(dump, inclusive):
    out = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
         "--threshold=100", "--auto=no", dump],
        capture_output=True, text=True, check=True).stdout
    rows = []
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        m = LINE.match(line)
        if started and not line.strip() and rows:
            break
        if started and m and "PROGRAM TOTALS" not in line:
            rows.append((int(m.group(1).replace(",", "")), m.group(3), m.group(5) or ""))
    return rows


def inclusive_of(rows):
    """function name -> inclusive count (the largest line of that name)."""
    table = {}
    for count, where, _ in rows:
        name = where.rsplit(":", 1)[-1]
        table[name] = max(table.get(name, 0), count)
    return table


def tree(inc, ops):
    g = lambda name: inc.get(name, 0) / ops
    total = g("call")
    entry = "fcallCommand" if g("fcallCommand") else "evalShaCommand"
    gc_all = g("luaC_step")
    gc_explicit = g("lua_gc")
    pcall = g("lua_pcall")
    redis_call = g("luaRedisGenericCommand")
    nested = g("call'2")
    commands = {
        name: g(name)
        for name in ["getCommand", "setCommand", "existsCommand", "pttlCommand",
                     "timeCommand", "delCommand", "publishCommand", "zaddCommand",
                     "zremCommand", "zrangeCommand", "zscoreCommand", "zcardCommand",
                     "zpopminCommand", "zrangebyscoreCommand", "pexpireCommand",
                     "lindexCommand", "lpopCommand", "rpushCommand", "hsetCommand",
                     "hexistsCommand", "hincrbyCommand"]
        if g(name) > 0
    }
    lua_lib = {
        "tonumber (luaB_tonumber)": g("luaB_tonumber"),
        "string.find / string.match (str_find_aux)": g("str_find_aux"),
        "string.format (str_format)": g("str_format"),
        "concatenation (luaV_concat)": g("luaV_concat"),
        "string.sub (str_sub)": g("str_sub"),
    }
    rows = [
        (0, "call() of the script", total),
        (1, "call() bookkeeping around it", total - g(entry)),
        (1, f"{entry} set-up (lookup, push the function)", g(entry) - g("luaCallFunction")),
        (1, "KEYS and ARGV into Lua tables (luaCreateArray)", g("luaCreateArray")),
        (1, "explicit GC step every 50 calls (lua_gc)", gc_explicit),
        (1, "the script body (lua_pcall)", pcall),
        (2, "redis.call (luaRedisGenericCommand)", redis_call),
        (3, "arguments into Redis strings (luaArgsToRedisArgv)", g("luaArgsToRedisArgv")),
        (3, "command lookup and checks (scriptCall less call)", g("scriptCall") - nested),
        (3, "the commands (call)", nested),
    ]
    rows += [(4, name, c) for name, c in sorted(commands.items(), key=lambda x: -x[1])]
    rows += [
        (4, "call() bookkeeping and the rest", nested - sum(commands.values())),
        (3, "replies into Lua (redisProtocolToLuaType)", g("parseReply")),
        (3, "rest", redis_call - g("luaArgsToRedisArgv") - g("scriptCall") - g("parseReply")),
    ]
    rows += [(2, name, c) for name, c in lua_lib.items() if c > 0]
    rows += [
        (2, "the VM and the rest", pcall - redis_call - sum(lua_lib.values())),
        (1, "the reply and the rest", g("luaCallFunction") - g("luaCreateArray") - pcall - gc_explicit),
        (0, "of which Lua GC anywhere (luaC_step)", gc_all),
        (0, "of which allocation anywhere (malloc, realloc, free, zmalloc, l_alloc)", None),
    ]
    return total, rows


KINDS = [
    ("memory allocation (jemalloc, zmalloc, Lua's l_alloc)",
     lambda f, fn, o: "jemalloc" in o or fn in ("malloc", "free", "realloc", "calloc", "malloc_usable_size")
     or "zmalloc.c" in f or "lmem.c" in f or fn == "l_alloc"),
    ("Lua GC (lgc.c)", lambda f, fn, o: "lgc.c" in f),
    ("Lua string interning (lstring.c)", lambda f, fn, o: "lstring.c" in f),
    ("Lua tables (ltable.c)", lambda f, fn, o: "ltable.c" in f),
    ("Lua string library (lstrlib.c)", lambda f, fn, o: "lstrlib.c" in f),
    ("numbers <-> text in libc (strtod, printf)",
     lambda f, fn, o: "libc" in o and re.search(r"strtod|printf|vsnprintf|vsprintf|sprintf|snprintf|str_to_mpn|hack_digit|mpn|round_and_return|itoa|__strchrnul|outstring|_IO_", f + ":" + fn)),
    ("Lua VM and API (lvm, ldo, lapi, ...)", lambda f, fn, o: "deps/lua" in f),
    ("Redis dicts and hashing (dict.c, siphash.c)", lambda f, fn, o: re.search(r"dict\.c|siphash\.c|dictSds|Hash", f + ":" + fn)),
    ("Redis scripting glue (script_lua.c, script.c, function*.c, eval.c)",
     lambda f, fn, o: re.search(r"script_lua|script\.c|function_lua|functions\.c|eval\.c|stdio2\.h", f)),
    ("Redis commands (t_*.c, db.c, expire.c, pubsub.c, notify.c)",
     lambda f, fn, o: re.search(r"/t_\w+\.c|db\.c|expire\.c|pubsub\.c|notify\.c", f)),
    ("other libc (memcpy, strlen, ...)", lambda f, fn, o: "libc" in o or f.startswith("./string") or "sysdeps" in f),
    ("Redis core (server.c, networking.c, object.c, sds.c, ...)", lambda f, fn, o: True),
]


def own(rows):
    """Self rows less the frames that were open when collection started
    (main and below, which callgrind_annotate charges the whole dump)."""
    whole = max(count for count, _, _ in rows)
    return [r for r in rows if r[0] < 0.99 * whole]


def kinds(rows, ops):
    sums = defaultdict(float)
    for count, where, obj in rows:
        f, _, fn = where.rpartition(":")
        for name, test in KINDS:
            if test(f, fn, obj):
                sums[name] += count / ops
                break
    return sums


def main():
    dump = sys.argv[1]
    ops = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    inc = inclusive_of(annotate(dump, True))
    self_rows = own(annotate(dump, False))
    by_kind = kinds(self_rows, ops)
    whole = sum(by_kind.values())
    total, rows = tree(inc, ops)
    alloc = by_kind["memory allocation (jemalloc, zmalloc, Lua's l_alloc)"]
    print(f"{dump}: per operation, instructions")
    print("\ninclusive | item | share of call()")
    for depth, name, count in rows:
        count = alloc if count is None else count
        print(f"{count:9.0f} | {'  ' * depth}{name} | {100 * count / total:5.1f}%")
    print(f"\nself, by kind of work (the dump: {whole:.0f}, call() {total:.0f})")
    for name, count in sorted(by_kind.items(), key=lambda x: -x[1]):
        print(f"{count:9.0f} | {name} | {100 * count / whole:5.1f}%")
    print("\nlargest self counts")
    top = defaultdict(float)
    for count, where, _ in self_rows:
        top[re.sub(r" \(\d[\d,]*x\)$", "", where.split("/")[-1])] += count / ops
    for name, count in sorted(top.items(), key=lambda x: -x[1])[:25]:
        print(f"{count:9.0f} | {name} | {100 * count / whole:5.1f}%")


if __name__ == "__main__":
    main()
