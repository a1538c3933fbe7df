//! A `tracing` subscriber that keeps every span and event it sees, with their fields as
//! text, for tests to search: [`Capture`]. Installed as the process's global default, since
//! the driver loops run on threads of their own.

use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Every span and event seen since the process installed it.
#[derive(Default)]
pub struct Capture {
    next: AtomicU64,
    seen: Mutex<Seen>,
}

/// What a [`Capture`] holds.
#[derive(Default, Clone, Debug)]
pub struct Seen {
    /// Spans by id.
    pub spans: BTreeMap<u64, SpanSeen>,
    /// Events in order.
    pub events: Vec<EventSeen>,
}

/// One span: its name, explicit parent and fields (recorded later ones included).
#[derive(Clone, Debug)]
pub struct SpanSeen {
    /// The span's name, e.g. `redlock.acquire`.
    pub name: &'static str,
    /// The parent span's id, if any.
    pub parent: Option<u64>,
    /// Fields by name, as text.
    pub fields: BTreeMap<String, String>,
}

/// One event: level, parent span, fields (`message` among them).
#[derive(Clone, Debug)]
pub struct EventSeen {
    /// The event's level.
    pub level: Level,
    /// The parent span's id, if any.
    pub parent: Option<u64>,
    /// Fields by name, as text.
    pub fields: BTreeMap<String, String>,
}

impl Capture {
    /// The process's capture, installed as the global default subscriber on first call.
    pub fn global() -> &'static Self {
        static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
        CAPTURE.get_or_init(|| {
            let capture: &'static Self = Box::leak(Box::default());
            tracing::subscriber::set_global_default(Ref(capture))
                .expect("no other global subscriber in this test binary");
            capture
        })
    }

    /// A copy of what was seen so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().expect("capture").clone()
    }
}

impl Seen {
    /// Everything as one text (span names and fields, event levels and fields), to search
    /// for what must never appear.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for span in self.spans.values() {
            let _ = writeln!(out, "span {} {:?}", span.name, span.fields);
        }
        for event in &self.events {
            let _ = writeln!(out, "event {} {:?}", event.level, event.fields);
        }
        out
    }

    /// The spans named `name` whose own or ancestors' field `field` is `value`.
    pub fn spans_with(&self, name: &str, field: &str, value: &str) -> Vec<&SpanSeen> {
        (self.spans.values())
            .filter(|s| s.name == name && self.inherited(s, field) == Some(value))
            .collect()
    }

    /// The events with message `message`.
    pub fn events(&self, message: &str) -> Vec<&EventSeen> {
        (self.events.iter())
            .filter(|e| e.fields.get("message").is_some_and(|m| m == message))
            .collect()
    }

    /// The value of `field` on the span or its nearest ancestor that has it.
    pub fn inherited<'a>(&'a self, span: &'a SpanSeen, field: &str) -> Option<&'a str> {
        let mut at = Some(span);
        // Spans are made after their parents, so the chain ends; bounded anyway.
        for _ in 0..16 {
            let span = at?;
            if let Some(value) = span.fields.get(field) {
                return Some(value);
            }
            at = span.parent.and_then(|p| self.spans.get(&p));
        }
        None
    }
}

/// The subscriber itself: a reference to the leaked capture.
struct Ref(&'static Capture);

impl Subscriber for Ref {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let span = SpanSeen {
            name: attrs.metadata().name(),
            parent: attrs.parent().map(Id::into_u64),
            fields: fields.0,
        };
        self.0.seen.lock().expect("capture").spans.insert(id, span);
        Id::from_u64(id)
    }

    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(span) = self
            .0
            .seen
            .lock()
            .expect("capture")
            .spans
            .get_mut(&id.into_u64())
        {
            span.fields.extend(fields.0);
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let seen = EventSeen {
            level: *event.metadata().level(),
            parent: event.parent().map(Id::into_u64),
            fields: fields.0,
        };
        self.0.seen.lock().expect("capture").events.push(seen);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Fields as text: strings as they are, everything else as `Debug` prints it (`%` fields
/// print their `Display`).
#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}
