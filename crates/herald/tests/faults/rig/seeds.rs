//! Seeds: a small generator every random choice comes from, the seeds of a run (from the
//! environment or at random), and how a failed run says to replay it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::server::SWEPT;

/// xorshift64, seeded through splitmix64 so nearby seeds give unrelated streams.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // xorshift never leaves zero.
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo))
    }

    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut bytes = vec![0; n];
        self.fill(&mut bytes);
        bytes
    }

    pub fn key(&mut self) -> [u8; 32] {
        let mut key = [0; 32];
        self.fill(&mut key);
        key
    }

    pub fn hex(&mut self, chars: usize) -> String {
        hex::encode(self.bytes(chars.div_ceil(2)))[..chars].to_owned()
    }

    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

pub fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
    )
}

/// The seeds of this test run: `HERALD_FAULT_RUNS` of them, from `HERALD_FAULT_SEED` or
/// from a random base.
pub fn seeds() -> Vec<u64> {
    let fixed = env_number("HERALD_FAULT_SEED");
    let runs = env_number("HERALD_FAULT_RUNS").unwrap_or(if fixed.is_some() { 1 } else { 3 });
    let base = fixed.unwrap_or_else(|| {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).unwrap();
        // Short enough to type back.
        u64::from_le_bytes(bytes) % 1_000_000_000
    });
    (0..runs.max(1)).map(|i| base.wrapping_add(i)).collect()
}

/// Prints how to replay a run that panicked.
pub struct Replay<'a> {
    scenario: &'a str,
    seed: u64,
}

impl Drop for Replay<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "faults: {} FAILED with seed {}; replay with \
                 HERALD_FAULT_SEED={} cargo test -p herald --test faults {}",
                self.scenario, self.seed, self.seed, self.scenario
            );
        }
    }
}

/// Run `scenario` once per seed; each run returns how many times it killed the server.
pub fn run_seeds<F, Fut>(name: &str, scenario: F)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let seeds = seeds();
    let mut kills = 0;
    for &seed in &seeds {
        let _replay = Replay {
            scenario: name,
            seed,
        };
        eprintln!("faults: {name} seed {seed}");
        kills += runtime.block_on(scenario(seed));
    }
    eprintln!(
        "faults: {name}: {} runs (seeds {seeds:?}), {kills} kills, {:.1?}; \
         temporary files swept after kills, all scenarios so far: {}",
        seeds.len(),
        started.elapsed(),
        SWEPT.load(Ordering::Relaxed)
    );
}
