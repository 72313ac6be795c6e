//! C's `errno`: where each thread keeps its `errno`, and the error numbers with their messages, which are the
//! contract's (`gpu_startup_protocol::errno`): the loader returns the error its operating system gave (`open` of a
//! missing file is [`ENOENT`], 2) and the device passes it on unchanged.
//!
//! `errno` is per thread, as C11 requires: every thread of the grid calls the C library at once, and a global `errno`
//! would hold whichever thread failed last. Each thread's lives in its block's launch-sized memory
//! ([`abi::block_memory_bytes`](crate::abi::block_memory_bytes): 4 bytes a thread, after the RPC client's part), is 0
//! when each kernel starts, and lasts as long as the thread (constructors, `main` and the exit sequence run in three
//! kernels, and each starts with 0).

use core::ffi::c_int;

use crate::gpu::Gpu;

pub use gpu_startup_protocol::errno::*;

/// The calling thread's `errno`, what C's `errno` names (through `__errno_location`).
pub fn location<G: Gpu>() -> *mut c_int {
    match G::block_memory() {
        Some(base) => {
            let shape = G::launch_shape();
            let offset = crate::abi::block_memory_thread_part(&shape, G::LANE_SIZE)
                + shape.linear_thread_in_block(G::thread_ids().thread) * crate::abi::BLOCK_MEMORY_PER_THREAD;
            // SAFETY: the launch gave the block `abi::block_memory_bytes`, whose per-thread part holds a word for each
            // of its threads, 4-byte aligned (the part starts at a multiple of 16); the caller's thread is one of them.
            unsafe { base.cast::<u8>().add(offset as usize).cast::<c_int>().as_ptr() }
        }
        None => fallback_location(),
    }
}

/// Sets the calling thread's `errno` to 0, as every kernel starts.
pub fn clear<G: Gpu>() {
    set::<G>(0);
}

/// Sets the calling thread's `errno`.
pub fn set<G: Gpu>(number: c_int) {
    // SAFETY: `location` is the calling thread's own word: no other thread writes it.
    unsafe { location::<G>().write(number) };
}

/// The calling thread's `errno`.
pub fn get<G: Gpu>() -> c_int {
    // SAFETY: as in `set`.
    unsafe { location::<G>().read() }
}

/// Where `errno` lives without block memory: a host thread's own, in the host tests.
#[cfg(any(test, feature = "host"))]
fn fallback_location() -> *mut c_int {
    std::thread_local! {
        static ERRNO: core::cell::Cell<c_int> = const { core::cell::Cell::new(0) };
    }
    ERRNO.with(|errno| errno.as_ptr())
}

/// Where `errno` lives without block memory on a GPU: never, as the loader gives every launch block memory; one word
/// for all keeps a stray call from faulting.
#[cfg(not(any(test, feature = "host")))]
fn fallback_location() -> *mut c_int {
    static ERRNO: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);
    ERRNO.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::HostThread;

    #[test]
    fn each_host_thread_has_its_own_errno() {
        set::<HostThread>(EBADF);
        std::thread::spawn(|| {
            assert_eq!(get::<HostThread>(), 0);
            set::<HostThread>(ENOENT);
        })
        .join()
        .unwrap();
        assert_eq!(get::<HostThread>(), EBADF);
        clear::<HostThread>();
        assert_eq!(get::<HostThread>(), 0);
    }
}
