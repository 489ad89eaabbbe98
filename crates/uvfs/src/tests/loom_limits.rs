//! Loom models of `Limits` (fs/tmpfs/limits.rs, issue 16's per-thread reservations): two
//! threads reserving near the limit never pass it together and fail only when the space
//! is really gone, the last inode goes to exactly one, and frees are never lost. Each model
//! runs on small pools: 2 shards, a batch of 1 page (a shard holds at most 2), so that the
//! shard reserves, the refill, the close-and-collect slow path and the lock all show up in
//! a few steps. The mutations (`limits::Mutation`) must be caught.

use crate::fs::tmpfs::{Limits, LimitsMutation as Mutation};
use loom::sync::Arc;
use loom::thread;

/// Limits of `blocks` pages and `inodes` inodes, 2 shards, batch 1, with `m` in force.
fn limits(blocks: u64, inodes: u64, m: Option<Mutation>) -> Arc<Limits> {
    Arc::new(match m {
        None => Limits::with_shards(blocks, inodes, 2, 1),
        Some(m) => Limits::mutant(blocks, inodes, 2, 1, m),
    })
}

/// Two threads on shards 0 and 1 reserve 2 pages each against a maximum of 3, with 1 page
/// held before and given back concurrently on shard 1, and shard 0 holding a reserve of
/// one page: exactly one of the two fits whatever the order (2 pages are free from the
/// start, 1 + 2 + 2 > 3), and the count is exactly what was reserved.
fn near_the_limit(m: Option<Mutation>) {
    loom::model(move || {
        let l = limits(3, u64::MAX, m);
        // Shard 0 ends up holding one page of reserve (taken and given back on it), and
        // one page is in use.
        l.reserve_blocks_on(0, 1).unwrap();
        l.release_blocks_on(0, 1);
        l.reserve_blocks_on(1, 1).unwrap();
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let l = l.clone();
                thread::spawn(move || l.reserve_blocks_on(i, 2).is_ok())
            })
            .collect();
        let l2 = l.clone();
        let releaser = thread::spawn(move || l2.release_blocks_on(1, 1));
        let ok: Vec<bool> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        releaser.join().unwrap();
        let (_, used, _, _) = l.counts();
        let n = ok.iter().filter(|&&b| b).count() as u64;
        assert!(used <= 3, "the mount holds {used} pages of 3");
        assert_eq!(n, 1, "exactly one of the two fits: {ok:?}");
        assert_eq!(used, 2 * n, "the count is exactly what was reserved");
    });
}

/// Two reservers near the limit never exceed it together and fail only when it is reached.
#[test]
fn reservations_never_pass_the_limit() {
    near_the_limit(None);
}

/// Mutation: the fast path takes from the shard without checking its reserve (Linux's fast
/// path without the limit test); both reservers fit, 4 pages of 3 (the count, derived from
/// what is free, cannot show it: the successes do).
#[test]
#[should_panic(expected = "exactly one of the two fits: [true, true]")]
fn mutation_no_reserve_check_is_caught() {
    near_the_limit(Some(Mutation::NoReserveCheck));
}

/// Mutation: the slow path decides on `free` alone, without collecting the shards'
/// reserves: shard 0's page is missed and the reserver on shard 1 fails with 2 pages free.
#[test]
#[should_panic(expected = "exactly one of the two fits: [false, false]")]
fn mutation_no_collect_is_caught() {
    near_the_limit(Some(Mutation::NoCollect));
}

/// Inode reservations at the limit: of two creators racing for the last inode, on two
/// shards (`shared` false) or one, exactly one gets it.
fn last_inode(shared: bool) {
    loom::model(move || {
        let l = limits(u64::MAX, 3, None);
        // The root, and one inode created and removed on shard 0, which keeps its space.
        l.reserve_inode_on(0).unwrap();
        l.reserve_inode_on(0).unwrap();
        l.release_inode_on(0);
        l.reserve_inode_on(1).unwrap();
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let l = l.clone();
                let shard = if shared { 0 } else { i };
                thread::spawn(move || l.reserve_inode_on(shard).is_ok())
            })
            .collect();
        let n = hs
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&b| b)
            .count();
        assert_eq!(n, 1);
        assert_eq!(l.counts().3, 3);
    });
}

/// The last inode goes to exactly one of two creators on different shards.
#[test]
fn last_inode_goes_to_exactly_one() {
    last_inode(false);
}

/// The last inode goes to exactly one of two creators sharing a shard.
#[test]
fn last_inode_goes_to_exactly_one_on_one_shard() {
    last_inode(true);
}

/// Frees are never lost: two threads each take and give back a page on their own shard
/// while a third asks for the whole mount (collecting the shards, or failing while one is
/// held); afterwards nothing is in use and the whole mount can be reserved again.
#[test]
fn frees_are_never_lost() {
    loom::model(|| {
        let l = limits(2, u64::MAX, None);
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let l = l.clone();
                thread::spawn(move || {
                    if l.reserve_blocks_on(i, 1).is_ok() {
                        l.release_blocks_on(i, 1);
                    }
                })
            })
            .collect();
        let whole = l.reserve_blocks_on(0, 2).is_ok();
        for h in hs {
            h.join().unwrap();
        }
        if whole {
            assert_eq!(l.counts().1, 2);
            l.release_blocks_on(1, 2);
        }
        assert_eq!(l.counts().1, 0, "every page came back");
        l.reserve_blocks_on(1, 2).unwrap();
        assert_eq!(l.counts().1, 2);
    });
}
