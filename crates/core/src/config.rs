//! The settings of one job, read once. `Config::from_env` (what `activerma::init` does) takes
//! every setting the environment gives and checks it; a program or a test may instead build
//! one without the environment (`Config::defaults()` and `set`) and give it to
//! `activerma::init_with`. Init hands the configuration down: each layer reads what it needs
//! from it while it is built, and no layer of a running job reads the environment itself.
//! (The free functions of `settings` read the environment directly: they are for tools outside
//! a job — the launcher, `activerma info`, the benchmarks' parents.)

use crate::settings::{self, Setting, TABLE};
use crate::{Error, Result};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The values given, checked (from the environment or `set`); any other setting has its
    /// default.
    given: BTreeMap<&'static str, String>,
}

impl Config {
    /// Every setting at its default.
    pub fn defaults() -> Config {
        Config::default()
    }

    /// The settings the environment gives (blank values count as not given), every one checked:
    /// a bad value of any setting fails here, naming it.
    pub fn from_env() -> Result<Config> {
        let mut c = Config::default();
        for s in TABLE {
            if let Ok(v) = std::env::var(s.name) {
                if !v.trim().is_empty() {
                    c.insert(s, v.trim())?;
                }
            }
        }
        Ok(c)
    }

    /// Sets `name` (an `ACTIVERMA_*` setting) to `value`, checked as the environment's would be.
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut Config> {
        let s = TABLE.iter().find(|s| s.name == name).ok_or_else(|| Error::BadSetting {
            name: name.into(),
            value: value.into(),
            why: "no such setting (`activerma info` lists them)".into(),
        })?;
        self.insert(s, value.trim())?;
        Ok(self)
    }

    fn insert(&mut self, s: &'static Setting, value: &str) -> Result<()> {
        settings::check(s, value)?;
        self.given.insert(s.name, value.to_string());
        Ok(())
    }

    /// Whether `name` was given (a layer may pick its own default for a setting left alone).
    pub fn is_set(&self, name: &str) -> bool {
        settings::lookup(name);
        self.given.contains_key(name)
    }

    /// The effective value as text: the given one, else the default.
    pub fn raw(&self, name: &str) -> &str {
        let s = settings::lookup(name);
        self.given.get(name).map_or(s.default, String::as_str)
    }

    pub fn get_u64(&self, name: &str) -> Result<u64> {
        settings::parse_u64(settings::lookup(name), self.raw(name))
    }

    pub fn get_f64(&self, name: &str) -> Result<f64> {
        settings::parse_f64(settings::lookup(name), self.raw(name))
    }

    pub fn get_bool(&self, name: &str) -> Result<bool> {
        settings::parse_bool(settings::lookup(name), self.raw(name))
    }

    /// A path setting: `None` when it is left blank.
    pub fn get_path(&self, name: &str) -> Option<std::path::PathBuf> {
        Some(self.raw(name)).filter(|v| !v.trim().is_empty()).map(std::path::PathBuf::from)
    }

    pub fn get_enum(&self, name: &str) -> Result<&'static str> {
        settings::parse_enum(settings::lookup(name), self.raw(name))
    }

    /// Bytes of every rank's symmetric heap: the segments' part (ACTIVERMA_SEGMENT_SIZE) and,
    /// above it, the landing zone of buffered transfers (ACTIVERMA_LANDING_ZONE), each a whole
    /// number of pages. The conduits map this much; segments are allocated from the first part.
    pub fn heap_bytes(&self) -> Result<usize> {
        Ok(self.segment_heap_bytes()? + self.landing_zone_bytes()?)
    }

    /// The segments' part of the symmetric heap, from its start.
    pub fn segment_heap_bytes(&self) -> Result<usize> {
        Ok(crate::page::page_ceil(self.get_u64(settings::SEGMENT_SIZE)? as usize))
    }

    /// The landing zone, right after the segments' part.
    pub fn landing_zone_bytes(&self) -> Result<usize> {
        Ok(crate::page::page_ceil(self.get_u64(settings::LANDING_ZONE)? as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{NET_LATENCY_NS, PROGRESS, SEGMENT_SIZE};

    #[test]
    fn set_values_are_checked_and_read_back() {
        let mut c = Config::defaults();
        assert_eq!(c.get_enum(PROGRESS).unwrap(), "app");
        assert!(!c.is_set(PROGRESS));
        c.set(PROGRESS, "Thread").unwrap().set(SEGMENT_SIZE, "2M").unwrap();
        assert_eq!((c.get_enum(PROGRESS).unwrap(), c.get_u64(SEGMENT_SIZE).unwrap()), ("thread", 2 << 20));
        assert!(c.is_set(PROGRESS));
        let e = c.set(NET_LATENCY_NS, "fast").unwrap_err().to_string();
        assert!(e.contains("ACTIVERMA_NET_LATENCY_NS") && e.contains("whole number"), "{e}");
        assert!(c.set("ACTIVERMA_NO_SUCH", "1").is_err(), "unknown names are refused");
        assert_eq!(c.get_u64(NET_LATENCY_NS).unwrap(), 0, "a refused value leaves the old one");
    }
}
