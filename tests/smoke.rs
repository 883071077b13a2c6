mod support;
use std::time::Duration;
use support::*;

#[test]
fn smoke() {
    let server = RedisServer::start();
    let a = server.client();
    let b = server.client();
    let m = a.fair_mutex("x");
    let g = m.lock().unwrap();
    assert!(m.is_locked().unwrap());
    let mb = b.fair_mutex("x");
    assert!(mb.try_lock().unwrap().is_none());
    let h = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let g2 = mb.lock().unwrap();
        (t0.elapsed(), g2.fencing_token())
    });
    assert!(wait_until(Duration::from_secs(2), || m.queue_len().unwrap() == 1));
    let t1 = g.fencing_token();
    let rel = std::time::Instant::now();
    drop(g);
    let (waited, t2) = h.join().unwrap();
    eprintln!("waited {waited:?} release->{:?}", rel.elapsed());
    assert!(t2 > t1);
}
