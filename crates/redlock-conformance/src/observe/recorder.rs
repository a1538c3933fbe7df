//! A `metrics` recorder that keeps every counter, gauge and histogram by name and labels,
//! for tests to read: [`Recorded`]. Installed as the process's global recorder, since the
//! driver loops run on threads of their own.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// Every metric registered since the process installed it.
#[derive(Default)]
pub struct Recorded {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Samples>>>,
}

impl Recorded {
    /// The process's recorder, installed as the global recorder on first call.
    pub fn global() -> &'static Self {
        static RECORDED: OnceLock<&'static Recorded> = OnceLock::new();
        RECORDED.get_or_init(|| {
            let recorded: &'static Self = Box::leak(Box::default());
            metrics::set_global_recorder(Ref(recorded))
                .expect("no other global recorder in this test binary");
            recorded
        })
    }

    /// A counter's value: `name` or `name{label=value}` (0 if never registered).
    pub fn counter(&self, key: &str) -> u64 {
        let counters = self.counters.lock().expect("counters");
        counters.get(key).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// A gauge's value (0 if never registered).
    pub fn gauge(&self, key: &str) -> f64 {
        let gauges = self.gauges.lock().expect("gauges");
        gauges
            .get(key)
            .map_or(0.0, |g| f64::from_bits(g.load(Ordering::Relaxed)))
    }

    /// A histogram's samples so far (none if never registered).
    pub fn samples(&self, key: &str) -> Vec<f64> {
        let histograms = self.histograms.lock().expect("histograms");
        histograms
            .get(key)
            .map_or_else(Vec::new, |h| h.0.lock().expect("samples").clone())
    }

    /// Every key registered, of any kind.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .counters
            .lock()
            .expect("counters")
            .keys()
            .cloned()
            .collect();
        keys.extend(self.gauges.lock().expect("gauges").keys().cloned());
        keys.extend(self.histograms.lock().expect("histograms").keys().cloned());
        keys
    }
}

/// The recorder itself: a reference to the leaked store.
struct Ref(&'static Recorded);

impl Recorder for Ref {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.0.counters.lock().expect("counters");
        Counter::from_arc(Arc::clone(counters.entry(text(key)).or_default()))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut gauges = self.0.gauges.lock().expect("gauges");
        Gauge::from_arc(Arc::clone(gauges.entry(text(key)).or_default()))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.0.histograms.lock().expect("histograms");
        Histogram::from_arc(Arc::clone(histograms.entry(text(key)).or_default()))
    }
}

/// A histogram's samples.
#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().expect("samples").push(value);
    }
}

/// `name` or `name{a=x,b=y}`.
fn text(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    match labels.is_empty() {
        true => key.name().to_owned(),
        false => format!("{}{{{}}}", key.name(), labels.join(",")),
    }
}
