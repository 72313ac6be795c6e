//! The device heap's reservation: the default size shrinks to what the device can spare, an explicit one is
//! reserved exactly or not at all.

use super::*;

/// A device with `free` bytes of memory, for the heap's reservation: nothing else of the backend is used.
struct Tight {
    free: usize,
    asked: Vec<usize>,
}

impl Backend for Tight {
    fn gpu_count(&self) -> Result<u32> {
        Ok(1)
    }
    fn lane_size(&self) -> u32 {
        32
    }
    fn check_launch(&self, _: &LaunchParams) -> Result<()> {
        unreachable!("only the heap is reserved")
    }
    fn alloc_host_mapped(&mut self, _: usize) -> Result<HostMapped> {
        unreachable!("only the heap is reserved")
    }
    fn alloc_device(&mut self, len: usize) -> Result<u64> {
        self.asked.push(len);
        if len > self.free {
            return Err(LoaderError::Driver { api: "cuMemAlloc", message: "CUDA_ERROR_OUT_OF_MEMORY".into() });
        }
        self.free -= len;
        Ok(0x7000_0000)
    }
    fn copy_to_device(&mut self, _: u64, _: &[u8]) -> Result<()> {
        unreachable!("only the heap is reserved")
    }
    fn launch(&mut self, _: Kernel, _: &LaunchParams, _: &[u8]) -> Result<()> {
        unreachable!("only the heap is reserved")
    }
    fn poll(&mut self) -> Result<Progress> {
        unreachable!("only the heap is reserved")
    }
    fn resource_usage(&self, _: Kernel) -> Result<ResourceUsage> {
        unreachable!("only the heap is reserved")
    }
    fn global_address(&mut self, _: &str) -> Result<u64> {
        unreachable!("only the heap is reserved")
    }
}

#[test]
fn the_default_heap_shrinks_to_what_the_device_can_spare() {
    const MIB: usize = 1 << 20;
    let mut roomy = Tight { free: 3 << 30, asked: Vec::new() };
    assert_eq!(reserve_heap(&mut roomy, None).unwrap(), (0x7000_0000, DEFAULT_HEAP_SIZE));
    let mut tight = Tight { free: 300 * MIB, asked: Vec::new() };
    assert_eq!(reserve_heap(&mut tight, None).unwrap(), (0x7000_0000, 256 << 20));
    assert_eq!(tight.asked, [1024 * MIB, 512 * MIB, 256 * MIB]);
    let error = reserve_heap(&mut Tight { free: MIB, asked: Vec::new() }, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot reserve a device heap of 16777216 bytes (--heap-size): cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY"
    );
}

#[test]
fn an_explicit_heap_size_is_reserved_exactly_or_not_at_all() {
    let mut device = Tight { free: 1 << 30, asked: Vec::new() };
    let error = reserve_heap(&mut device, Some(2 << 30)).unwrap_err();
    assert!(error.to_string().starts_with("cannot reserve a device heap of 2147483648 bytes (--heap-size): "));
    assert_eq!(device.asked, [2 << 30], "an explicit size is not shrunk");
    assert_eq!(reserve_heap(&mut device, Some(4096)).unwrap(), (0x7000_0000, 4096));
    assert_eq!(reserve_heap(&mut device, Some(0)).unwrap(), (0, 0), "no heap");
    assert_eq!(device.asked, [2 << 30, 4096]);
}
