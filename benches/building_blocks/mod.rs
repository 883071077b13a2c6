//! The price of each building block a lock script is made of, counted on
//! the same server in the same run as the paths, so that a design can be
//! priced before it is written: the call itself (by EVALSHA and by FCALL,
//! with few and with many arguments), one `redis.call` of each command the
//! scripts send, and the Lua string work they do between commands.
//!
//! A block's price is the instructions in `call()` of a script made of
//! the block and `return 1`, less those of `return 1` alone given the same
//! KEYS and ARGV by the same caller. The values change every call (a
//! token, a lock value), as a lock's do, so no block finds its result
//! already interned. (A directory module, so cargo does not take it for a
//! bench target.)

use crate::Counted;

/// A block: what it is, and its Lua (run with one KEY, the lock-sized
/// string `bench:blocks`, and two ARGV: a 60-byte lock value, a 16-digit
/// token).
struct Block {
    name: &'static str,
    lua: &'static str,
}

const BLOCKS: &[Block] = &[
    Block {
        name: "redis.call GET (60-byte value)",
        lua: "redis.call('GET', KEYS[1])",
    },
    Block {
        name: "redis.call SET with PX (60-byte value)",
        lua: "redis.call('SET', KEYS[1], ARGV[1], 'PX', 600000)",
    },
    Block {
        name: "redis.call EXISTS (absent key)",
        lua: "redis.call('EXISTS', KEYS[1] .. ':q')",
    },
    Block {
        name: "redis.call PTTL",
        lua: "redis.call('PTTL', KEYS[1])",
    },
    Block {
        name: "redis.call TIME",
        lua: "redis.call('TIME')",
    },
    Block {
        name: "redis.call PUBLISH (no subscriber)",
        lua: "redis.call('PUBLISH', KEYS[1], ARGV[2])",
    },
    Block {
        name: "string.match of a 60-byte value, 2 captures",
        lua: "local t, m = string.match(ARGV[1], '^v1 (%d+) %- %- %- ?(.*)$')",
    },
    Block {
        name: "string.find, plain, of a 16-byte ARGV in a 60-byte value",
        lua: "local at = string.find(ARGV[1], ARGV[2], 1, true)",
    },
    Block {
        name: "string.format('%d', tonumber(ARGV))",
        lua: "local s = string.format('%d', tonumber(ARGV[2]))",
    },
    Block {
        name: "concatenation of 5 parts",
        lua: "local s = ARGV[2] .. ' ' .. ARGV[1] .. ' ' .. ARGV[2]",
    },
    Block {
        name: "tonumber of a 16-digit ARGV",
        lua: "local n = tonumber(ARGV[2])",
    },
    Block {
        name: "a local function (closure) built",
        lua: "local function f(x) return x end",
    },
    Block {
        name: "reply of a 4-integer table, not 1",
        lua: "if ARGV[2] then return { 0, 1, 2, 3 } end",
    },
];

/// The keys and arguments of the call probes: one key and two ARGV (what
/// the blocks get), and three keys and nine ARGV (a mutex acquire's shape).
const SHAPES: [(usize, usize); 2] = [(1, 2), (3, 9)];

/// How a probe is called.
#[derive(Clone, Copy, PartialEq)]
enum By {
    EvalSha,
    FCall,
}

impl By {
    fn name(self) -> &'static str {
        match self {
            By::EvalSha => "EVALSHA",
            By::FCall => "FCALL",
        }
    }
}

/// The Functions library of the probes: one function per block, and the
/// empty `return 1` (`b0`). KEYS and ARGV are the functions' parameters, so
/// each body reads as the script's.
fn library() -> String {
    let mut lib = String::from(
        "#!lua name=fairlock_bench_blocks\n\
         redis.register_function('b0', function(KEYS, ARGV) return 1 end)\n",
    );
    for (i, block) in BLOCKS.iter().enumerate() {
        lib.push_str(&format!(
            "redis.register_function('b{}', function(KEYS, ARGV) {} return 1 end)\n",
            i + 1,
            block.lua
        ));
    }
    lib
}

/// KEYS and ARGV of call `i` in a `shape`: values that change per call.
fn inputs(shape: (usize, usize), i: u64) -> (Vec<String>, Vec<String>) {
    let keys = ["bench:blocks", "bench:blocks:q", "bench:blocks:d"][..shape.0]
        .iter()
        .map(|k| k.to_string())
        .collect();
    let token = 1_795_728_762_856_307 + i;
    let value = format!("v1 {token} - - - c1:{i}#6");
    let value = format!("{value:-<60}");
    let mut args = vec![value, token.to_string()];
    args.extend(
        [
            "fairlock:wake:",
            "600000",
            "c1:1",
            "60000",
            "1",
            "first",
            "0",
        ][..shape.1 - 2]
            .iter()
            .map(|a| a.to_string()),
    );
    (keys, args)
}

/// Runs body `b` (0: `return 1`, else `BLOCKS[b - 1]`) once.
fn run(conn: &mut redis::Connection, by: By, b: usize, shape: (usize, usize), i: u64) {
    let (keys, args) = inputs(shape, i);
    let _: redis::Value = match by {
        By::EvalSha => {
            let body = match b {
                0 => "return 1".to_owned(),
                _ => format!("{} return 1", BLOCKS[b - 1].lua),
            };
            let script = redis::Script::new(&body);
            let mut inv = script.prepare_invoke();
            for k in &keys {
                inv.key(k);
            }
            for a in &args {
                inv.arg(a);
            }
            inv.invoke(conn).unwrap()
        }
        By::FCall => redis::cmd("FCALL")
            .arg(format!("b{b}"))
            .arg(keys.len())
            .arg(&keys)
            .arg(&args)
            .query(conn)
            .unwrap(),
    };
}

/// Counts every probe on `counted`'s server (by FCALL too where it has
/// Functions), prints a table and returns the JSON object
/// `{"calls": [...], "per_argument": {...}, "blocks": [...]}`.
pub fn measure(counted: &Counted, n: u64, conn: &mut redis::Connection) -> String {
    let mut callers = vec![By::EvalSha];
    match redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(library())
        .query::<String>(conn)
    {
        Ok(_) => callers.push(By::FCall),
        Err(err) => eprintln!("server_cost: no FCALL probes: FUNCTION LOAD: {err}"),
    }
    let mut calls = Vec::new();
    let mut per_argument = Vec::new();
    let mut prices: Vec<Vec<f64>> = vec![Vec::new(); BLOCKS.len()];
    println!("\nbuilding blocks (instructions in call())");
    for &by in &callers {
        let mut bases = Vec::new();
        for shape in SHAPES {
            let base = counted.per_op(n, |i| run(conn, by, 0, shape, i));
            println!(
                "  {} `return 1`, {} KEYS + {} ARGV: {base:.0}",
                by.name(),
                shape.0,
                shape.1
            );
            calls.push(format!(
                "{{\"by\": \"{}\", \"keys\": {}, \"argv\": {}, \"instructions\": {base:.0}}}",
                by.name(),
                shape.0,
                shape.1
            ));
            bases.push(base);
        }
        let more = (SHAPES[1].0 + SHAPES[1].1 - SHAPES[0].0 - SHAPES[0].1) as f64;
        let each = (bases[1] - bases[0]) / more;
        println!("  {} per KEY or ARGV: {each:.0}", by.name());
        per_argument.push(format!("\"{}\": {each:.0}", by.name()));
        for (b, price) in prices.iter_mut().enumerate() {
            let whole = counted.per_op(n, |i| run(conn, by, b + 1, SHAPES[0], i));
            price.push(whole - bases[0]);
        }
    }
    let mut blocks = Vec::new();
    for (block, price) in BLOCKS.iter().zip(&prices) {
        let by: Vec<String> = callers
            .iter()
            .zip(price)
            .map(|(by, p)| format!("{} {p:.0}", by.name()))
            .collect();
        println!("  {}: {}", block.name, by.join(", "));
        let fields: Vec<String> = callers
            .iter()
            .zip(price)
            .map(|(by, p)| format!("\"{}\": {p:.0}", by.name()))
            .collect();
        blocks.push(format!(
            "{{\"block\": \"{}\", {}}}",
            block.name,
            fields.join(", ")
        ));
    }
    let _: () = redis::cmd("DEL").arg("bench:blocks").query(conn).unwrap();
    format!(
        "{{\"calls\": [{}], \"per_argument\": {{{}}}, \"blocks\": [{}]}}",
        calls.join(", "),
        per_argument.join(", "),
        blocks.join(", ")
    )
}
