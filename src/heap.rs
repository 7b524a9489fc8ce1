//! Handing freed memory back to the system. glibc's allocator returns memory on its own only
//! from the top of the heap, and only past a threshold it raises after large frees; what a
//! daemon frees in the middle — finished jobs leaving memory while new ones arrive — stays
//! resident until reused. After a burst that never comes back, that is memory held for
//! nothing (`gantry bench memory`: about 3 MiB of 32 at a million jobs).

/// Returns the allocator's wholly free pages to the system (glibc's `malloc_trim`). It walks
/// the free lists once, well under a millisecond at a daemon's heap size, so callers do it
/// after a known amount of churn, not per operation. Elsewhere than glibc it does nothing.
pub fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases pages of chunks the allocator holds free; it is
    // thread-safe (each arena is locked while it is trimmed).
    unsafe {
        libc::malloc_trim(0);
    }
}
