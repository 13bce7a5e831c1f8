//! What a backend's nodes can hold ([`crate::Backend::capacity`]) and the arithmetic over it:
//! which nodes count, the memory left for a run, whether a trial's sandboxes fit, and whether
//! a sandbox can never fit on any node. No Docker here: the backends fill a [`Capacity`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Limits;

/// One node as its backend reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCapacity {
    /// The node's id (Swarm node id; `local` for the docker backend).
    pub id: String,
    /// Its hostname, for messages.
    pub name: String,
    /// CPUs it has (`Description.Resources.NanoCPUs` / 1e9; the engine's `NCPU`).
    pub cpus: f64,
    /// Memory it has (`Description.Resources.MemoryBytes`; the engine's `MemTotal`).
    pub memory_bytes: u64,
    /// Memory reserved by the platform's tasks on it, by the run their labels name.
    pub reserved_by_run: BTreeMap<String, u64>,
    /// Memory reserved by every other task on it (not the platform's).
    pub reserved_other: u64,
    /// Why it takes no sandboxes (`state down`, `availability drain`, a placement constraint
    /// it does not match); `None`: usable.
    pub unusable: Option<String>,
}

impl NodeCapacity {
    /// A usable node with nothing reserved.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        cpus: f64,
        memory_bytes: u64,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            cpus,
            memory_bytes,
            reserved_by_run: BTreeMap::new(),
            reserved_other: 0,
            unusable: None,
        }
    }

    /// Memory free for `run`'s new sandboxes: the total minus what other runs and other
    /// tasks reserve (what `run` itself reserves is its admitted trials', which the caller
    /// counts).
    pub fn free_for(&self, run: &str) -> u64 {
        let others: u64 = self
            .reserved_by_run
            .iter()
            .filter(|(r, _)| r.as_str() != run)
            .map(|(_, b)| *b)
            .sum::<u64>()
            + self.reserved_other;
        self.memory_bytes.saturating_sub(others)
    }

    /// Memory reserved by every task on it.
    pub fn reserved(&self) -> u64 {
        self.reserved_by_run.values().sum::<u64>() + self.reserved_other
    }
}

impl fmt::Display for NodeCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} CPUs, {} memory, {} reserved)",
            self.name,
            self.cpus,
            Bytes(self.memory_bytes),
            Bytes(self.reserved())
        )
    }
}

/// What a backend's nodes can hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Every node, usable or not (the unusable say why).
    pub nodes: Vec<NodeCapacity>,
    /// Whether the backend reserves each sandbox's memory on a node (Swarm: a sandbox waits
    /// `pending` until a node has its memory free, so a run must not start more than fits).
    /// False (docker): memory is only a limit, the engine overcommits; then only CPUs are
    /// checked (a container cannot be limited to more CPUs than its node has).
    pub reserves_memory: bool,
}

/// How much one sandbox needs of a node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Needs {
    pub cpus: f64,
    pub memory_bytes: u64,
}

impl From<&Limits> for Needs {
    fn from(l: &Limits) -> Self {
        Self {
            cpus: l.cpus,
            memory_bytes: l.memory_bytes,
        }
    }
}

impl fmt::Display for Needs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} CPUs, {} memory", self.cpus, Bytes(self.memory_bytes))
    }
}

/// A byte count for people (`2.0 GiB`, `512 MiB`).
#[derive(Debug, Clone, Copy)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: u64 = 1024 * 1024;
        const GIB: u64 = 1024 * MIB;
        if self.0 >= GIB {
            write!(f, "{:.1} GiB", self.0 as f64 / GIB as f64)
        } else {
            write!(f, "{} MiB", self.0 / MIB)
        }
    }
}

/// Why a sandbox can never run on any node of a [`Capacity`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NeverFits {
    #[error("no node can take sandboxes ({0})")]
    NoUsableNode(String),
    #[error("the largest node is {largest}")]
    TooLarge { largest: String },
}

impl Capacity {
    /// Nothing known about the nodes (a backend without a capacity query): bounds nothing.
    pub fn unknown() -> Self {
        Self::default()
    }

    /// The nodes that take sandboxes.
    pub fn usable(&self) -> impl Iterator<Item = &NodeCapacity> {
        self.nodes.iter().filter(|n| n.unusable.is_none())
    }

    /// Whether this capacity bounds anything (some node is known).
    pub fn is_known(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// The usable node with the most memory (then CPUs).
    pub fn largest(&self) -> Option<&NodeCapacity> {
        self.usable().max_by(|a, b| {
            a.memory_bytes
                .cmp(&b.memory_bytes)
                .then(a.cpus.total_cmp(&b.cpus))
        })
    }

    /// Whether `node` could hold `needs` with nothing else on it.
    fn could_hold(&self, node: &NodeCapacity, needs: &Needs) -> bool {
        needs.cpus <= node.cpus + 1e-9
            && (!self.reserves_memory || needs.memory_bytes <= node.memory_bytes)
    }

    /// `Err` when no usable node could ever hold a sandbox with `needs` (its memory reserved
    /// over a node's total, or its CPU limit over a node's CPUs), whatever else runs; `Ok` when
    /// one could, or when nothing is known.
    pub fn check_fits(&self, needs: &Needs) -> Result<(), NeverFits> {
        if !self.is_known() {
            return Ok(());
        }
        if self.usable().next().is_none() {
            let why: Vec<String> = self
                .nodes
                .iter()
                .map(|n| format!("{}: {}", n.name, n.unusable.as_deref().unwrap_or("usable")))
                .collect();
            return Err(NeverFits::NoUsableNode(why.join("; ")));
        }
        if self.usable().any(|n| self.could_hold(n, needs)) {
            return Ok(());
        }
        Err(NeverFits::TooLarge {
            largest: self.largest().map(ToString::to_string).unwrap_or_default(),
        })
    }

    /// The room `run` has for new sandboxes: per usable node, its CPUs and the memory free for
    /// the run ([`NodeCapacity::free_for`]).
    pub fn room_for(&self, run: &str) -> Room {
        Room {
            nodes: self
                .usable()
                .map(|n| RoomNode {
                    cpus: n.cpus,
                    free: if self.reserves_memory {
                        n.free_for(run)
                    } else {
                        u64::MAX
                    },
                })
                .collect(),
            known: self.is_known(),
        }
    }

    /// Usable nodes, memory and what is free for `run`, for log lines.
    pub fn describe(&self, run: &str) -> String {
        if !self.is_known() {
            return "capacity unknown".into();
        }
        let usable = self.usable().count();
        let total: u64 = self.usable().map(|n| n.memory_bytes).sum();
        let cpus: f64 = self.usable().map(|n| n.cpus).sum();
        let mut text = format!(
            "{usable} usable node(s) of {}: {cpus} CPUs, {} memory",
            self.nodes.len(),
            Bytes(total)
        );
        if self.reserves_memory {
            let free: u64 = self.usable().map(|n| n.free_for(run)).sum();
            text.push_str(&format!(", {} not reserved by others", Bytes(free)));
        }
        for n in &self.nodes {
            if let Some(why) = &n.unusable {
                text.push_str(&format!("; {} ignored: {why}", n.name));
            }
        }
        text
    }
}

/// One usable node's room: its CPUs (a limit, never used up) and free memory.
#[derive(Debug, Clone, PartialEq)]
struct RoomNode {
    cpus: f64,
    free: u64,
}

/// The memory a run still has on each usable node; sandboxes are placed into it.
#[derive(Debug, Clone, PartialEq)]
pub struct Room {
    nodes: Vec<RoomNode>,
    /// False: nothing is known, everything fits.
    known: bool,
}

impl Room {
    /// Places the sandboxes of one trial (`sandboxes`: what each needs), each on a node with
    /// its memory free and enough CPUs, largest first, each on the node with the most memory
    /// left (as Swarm spreads); takes their memory and returns true, or changes nothing and
    /// returns false.
    pub fn place(&mut self, sandboxes: &[Needs]) -> bool {
        if !self.known {
            return true;
        }
        let mut trial = self.nodes.clone();
        let mut order: Vec<&Needs> = sandboxes.iter().collect();
        order.sort_by_key(|n| std::cmp::Reverse(n.memory_bytes));
        for needs in order {
            let best = trial
                .iter_mut()
                .filter(|n| needs.cpus <= n.cpus + 1e-9 && needs.memory_bytes <= n.free)
                .max_by_key(|n| n.free);
            match best {
                Some(n) => n.free -= needs.memory_bytes,
                None => return false,
            }
        }
        self.nodes = trial;
        true
    }

    /// How many trials with these sandboxes fit, up to `cap`.
    pub fn how_many(&self, sandboxes: &[Needs], cap: usize) -> usize {
        let mut room = self.clone();
        let mut n = 0;
        while n < cap && room.place(sandboxes) {
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1024 * 1024 * 1024;

    fn node(name: &str, cpus: f64, gib: u64) -> NodeCapacity {
        NodeCapacity::new(name, name, cpus, gib * GIB)
    }

    fn trial(agent_gib: u64, grader_gib: u64) -> [Needs; 2] {
        [
            Needs {
                cpus: 1.0,
                memory_bytes: agent_gib * GIB,
            },
            Needs {
                cpus: 0.5,
                memory_bytes: grader_gib * GIB,
            },
        ]
    }

    /// Three ready nodes (one half taken by another run, one by a foreign service), one down,
    /// one drained, one excluded by a constraint.
    fn cluster() -> Capacity {
        let mut a = node("a", 4.0, 16);
        a.reserved_by_run.insert("other-run".into(), 8 * GIB);
        a.reserved_by_run.insert("this-run".into(), 4 * GIB);
        let mut b = node("b", 2.0, 8);
        b.reserved_other = 2 * GIB;
        let c = node("c", 8.0, 8);
        let mut down = node("down", 64.0, 512);
        down.unusable = Some("state down".into());
        let mut drained = node("drained", 64.0, 512);
        drained.unusable = Some("availability drain".into());
        let mut excluded = node("excluded", 64.0, 512);
        excluded.unusable = Some("does not match `node.labels.rb==yes`".into());
        Capacity {
            nodes: vec![a, b, c, down, drained, excluded],
            reserves_memory: true,
        }
    }

    #[test]
    fn down_drained_and_excluded_nodes_are_ignored_and_reservations_of_others_subtracted() {
        let cap = cluster();
        assert_eq!(cap.usable().count(), 3);
        assert_eq!(cap.largest().map(|n| n.name.as_str()), Some("a"));
        // Free for this run: a 16 - 8 (other run; its own 4 are its admitted trials'), b 8 - 2,
        // c 8.
        let free: Vec<u64> = cap.usable().map(|n| n.free_for("this-run")).collect();
        assert_eq!(free, vec![8 * GIB, 6 * GIB, 8 * GIB]);
        // A 2 + 2 GiB trial: a holds 2, b 1, c 2 → 5 trials (agent and grader may share or
        // split nodes).
        let room = cap.room_for("this-run");
        assert_eq!(room.how_many(&trial(2, 2), 100), 5);
        assert_eq!(
            room.how_many(&trial(2, 2), 3),
            3,
            "--concurrency wins when smaller"
        );
        // 4 + 4: a and c hold one each (8 free), b none (6 free).
        assert_eq!(room.how_many(&trial(4, 4), 100), 2);
        let text = cap.describe("this-run");
        assert!(
            text.starts_with("3 usable node(s) of 6: 14 CPUs, 32.0 GiB memory, 22.0 GiB"),
            "{text}"
        );
        assert!(text.contains("down ignored: state down"), "{text}");
        assert!(
            text.contains("drained ignored: availability drain"),
            "{text}"
        );
    }

    #[test]
    fn placing_takes_memory_and_a_failed_placement_changes_nothing() {
        let cap = Capacity {
            nodes: vec![node("a", 2.0, 4), node("b", 2.0, 4)],
            reserves_memory: true,
        };
        let mut room = cap.room_for("r");
        assert!(room.place(&trial(2, 2)));
        assert!(room.place(&trial(2, 2)));
        let before = room.clone();
        assert!(!room.place(&trial(1, 1)), "8 GiB are taken");
        assert_eq!(room, before);
        // A sandbox needing more CPUs than a node has goes to one with enough, or nowhere.
        let mut room = Capacity {
            nodes: vec![node("small", 1.0, 64), node("big", 8.0, 4)],
            reserves_memory: true,
        }
        .room_for("r");
        let four_cpus = [Needs {
            cpus: 4.0,
            memory_bytes: 3 * GIB,
        }];
        assert!(room.place(&four_cpus));
        assert!(
            !room.place(&four_cpus),
            "only `big` has 4 CPUs and 1 GiB is left on it"
        );
    }

    #[test]
    fn a_sandbox_too_large_for_every_node_never_fits_and_names_the_largest() {
        let cap = cluster();
        let ok = Needs {
            cpus: 4.0,
            memory_bytes: 16 * GIB,
        };
        assert_eq!(cap.check_fits(&ok), Ok(()), "a has 4 CPUs and 16 GiB");
        // 8 CPUs (only c) and 16 GiB (only a): no one node has both.
        let split = Needs {
            cpus: 8.0,
            memory_bytes: 16 * GIB,
        };
        assert!(cap.check_fits(&split).is_err());
        // Memory over every usable node (the 512 GiB nodes are down, drained, excluded).
        let big = Needs {
            cpus: 1.0,
            memory_bytes: 17 * GIB,
        };
        let err = cap.check_fits(&big).expect_err("too large");
        assert_eq!(
            err.to_string(),
            "the largest node is a (4 CPUs, 16.0 GiB memory, 12.0 GiB reserved)"
        );
        // CPUs over every usable node.
        let wide = Needs {
            cpus: 9.0,
            memory_bytes: GIB,
        };
        assert!(cap.check_fits(&wide).is_err());
        // A backend that does not reserve memory checks CPUs only.
        let docker = Capacity {
            nodes: vec![node("local", 2.0, 8)],
            reserves_memory: false,
        };
        assert_eq!(docker.check_fits(&big), Ok(()));
        assert!(docker.check_fits(&wide).is_err());
        assert_eq!(docker.room_for("r").how_many(&trial(64, 64), 7), 7);
        // Nothing usable: said so, naming why each node is out.
        let none = Capacity {
            nodes: cap.nodes[3..].to_vec(),
            reserves_memory: true,
        };
        let err = none.check_fits(&ok).expect_err("nothing usable");
        assert!(
            err.to_string().contains("drained: availability drain"),
            "{err}"
        );
        // Nothing known: nothing bounded.
        assert_eq!(Capacity::unknown().check_fits(&big), Ok(()));
        assert_eq!(
            Capacity::unknown().room_for("r").how_many(&trial(1, 1), 4),
            4
        );
    }
}
