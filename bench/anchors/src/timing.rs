//! Interleaved timing: every contestant runs once per round, in a rotating order, so a slow
//! spell of a shared machine hits all of them alike. A ratio is taken round by round (pair by
//! pair) and its median quoted with its spread; absolute figures are medians over rounds.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// One thing to time. `run` does one iteration.
pub struct Contestant<'a> {
    /// The row name.
    pub name: String,
    /// One iteration.
    pub run: Box<dyn FnMut() + 'a>,
}

impl<'a> Contestant<'a> {
    /// A contestant whose iteration returns a value (kept from the optimizer).
    pub fn new<T>(name: impl Into<String>, mut f: impl FnMut() -> T + 'a) -> Self {
        Contestant {
            name: name.into(),
            run: Box::new(move || {
                black_box(f());
            }),
        }
    }
}

/// The per-round figures of one contestant.
#[derive(Debug, Clone)]
pub struct Series {
    /// The contestant's name.
    pub name: String,
    /// Iterations per round.
    pub iters: u64,
    /// Nanoseconds per iteration, one value per round.
    pub ns: Vec<f64>,
}

impl Series {
    /// Median, min and max of the per-round figures.
    pub fn spread(&self) -> Spread {
        Spread::of(&self.ns)
    }

    /// The per-round ratio `self / base`, summarized.
    pub fn ratio_to(&self, base: &Series) -> Spread {
        let ratios: Vec<f64> = self.ns.iter().zip(&base.ns).map(|(a, b)| a / b).collect();
        Spread::of(&ratios)
    }
}

/// A median with the range it came from.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let median = match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Spread {
            median,
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// As JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({ "median": self.median, "min": self.min, "max": self.max })
    }
}

/// How many iterations of `run` fill about `batch` (at least one).
fn calibrate(run: &mut dyn FnMut(), batch: Duration) -> u64 {
    run(); // warm-up: caches, lazy initialization, page faults
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            run();
        }
        let took = t.elapsed();
        if took >= batch || iters >= 1 << 30 {
            // Scale to the batch from the last measurement.
            let per = took.as_secs_f64() / iters as f64;
            return ((batch.as_secs_f64() / per).ceil() as u64).max(1);
        }
        iters *= if took < batch / 16 { 8 } else { 2 };
    }
}

/// Time `contestants` over `rounds` rounds of about `batch` each.
pub fn interleave(
    contestants: &mut [Contestant<'_>],
    rounds: usize,
    batch: Duration,
) -> Vec<Series> {
    let iters: Vec<u64> = contestants
        .iter_mut()
        .map(|c| calibrate(&mut c.run, batch))
        .collect();
    let mut series: Vec<Series> = contestants
        .iter()
        .zip(&iters)
        .map(|(c, &iters)| Series {
            name: c.name.clone(),
            iters,
            ns: Vec::with_capacity(rounds),
        })
        .collect();
    let n = contestants.len();
    for round in 0..rounds {
        for k in 0..n {
            let i = (k + round) % n;
            let c = &mut contestants[i];
            let t = Instant::now();
            for _ in 0..iters[i] {
                (c.run)();
            }
            let ns = t.elapsed().as_secs_f64() * 1e9 / iters[i] as f64;
            series[i].ns.push(ns);
        }
    }
    series
}
