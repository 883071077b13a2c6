//! Lock cycle cost against the round-trip floor, measured in the same run on
//! a private redis-server. `cargo bench --bench lock`

#[path = "../tests/support/mod.rs"]
mod support;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn lock_cycle(c: &mut Criterion) {
    let server = support::RedisServer::start();
    let mut conn = server.conn();
    let noop = redis::Script::new("return 1");
    let client = server.client();
    let mutex = client.fair_mutex("bench:uncontended");

    let mut group = c.benchmark_group("lock");
    group.throughput(Throughput::Elements(1));
    group.bench_function("floor: EVALSHA no-op (1 RTT)", |b| {
        b.iter(|| noop.invoke::<i64>(&mut conn).unwrap())
    });
    group.bench_function("uncontended lock+unlock (limit 2 RTT)", |b| {
        b.iter(|| mutex.lock().unwrap().unlock().unwrap())
    });
    group.finish();
}

criterion_group!(benches, lock_cycle);
criterion_main!(benches);
