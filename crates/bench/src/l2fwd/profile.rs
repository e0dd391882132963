//! What the bench reads from a callgrind output file: the instructions (Ir) of the collected
//! part by object file, and how often each function was called from each caller.

use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct Profile {
    /// Self instructions per object file (the binary, DPDK's libraries, libc…).
    pub ir_by_object: BTreeMap<String, u64>,
    /// `(caller, callee)` → calls, by function name (callgrind's, as `--dump` writes them).
    pub calls: BTreeMap<(String, String), u64>,
    /// Estimated cycles of everything collected.
    pub cycles: u64,
    /// Every event (in the order of `event_names`) per object file.
    pub events_by_object: BTreeMap<String, Vec<u64>>,
    pub event_names: Vec<String>,
}

impl Profile {
    pub fn total(&self) -> u64 {
        self.ir_by_object.values().sum()
    }

    /// The events of the object files whose names end with `suffix`.
    pub fn events_of(&self, suffix: &str) -> crate::callgrind::Events {
        let mut sums = vec![0u64; self.event_names.len()];
        for (_, values) in self.events_by_object.iter().filter(|(object, _)| object.ends_with(suffix)) {
            sums.iter_mut().zip(values).for_each(|(sum, v)| *sum += v);
        }
        let get = |name: &str| self.event_names.iter().position(|n| n == name).map_or(0, |i| sums[i]);
        crate::callgrind::Events::by_name(get)
    }
}

/// Parses callgrind's format (compressed names: `(id) name` the first time, `(id)` after;
/// a cost line after `calls=` is the call's inclusive cost, not the caller's own; Ir is the
/// first event). `cycles`: the estimate of the whole file, kept with it.
pub fn parse(text: &str, cycles: u64) -> Profile {
    let mut names: BTreeMap<(&str, String), String> = BTreeMap::new();
    let mut resolve = |kind: &'static str, value: &str| -> String {
        let value = value.trim();
        match value.strip_prefix('(').and_then(|v| v.split_once(')')) {
            Some((id, rest)) if !rest.trim().is_empty() => {
                names.insert((kind, id.to_string()), rest.trim().to_string());
                rest.trim().to_string()
            }
            Some((id, _)) => names.get(&(kind, id.to_string())).cloned().unwrap_or_default(),
            None => value.to_string(),
        }
    };
    let mut p = Profile { cycles, ..Profile::default() };
    let (mut object, mut function, mut callee) = (String::new(), String::new(), String::new());
    let mut after_calls = false;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("events:") {
            p.event_names = v.split_whitespace().map(str::to_string).collect();
        } else if let Some(v) = line.strip_prefix("ob=") {
            object = resolve("ob", v);
        } else if let Some(v) = line.strip_prefix("fn=") {
            function = resolve("fn", v);
        } else if let Some(v) = line.strip_prefix("cob=") {
            resolve("ob", v);
        } else if let Some(v) = line.strip_prefix("cfn=") {
            callee = resolve("fn", v);
        } else if let Some(v) = line.strip_prefix("calls=") {
            let n: u64 = v.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
            *p.calls.entry((function.clone(), callee.clone())).or_default() += n;
            after_calls = true;
        } else if line.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-' || c == '*') {
            if after_calls {
                after_calls = false; // inclusive cost of the call
                continue;
            }
            let costs: Vec<u64> = line.split_whitespace().skip(1).map(|n| n.parse().unwrap_or(0)).collect();
            *p.ir_by_object.entry(object.clone()).or_default() += costs.first().copied().unwrap_or(0);
            let sums = p.events_by_object.entry(object.clone()).or_default();
            sums.resize(sums.len().max(costs.len()), 0);
            sums.iter_mut().zip(&costs).for_each(|(sum, c)| *sum += c);
        } else if line.starts_with("fl=") || line.starts_with("fi=") || line.starts_with("fe=") {
            resolve("fl", &line[3..]);
        } else if line.starts_with("cfi=") || line.starts_with("cfl=") {
            resolve("fl", &line[4..]);
        }
    }
    p
}
