//! Giving the heap that start-up freed back to the operating system.
//!
//! Loading a spec parses the whole document (about 48 MB of `serde_json::Value` for GitHub's
//! 13 MB file), extracts the operations and keeps only what their `$ref`s reach. glibc's
//! allocator keeps the freed pages, scattered between live ones, as part of the process:
//! without a trim, the GitHub spec holds 106 MB RSS after start-up; with one, 49 MB.

/// Returns free heap pages to the OS (glibc's `malloc_trim`). Call it after large, one-off
/// work: start-up, a reload, and the background embedding pass. Elsewhere (musl, macOS) it
/// does nothing.
pub(crate) fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks the allocator's own free lists under its locks; it
    // takes no pointers from us and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
