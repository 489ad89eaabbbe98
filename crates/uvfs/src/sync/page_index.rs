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
//!   after clearing its slot: `# Safety` of [`set`](PageIndex::set)), or until no reader
//!   can be walking the index any more.
//! - A node is reachable from the root only while it is initialised; a node a writer
//!   unlinks goes into an [`Unlinked`], which frees it when dropped, and the writer drops
//!   that only after a grace period (`sync::page_reclaim::retire`) or when no reader can
//!   be walking the index (`# Safety` of [`clear`](PageIndex::clear) and
//!   [`detach`](PageIndex::detach)), so a pinned reader may finish walking a node that was
//!   unlinked under it.
//! - `used` counts a node's non-null slots; it is read and written only by writers.
//!
//! Lock order: none of its own (the caller's data lock serialises writers).

use super::atomic::{AtomicPtr, AtomicU32, Ordering};
use super::epoch::Guard;
use super::page::PageBuf;
use std::mem::size_of;
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

/// Nodes in `n`'s subtree (`n` included).
///
/// # Safety
/// - `n` is a live node that no writer changes meanwhile (the caller is the writer, or owns
///   the unreachable subtree).
unsafe fn count_subtree(n: *mut Node) -> usize {
    // SAFETY: live and unchanged (caller).
    let node = unsafe { &*n };
    let mut count = 1;
    if node.shift > 0 {
        for s in &node.slots {
            // Relaxed: no writer runs (the caller's contract), nothing to order.
            let c = s.load(Ordering::Relaxed).cast::<Node>();
            if !c.is_null() {
                // SAFETY: a child of such a node is such a node.
                count += unsafe { count_subtree(c) };
            }
        }
    }
    count
}

/// Index nodes unlinked from a [`PageIndex`] by a writer (whole subtrees), freed when this
/// is dropped.
///
/// # Invariants
/// Each node is unreachable from its index and owned by this value alone; whoever got it
/// from [`PageIndex::clear`] or [`PageIndex::detach`] (unsafe) drops it only once no reader
/// can still hold one of its nodes: after a grace period of the readers' collector, or when
/// no reader can be walking the index at all.
#[derive(Default)]
pub(crate) struct Unlinked {
    roots: Vec<*mut Node>,
}

// SAFETY: the nodes are unreachable and owned by this value alone (invariant); moving it to
// the thread that runs a deferred free moves that ownership.
unsafe impl Send for Unlinked {}

impl std::fmt::Debug for Unlinked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unlinked")
            .field("subtrees", &self.roots.len())
            .finish()
    }
}

impl Unlinked {
    /// Bytes of the nodes held (counts them: 1 per subtree after a `clear`).
    pub(crate) fn bytes(&self) -> usize {
        self.roots
            .iter()
            // SAFETY: owned by us, unreachable, so unchanged (invariant).
            .map(|&n| unsafe { count_subtree(n) } * size_of::<Node>())
            .sum()
    }
}

impl Drop for Unlinked {
    fn drop(&mut self) {
        for &n in &self.roots {
            // SAFETY: unreachable, ours alone, and no reader can hold it any more (the
            // invariant: we are dropped only after a grace period or with no reader left).
            unsafe { free_subtree(n) };
        }
    }
}

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

    /// The page at `idx`, if one is set; valid while `_guard` (a pin of the collector the
    /// writers retire through, `sync::page_reclaim::pin`) is pinned. Writes nothing.
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

    /// Sets the page at `idx` to `page`, growing the tree as needed.
    ///
    /// Context: the caller holds the lock that serialises this index's writers.
    ///
    /// # Safety
    /// - `page` stays valid until its slot is set again (cleared or replaced) and then
    ///   until a grace period of the readers' collector has passed (the caller retires it
    ///   after this call, `sync::page_reclaim::retire`), or until no reader can be walking
    ///   the index any more.
    #[cfg_attr(feature = "audit", track_caller)]
    pub unsafe fn set(&self, idx: u64, page: &PageBuf) {
        let page: *const PageBuf = page;
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

    /// Clears `idx`; prunes nodes left empty, moving them into `unlinked`.
    ///
    /// Context: the caller holds the lock that serialises this index's writers.
    ///
    /// # Safety
    /// - `unlinked` is dropped only once no reader can hold a node unlinked here: after a
    ///   grace period of the readers' collector (`sync::page_reclaim::retire`), or when no
    ///   reader can be walking the index any more ([`Unlinked`]'s invariant).
    #[cfg_attr(feature = "audit", track_caller)]
    pub unsafe fn clear(&self, idx: u64, unlinked: &mut Unlinked) {
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
            // SAFETY: on the path just walked; a node unlinked by the loop's earlier rounds
            // is in no `Unlinked` yet, and only dropping one frees a node.
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
        // INVARIANT (`Unlinked`): each is unreachable (its parent's slot, or the root, was
        // cleared above), all its slots are null (a subtree of one node), and our caller
        // drops `unlinked` only when no reader can hold it (`# Safety`).
        unlinked
            .roots
            .extend(path[len - emptied..len].iter().map(|&(n, _)| n));
    }

    /// Unlinks the whole tree (the index is empty afterwards) and returns it; the pages it
    /// pointed to are the caller's, as always.
    ///
    /// Context: the caller holds the lock that serialises this index's writers.
    ///
    /// # Safety
    /// - As [`clear`](Self::clear): the result is dropped only once no reader can hold one
    ///   of its nodes.
    #[cfg_attr(feature = "audit", track_caller)]
    pub unsafe fn detach(&self) -> Unlinked {
        // Release: as the slot stores of `clear` (a reader that loads the null finds no
        // page); the nodes stay allocated for one that loaded the old root (`# Safety`).
        let root = self.root.swap(ptr::null_mut(), Ordering::Release);
        let mut unlinked = Unlinked::default();
        if !root.is_null() {
            // INVARIANT (`Unlinked`): the root was the only way to the tree, and it is null
            // now; our caller drops the result only when no reader can hold it.
            unlinked.roots.push(root);
        }
        unlinked
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
    use crate::sync::page_reclaim;

    /// Set and clear at indexes that make the tree grow to 9 levels and prune back to
    /// nothing; every `get` agrees with a model map.
    #[test]
    fn set_get_clear_agree_with_a_map() {
        let idx = PageIndex::new();
        let pages: Vec<Box<PageBuf>> = (0..6).map(|_| PageBuf::zeroed()).collect();
        let keys = [0u64, 63, 64, 4095, 1 << 30, (1 << 52) - 1];
        let g = page_reclaim::pin();
        let mut model = std::collections::BTreeMap::new();
        for (k, p) in keys.iter().zip(&pages) {
            // SAFETY: the pages outlive the index's use of them (dropped after `idx`'s
            // last `get` below).
            unsafe { idx.set(*k, p) };
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
        let mut unlinked = Unlinked::default();
        for k in [63u64, 1 << 30, 0, (1 << 52) - 1, 64, 4095] {
            // SAFETY: `unlinked` is dropped below, when this thread is the only user.
            unsafe { idx.clear(k, &mut unlinked) };
            model.remove(&k);
            probe(&idx, &model);
        }
        assert!(unlinked.bytes() > 0, "pruned nodes were handed back");
        // Relaxed: single thread.
        assert!(
            idx.root.load(Ordering::Relaxed).is_null(),
            "empty tree pruned to nothing"
        );
        drop(g);
    }
}
