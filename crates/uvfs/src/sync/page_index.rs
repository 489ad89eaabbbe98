//! `PageIndex`: a radix tree from page index to [`PageBuf`] that readers walk without a
//! lock and without writing anything, under an epoch pin; writers change it under their
//! own lock and retire what they unlink after a grace period.
//!
//! Linux analogue: the page cache's xarray (`struct address_space::i_pages`,
//! lib/xarray.c: `xa_load` under `rcu_read_lock`, nodes freed by `call_rcu`), as
//! `filemap_read`'s fast path finds a folio without `i_rwsem` or a folio reference.
//!
//! # Shape
//! 64-way nodes (6 bits of the index per level). The root node's `shift` says which bits
//! it decodes; a leaf node (`shift == 0`) holds page pointers, an inner node child
//! pointers. The tree grows a level at the top when an index does not fit under the root
//! (the old root becomes slot 0 of the new one), and drops a node when its last slot is
//! cleared. 512 bytes per node, one node per 64 pages present (0.2% of the data).
//!
//! # Invariants
//! - Writers are serialised by the caller's lock ("Context" on each writing method); the
//!   caller owns the pages: a page pointer set at index `i` stays valid until the slot is
//!   cleared and, after that, until a grace period has passed (the caller retires the page
//!   with `Guard::defer*` after clearing its slot: `# Safety` of [`set`](PageIndex::set)).
//! - A node is reachable from the root only while it is initialised; an unlinked node is
//!   freed only after a grace period (`defer_unchecked`), so a pinned reader may finish
//!   walking a node that was unlinked under it.
//! - `used` counts a node's non-null slots; it is read and written only by writers.
//!
//! Lock order: none of its own (the caller's data lock serialises writers).

use super::atomic::{AtomicPtr, AtomicU32, Ordering};
use super::epoch::Guard;
use super::page::PageBuf;
use std::ptr;

/// Bits of the index one node decodes.
const BITS: u32 = 6;
/// Slots per node.
const FANOUT: usize = 1 << BITS;

/// One node of the tree.
struct Node {
    /// The lowest index bit this node decodes: 0 for a leaf (slots are pages), else a
    /// multiple of `BITS` (slots are nodes with `shift - BITS`). Immutable.
    shift: u32,
    /// Non-null slots. Written and read only by writers (under the caller's lock).
    used: AtomicU32,
    /// Children: `*const PageBuf` in a leaf, `*mut Node` above. Written by writers with
    /// Release, read by anyone with Acquire.
    slots: [AtomicPtr<()>; FANOUT],
}

impl Node {
    /// A new empty node at `shift`, not yet reachable.
    fn new(shift: u32) -> *mut Node {
        Box::into_raw(Box::new(Node {
            shift,
            used: AtomicU32::new(0),
            slots: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }))
    }

    /// Whether `idx` fits below a node at `shift` (which covers `64 << shift` indexes).
    fn covers(shift: u32, idx: u64) -> bool {
        shift + BITS >= 64 || idx >> (shift + BITS) == 0
    }

    /// The slot of `idx` in a node at `shift`.
    fn slot_of(shift: u32, idx: u64) -> usize {
        ((idx >> shift) as usize) & (FANOUT - 1)
    }
}

/// Frees `n` and, for an inner node, every node below it (never the pages: the caller owns
/// those).
///
/// # Safety
/// - `n` came from `Node::new`, is no longer reachable, and no reader can still hold it
///   (a grace period has passed since it was unlinked, or the tree is being dropped).
unsafe fn free_subtree(n: *mut Node) {
    // SAFETY: `n` is a live node that only we can reach now (caller).
    let node = unsafe { Box::from_raw(n) };
    if node.shift > 0 {
        for s in &node.slots {
            // Relaxed: exclusive access (the caller's contract), nothing to order.
            let c = s.load(Ordering::Relaxed).cast::<Node>();
            if !c.is_null() {
                // SAFETY: a child of an unreachable inner node is an unreachable node.
                unsafe { free_subtree(c) };
            }
        }
    }
}

/// A pointer that crosses to the epoch collector's thread in a deferred free.
struct Retired(*mut Node);
// SAFETY: the node is unreachable; the deferred function is its only user.
unsafe impl Send for Retired {}

/// The page index of one file (see the module doc).
pub struct PageIndex {
    /// The root node, null when the file has no page. Written by writers with Release,
    /// read with Acquire.
    root: AtomicPtr<Node>,
}

impl std::fmt::Debug for PageIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageIndex").finish_non_exhaustive()
    }
}

impl Default for PageIndex {
    fn default() -> Self {
        PageIndex::new()
    }
}

impl PageIndex {
    /// An empty index.
    pub fn new() -> PageIndex {
        PageIndex {
            root: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The page at `idx`, if one is set; valid while `_guard` is pinned. Writes nothing.
    ///
    /// Ordering: each load is Acquire, pairing with the Release store that published the
    /// node or page (in [`set`](Self::set)): a page found here is initialised, and its
    /// later contents are ordered by the caller's sequence count.
    #[inline]
    #[cfg_attr(feature = "audit", track_caller)]
    pub fn get<'g>(&self, idx: u64, _guard: &'g Guard) -> Option<&'g PageBuf> {
        // Acquire: pairs with the Release store of the root in `set`.
        let mut n = self.root.load(Ordering::Acquire);
        // Only the root decides the range (a node below it decodes just its own bits).
        // SAFETY: as for the nodes below (the root is one).
        if n.is_null() || !Node::covers(unsafe { (*n).shift }, idx) {
            return None;
        }
        loop {
            if n.is_null() {
                return None;
            }
            // SAFETY: a node reached from the root while pinned is initialised (published
            // with Release after `Node::new`) and freed only after a grace period that
            // our pin holds back (module invariant).
            let node = unsafe { &*n };
            // Acquire: pairs with the Release store of the slot in `set`/`grow`.
            let c = node.slots[Node::slot_of(node.shift, idx)].load(Ordering::Acquire);
            if node.shift == 0 {
                // SAFETY: a leaf's non-null slot is a page the caller keeps valid until
                // a grace period after clearing it (`set`'s contract); our pin holds
                // that grace period back.
                return unsafe { c.cast::<PageBuf>().as_ref() };
            }
            n = c.cast::<Node>();
        }
    }

    /// Sets the page at `idx` to `page` (null clears it), growing or pruning the tree.
    /// Nodes unlinked by a clear are freed after a grace period of `guard`'s collector.
    ///
    /// Context: the caller holds the lock that serialises this index's writers.
    ///
    /// # Safety
    /// - A non-null `page` stays valid until its slot is set again (cleared or replaced)
    ///   and then until a grace period has passed (the caller retires it with
    ///   `guard.defer*` after this call, or frees it only once no reader can be pinned).
    #[cfg_attr(feature = "audit", track_caller)]
    pub unsafe fn set(&self, idx: u64, page: *const PageBuf, guard: &Guard) {
        if page.is_null() {
            self.clear(idx, guard);
            return;
        }
        // Relaxed: writers are serialised by the caller's lock; the node was published by
        // an earlier writer whose stores that lock orders before ours.
        let mut root = self.root.load(Ordering::Relaxed);
        if root.is_null() {
            let mut shift = 0;
            while !Node::covers(shift, idx) {
                shift += BITS;
            }
            root = Node::new(shift);
            // Release: publishes the node's initialisation; pairs with the Acquire load in
            // `get`.
            self.root.store(root, Ordering::Release);
        }
        // SAFETY: nodes reachable from the root are live; only writers free them, and we
        // are the writer (the caller's lock).
        while !Node::covers(unsafe { (*root).shift }, idx) {
            // SAFETY: as above.
            let up = Node::new(unsafe { (*root).shift } + BITS);
            // SAFETY: `up` is a fresh node of ours.
            let upr = unsafe { &*up };
            // Relaxed: `up` is not reachable yet; the Release store of the root below
            // publishes it.
            upr.slots[0].store(root.cast(), Ordering::Relaxed);
            // Relaxed: writers only (module invariant).
            upr.used.store(1, Ordering::Relaxed);
            // Release: publishes `up`'s slots; pairs with the Acquire load in `get`. A
            // reader that loaded the old root still finds the same pages through it.
            self.root.store(up, Ordering::Release);
            root = up;
        }
        let mut n = root;
        loop {
            // SAFETY: a node reachable from the root, live while we are the writer.
            let node = unsafe { &*n };
            let slot = &node.slots[Node::slot_of(node.shift, idx)];
            // Relaxed: writers only; see the root's load.
            let c = slot.load(Ordering::Relaxed);
            if node.shift == 0 {
                if c.is_null() {
                    // Relaxed: writers only.
                    node.used.fetch_add(1, Ordering::Relaxed);
                }
                // Release: publishes the page's contents (initialised by the caller);
                // pairs with the Acquire load of the slot in `get`.
                slot.store(page.cast_mut().cast(), Ordering::Release);
                return;
            }
            if c.is_null() {
                let child = Node::new(node.shift - BITS);
                // Relaxed: writers only.
                node.used.fetch_add(1, Ordering::Relaxed);
                // Release: publishes the child's initialisation; pairs with `get`'s Acquire.
                slot.store(child.cast(), Ordering::Release);
                n = child;
            } else {
                n = c.cast();
            }
        }
    }

    /// Clears `idx` (see [`set`](Self::set)); prunes nodes left empty.
    #[cfg_attr(feature = "audit", track_caller)]
    fn clear(&self, idx: u64, guard: &Guard) {
        // Relaxed: writers only (see `set`).
        let root = self.root.load(Ordering::Relaxed);
        if root.is_null() {
            return;
        }
        // The path from the root: (node, slot index in it).
        let mut path: [(*mut Node, usize); 11] = [(ptr::null_mut(), 0); 11];
        let mut depth = 0;
        let mut n = root;
        // SAFETY: the root is live while we are the writer (as in `set`).
        if !Node::covers(unsafe { (*root).shift }, idx) {
            return;
        }
        loop {
            // SAFETY: reachable from the root, live while we are the writer.
            let node = unsafe { &*n };
            let i = Node::slot_of(node.shift, idx);
            path[depth] = (n, i);
            depth += 1;
            // Relaxed: writers only.
            let c = node.slots[i].load(Ordering::Relaxed);
            if c.is_null() {
                return;
            }
            if node.shift == 0 {
                break;
            }
            n = c.cast();
        }
        let len = depth;
        // Clear the leaf's slot, then each parent's slot of a node left empty; the emptied
        // nodes are retired only once all are unlinked (a node retired while still
        // reachable could be freed under a reader that pinned after the retirement).
        let mut emptied = 0;
        while depth > 0 {
            depth -= 1;
            let (n, i) = path[depth];
            // SAFETY: on the path just walked; unlinked nodes are freed only after a grace
            // period that our `guard` holds back.
            let node = unsafe { &*n };
            // Release: keeps every slot store Release (a null is never dereferenced, so
            // nothing needs it; a reader that loads it just finds no page).
            node.slots[i].store(ptr::null_mut(), Ordering::Release);
            // Relaxed: writers only.
            let left = node.used.fetch_sub(1, Ordering::Relaxed) - 1;
            if left > 0 {
                break;
            }
            emptied += 1;
            if depth == 0 {
                // The root itself is empty: the tree has no page.
                // Release: as for the slots above.
                self.root.store(ptr::null_mut(), Ordering::Release);
            }
        }
        // The emptied nodes are the last `emptied` entries of the path, now unreachable.
        for &(n, _) in &path[len - emptied..len] {
            let r = Retired(n);
            // SAFETY: `n` is unreachable (its parent's slot, or the root, was cleared above)
            // and all its slots are null, so `free_subtree` frees just it; it runs after
            // every reader pinned now has unpinned.
            unsafe {
                guard.defer_unchecked(move || {
                    let r = r;
                    free_subtree(r.0)
                })
            };
        }
    }
}

impl Drop for PageIndex {
    fn drop(&mut self) {
        // Relaxed: `&mut self`: no reader or writer is left (a reader borrows the index
        // through the file, which it keeps alive while pinned).
        let root = self.root.load(Ordering::Relaxed);
        if !root.is_null() {
            // SAFETY: unreachable from now on and no reader is left (above).
            unsafe { free_subtree(root) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::epoch;

    /// Set and clear at indexes that make the tree grow to 9 levels and prune back to
    /// nothing; every `get` agrees with a model map.
    #[test]
    fn set_get_clear_agree_with_a_map() {
        let idx = PageIndex::new();
        let pages: Vec<Box<PageBuf>> = (0..6).map(|_| PageBuf::zeroed()).collect();
        let keys = [0u64, 63, 64, 4095, 1 << 30, (1 << 52) - 1];
        let g = epoch::pin();
        let mut model = std::collections::BTreeMap::new();
        for (k, p) in keys.iter().zip(&pages) {
            // SAFETY: the pages outlive the index's use of them (dropped after `idx`'s
            // last `get` below).
            unsafe { idx.set(*k, &**p, &g) };
            model.insert(*k, p.addr());
        }
        let probe = |idx: &PageIndex, model: &std::collections::BTreeMap<u64, usize>| {
            for k in keys
                .iter()
                .copied()
                .chain([1, 62, 65, 4096, (1 << 30) + 1, 1 << 51])
            {
                assert_eq!(
                    idx.get(k, &g).map(|p| p.addr()),
                    model.get(&k).copied(),
                    "index {k}"
                );
            }
        };
        probe(&idx, &model);
        for k in [63u64, 1 << 30, 0, (1 << 52) - 1, 64, 4095] {
            // SAFETY: clearing.
            unsafe { idx.set(k, ptr::null(), &g) };
            model.remove(&k);
            probe(&idx, &model);
        }
        // Relaxed: single thread.
        assert!(
            idx.root.load(Ordering::Relaxed).is_null(),
            "empty tree pruned to nothing"
        );
        drop(g);
    }
}
