//! Loom models of `Limits` (super_block.rs): the compare-and-swap reservation never lets the
//! count pass its maximum and gives concurrent reservers exactly the space there is.

use crate::fs::tmpfs::Limits;
use loom::sync::Arc;
use loom::thread;

/// Two threads reserve 2 pages each against a maximum of 3 while a third gives back the one
/// reserved before: at most 3 are ever in use, and exactly one of the two fits whatever the
/// order (1 + 2 <= 3 but 2 + 2 > 3, and 1 + 2 + 2 > 3).
#[test]
fn reservations_never_pass_the_limit() {
    loom::model(|| {
        let l = Arc::new(Limits::new(3, u64::MAX));
        l.reserve_blocks(1).unwrap();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                thread::spawn(move || l.reserve_blocks(2).is_ok())
            })
            .collect();
        let l2 = l.clone();
        let releaser = thread::spawn(move || l2.release_blocks(1));
        let ok: Vec<bool> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        releaser.join().unwrap();
        let (_, used, _, _) = l.counts();
        let n = ok.iter().filter(|&&b| b).count() as u64;
        assert!(
            n >= 1,
            "2 of 3 pages were free after the release: someone must fit"
        );
        assert_eq!(used, 2 * n, "the count is exactly what was reserved");
        assert!(used <= 3);
    });
}

/// Inode reservations at the limit: exactly one of two racing creators gets the last inode.
#[test]
fn last_inode_goes_to_exactly_one() {
    loom::model(|| {
        let l = Arc::new(Limits::new(u64::MAX, 2));
        l.reserve_inode().unwrap();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                thread::spawn(move || l.reserve_inode().is_ok())
            })
            .collect();
        let n = hs
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&b| b)
            .count();
        assert_eq!(n, 1);
        assert_eq!(l.counts().3, 2);
    });
}
