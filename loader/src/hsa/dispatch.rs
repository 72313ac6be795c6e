//! The pure part of an HSA kernel launch: the AQL dispatch packet (header, setup, dimensions) and the kernarg
//! segment (the startup's struct, then the hidden arguments the loader fills). Nothing here touches the runtime, so
//! it is tested without a GPU.

use std::ffi::c_void;

use gpu_startup_protocol::abi::LaunchParams;

use super::sys;
use crate::image::amd_metadata::KernelArg;

/// A dispatch's shape in AQL terms: work-group size in work-items, grid size in work-items, and dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// 1, 2 or 3: the highest axis whose grid is more than one work-item wide (axes above it must be 1 wide).
    pub dimensions: u16,
    pub workgroup_size: [u16; 3],
    pub grid_size: [u32; 3],
}

/// A launch that no AQL packet can describe.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    #[error("{threads} threads per block in {axis} do not fit an AQL packet")]
    BlockTooLarge { threads: u32, axis: &'static str },
    #[error("{threads} threads times {blocks} blocks in {axis} exceed 2^32 work-items")]
    GridTooLarge { threads: u32, blocks: u32, axis: &'static str },
}

impl Geometry {
    /// CUDA's blocks and threads as AQL sizes: a work-group is a block, the grid counts work-items (threads times
    /// blocks on each axis).
    pub fn new(params: &LaunchParams) -> Result<Self, GeometryError> {
        let mut workgroup_size = [0u16; 3];
        let mut grid_size = [0u32; 3];
        for axis in 0..3 {
            let [threads, blocks] = [params.threads[axis], params.blocks[axis]];
            workgroup_size[axis] =
                u16::try_from(threads).map_err(|_| GeometryError::BlockTooLarge { threads, axis: axis_name(axis) })?;
            grid_size[axis] = threads.checked_mul(blocks).ok_or(GeometryError::GridTooLarge {
                threads,
                blocks,
                axis: axis_name(axis),
            })?;
        }
        let dimensions = match grid_size {
            [_, _, z] if z > 1 => 3,
            [_, y, _] if y > 1 => 2,
            _ => 1,
        };
        Ok(Self { dimensions, workgroup_size, grid_size })
    }

    /// The packet's `setup` field: the dimension count.
    pub fn setup(&self) -> u16 {
        self.dimensions << sys::HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS
    }
}

fn axis_name(axis: usize) -> &'static str {
    ["x", "y", "z"][axis]
}

/// The dispatch packet's header: a kernel dispatch that waits for every earlier packet of the queue to finish
/// (barrier bit: the three kernels run in queue order without the host waiting between them), with system-scope
/// acquire and release fences (the kernels talk to the host through host memory, and the host reads their results).
pub const fn packet_header() -> u16 {
    ((sys::HSA_PACKET_TYPE_KERNEL_DISPATCH << sys::HSA_PACKET_HEADER_TYPE)
        | (1 << sys::HSA_PACKET_HEADER_BARRIER)
        | (sys::HSA_FENCE_SCOPE_SYSTEM << sys::HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE)
        | (sys::HSA_FENCE_SCOPE_SYSTEM << sys::HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE)) as u16
}

/// The packet's first 32 bits, header and setup, which the host stores last and atomically (with release
/// semantics): the packet processor may read the slot as soon as its type is no longer `INVALID`.
pub fn header_word(geometry: &Geometry) -> u32 {
    u32::from(packet_header()) | (u32::from(geometry.setup()) << 16)
}

/// What the loader looked up about a kernel: its code address and segment sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCode {
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT`: the kernel descriptor's address.
    pub object: u64,
    pub kernarg_size: u32,
    pub group_size: u32,
    pub private_size: u32,
    /// The kernel recurses or calls through pointers, so its stack size is unknown at compile time.
    pub dynamic_stack: bool,
}

/// Private (scratch) memory per work-item given to kernels whose stack the compiler could not size (what LLVM's
/// loader gives them).
pub const DYNAMIC_STACK_BYTES: u32 = 16 * 1024;

/// The dispatch packet, whole; the caller copies all of it but the first 32 bits into the queue slot, then stores
/// [`header_word`]. `block_memory` bytes of group memory are added to what the kernel itself declares: the dynamic
/// part the startup reads through `gpu_launch_sized_workgroup_mem` (`abi::block_memory_bytes`).
pub fn dispatch_packet(
    geometry: &Geometry,
    code: &KernelCode,
    block_memory: u32,
    kernarg_address: *mut c_void,
    completion_signal: sys::hsa_signal_t,
) -> sys::hsa_kernel_dispatch_packet_t {
    let private_segment_size =
        if code.dynamic_stack { code.private_size.max(DYNAMIC_STACK_BYTES) } else { code.private_size };
    sys::hsa_kernel_dispatch_packet_t {
        header: packet_header(),
        setup: geometry.setup(),
        workgroup_size_x: geometry.workgroup_size[0],
        workgroup_size_y: geometry.workgroup_size[1],
        workgroup_size_z: geometry.workgroup_size[2],
        reserved0: 0,
        grid_size_x: geometry.grid_size[0],
        grid_size_y: geometry.grid_size[1],
        grid_size_z: geometry.grid_size[2],
        private_segment_size,
        group_segment_size: code.group_size + block_memory,
        kernel_object: code.object,
        kernarg_address,
        reserved2: 0,
        completion_signal,
    }
}

/// The kernarg segment of `size` bytes: zeroed, the explicit struct at offset 0, then the hidden arguments the
/// metadata lists and the loader can know (block counts, work-group sizes, remainders, grid dimensions, global
/// offsets, the queue). The others (printf and hostcall buffers, heap, multigrid, completion action, ...) belong to
/// language runtimes this startup does not use, and stay zero.
pub fn kernarg_segment(
    size: usize,
    explicit: &[u8],
    hidden: &[KernelArg],
    params: &LaunchParams,
    queue: u64,
) -> Vec<u8> {
    let mut segment = vec![0u8; size.max(explicit.len())];
    segment[..explicit.len()].copy_from_slice(explicit);
    let geometry_dims = Geometry::new(params).map(|g| g.dimensions).unwrap_or(1);
    for arg in hidden.iter().filter(|arg| arg.is_hidden()) {
        let Some(value) = hidden_value(&arg.value_kind, params, geometry_dims, queue) else { continue };
        let (Ok(offset), Ok(width)) = (usize::try_from(arg.offset), usize::try_from(arg.size)) else { continue };
        // Only arguments of the width the ABI gives them, and inside the segment.
        if width == 0 || width > 8 || offset.checked_add(width).is_none_or(|end| end > segment.len()) {
            continue;
        }
        segment[offset..offset + width].copy_from_slice(&value.to_le_bytes()[..width]);
    }
    segment
}

/// The value of a hidden argument, by kind (LLVM's `AMDGPUUsage`, code object v5 implicit arguments).
fn hidden_value(kind: &str, params: &LaunchParams, dimensions: u16, queue: u64) -> Option<u64> {
    let axis = |name: &str| kind.strip_prefix(name).and_then(|rest| ["_x", "_y", "_z"].iter().position(|s| *s == rest));
    if let Some(axis) = axis("hidden_block_count") {
        return Some(params.blocks[axis].into());
    }
    if let Some(axis) = axis("hidden_group_size") {
        return Some(params.threads[axis].into());
    }
    if axis("hidden_remainder").is_some() || axis("hidden_global_offset").is_some() {
        // The grid is a whole number of work-groups on every axis, and it starts at 0.
        return Some(0);
    }
    match kind {
        "hidden_grid_dims" => Some(dimensions.into()),
        "hidden_queue_ptr" => Some(queue),
        _ => None,
    }
}

/// The queue size to ask for: a power of two no smaller than the agent's minimum and room for the three packets,
/// within its maximum.
pub fn queue_size(min: u32, max: u32) -> u32 {
    min.max(4).next_power_of_two().min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_startup_protocol::abi::{BeginArgs, EndArgs, KernelArgs, StartArgs};

    fn params(threads: [u32; 3], blocks: [u32; 3]) -> LaunchParams {
        LaunchParams { threads, blocks }
    }

    #[test]
    fn the_header_is_a_barrier_dispatch_with_system_fences() {
        let header = packet_header();
        assert_eq!(header & 0xff, 2, "type KERNEL_DISPATCH in bits 0..8");
        assert_eq!((header >> 8) & 1, 1, "barrier bit");
        assert_eq!((header >> 9) & 3, 2, "acquire fence: system scope");
        assert_eq!((header >> 11) & 3, 2, "release fence: system scope");
        assert_eq!(header >> 13, 0, "reserved bits");
        assert_eq!(header, 0x1502);
    }

    #[test]
    fn geometry_counts_work_items_and_dimensions() {
        let single = Geometry::new(&LaunchParams::SINGLE).unwrap();
        assert_eq!(single, Geometry { dimensions: 1, workgroup_size: [1, 1, 1], grid_size: [1, 1, 1] });
        let flat = Geometry::new(&params([256, 1, 1], [8, 1, 1])).unwrap();
        assert_eq!((flat.dimensions, flat.workgroup_size, flat.grid_size), (1, [256, 1, 1], [2048, 1, 1]));
        let square = Geometry::new(&params([16, 16, 1], [4, 2, 1])).unwrap();
        assert_eq!((square.dimensions, square.workgroup_size, square.grid_size), (2, [16, 16, 1], [64, 32, 1]));
        // Only z wider than one: still three dimensions (counting the axes wider than one, `1 + (y != 1) + (z != 1)`,
        // would say 2).
        let deep = Geometry::new(&params([1, 1, 4], [1, 1, 1])).unwrap();
        assert_eq!((deep.dimensions, deep.grid_size), (3, [1, 1, 4]));
        // One block of one thread in y but many blocks in y: the grid is wide in y.
        assert_eq!(Geometry::new(&params([32, 1, 1], [1, 3, 1])).unwrap().dimensions, 2);
        assert_eq!(deep.setup(), 3);
    }

    #[test]
    fn geometry_rejects_what_a_packet_cannot_hold() {
        let error = Geometry::new(&params([65536, 1, 1], [1, 1, 1])).unwrap_err();
        assert_eq!(error, GeometryError::BlockTooLarge { threads: 65536, axis: "x" });
        assert_eq!(error.to_string(), "65536 threads per block in x do not fit an AQL packet");
        let error = Geometry::new(&params([1, 1, 1024], [1, 1, 1 << 22])).unwrap_err();
        assert!(error.to_string().contains("in z exceed 2^32"), "{error}");
        let error = Geometry::new(&params([1024, 1, 1], [1 << 22, 1, 1])).unwrap_err();
        assert_eq!(error, GeometryError::GridTooLarge { threads: 1024, blocks: 1 << 22, axis: "x" });
    }

    #[test]
    fn the_packet_carries_the_launch() {
        let geometry = Geometry::new(&params([64, 2, 1], [10, 3, 1])).unwrap();
        let code = KernelCode {
            object: 0xdead_b000,
            kernarg_size: 288,
            group_size: 512,
            private_size: 64,
            dynamic_stack: false,
        };
        let kernargs = 0x7000_0000usize as *mut c_void;
        let signal = sys::hsa_signal_t { handle: 42 };
        let packet = dispatch_packet(&geometry, &code, 8, kernargs, signal);
        assert_eq!(packet.header, packet_header());
        assert_eq!(packet.setup, 2);
        assert_eq!([packet.workgroup_size_x, packet.workgroup_size_y, packet.workgroup_size_z], [64, 2, 1]);
        assert_eq!([packet.grid_size_x, packet.grid_size_y, packet.grid_size_z], [640, 6, 1]);
        assert_eq!((packet.private_segment_size, packet.group_segment_size), (64, 520));
        assert_eq!(packet.kernel_object, 0xdead_b000);
        assert_eq!(packet.kernarg_address, kernargs);
        assert_eq!(packet.completion_signal.handle, 42);
        assert_eq!((packet.reserved0, packet.reserved2), (0, 0));
        let dynamic = dispatch_packet(&geometry, &KernelCode { dynamic_stack: true, ..code }, 8, kernargs, signal);
        assert_eq!(dynamic.private_segment_size, DYNAMIC_STACK_BYTES);
        // The word stored last: header in the low half, setup (dimensions) in the high half.
        assert_eq!(header_word(&geometry), 0x0002_1502);
        // AQL packets are 64 bytes, header and setup first.
        assert_eq!(size_of::<sys::hsa_kernel_dispatch_packet_t>(), 64);
        assert_eq!(std::mem::offset_of!(sys::hsa_kernel_dispatch_packet_t, workgroup_size_x), 4);
    }

    fn startup_args() -> (BeginArgs, StartArgs, EndArgs) {
        let (argv, envp) = (0x1000 as *mut *mut core::ffi::c_char, 0x2000 as *mut *mut core::ffi::c_char);
        (
            BeginArgs {
                argc: 3,
                rpc_port_count: 64,
                argv,
                envp,
                rpc_region: 0x3000 as *mut c_void,
                control: 0x4000 as *mut gpu_startup_protocol::abi::Control,
                heap: 0x6000 as *mut c_void,
                heap_size: 1 << 30,
            },
            StartArgs { argc: 3, reserved: 0, argv, envp, result: 0x5000 as *mut i32, test: 0x6000 as *const _ },
            EndArgs { result: 0x5000 as *mut i32 },
        )
    }

    #[test]
    fn the_explicit_struct_opens_the_kernarg_segment() {
        let (begin, start, end) = startup_args();
        let segment = kernarg_segment(256, begin.as_bytes(), &[], &LaunchParams::SINGLE, 0);
        assert_eq!(segment.len(), 256);
        assert_eq!(&segment[..56], begin.as_bytes());
        // The fields where the device reads them (the `repr(C)` layout, no padding).
        assert_eq!(&segment[0..4], &3i32.to_le_bytes());
        assert_eq!(&segment[4..8], &64u32.to_le_bytes());
        assert_eq!(&segment[8..16], &0x1000u64.to_le_bytes());
        assert_eq!(&segment[16..24], &0x2000u64.to_le_bytes());
        assert_eq!(&segment[24..32], &0x3000u64.to_le_bytes());
        assert_eq!(&segment[32..40], &0x4000u64.to_le_bytes());
        assert_eq!(&segment[40..48], &0x6000u64.to_le_bytes());
        assert_eq!(&segment[48..56], &(1u64 << 30).to_le_bytes());
        assert!(segment[56..].iter().all(|&b| b == 0), "the rest is zeroed");

        let segment = kernarg_segment(40, start.as_bytes(), &[], &LaunchParams::SINGLE, 0);
        assert_eq!(&segment[24..32], &0x5000u64.to_le_bytes());
        assert_eq!(&segment[32..40], &0x6000u64.to_le_bytes());
        // A kernarg segment smaller than the struct (the symbol info lied) still holds the whole struct.
        let segment = kernarg_segment(0, end.as_bytes(), &[], &LaunchParams::SINGLE, 0);
        assert_eq!(segment, 0x5000u64.to_le_bytes());
    }

    #[test]
    fn hidden_arguments_are_filled_by_kind() {
        let (_, start, _) = startup_args();
        // Code object v5's implicit arguments after the 40-byte explicit struct.
        let hidden: Vec<KernelArg> = [
            (40, 4, "hidden_block_count_x"),
            (44, 4, "hidden_block_count_y"),
            (48, 4, "hidden_block_count_z"),
            (52, 2, "hidden_group_size_x"),
            (54, 2, "hidden_group_size_y"),
            (56, 2, "hidden_group_size_z"),
            (58, 2, "hidden_remainder_x"),
            (80, 8, "hidden_global_offset_x"),
            (104, 2, "hidden_grid_dims"),
            (120, 8, "hidden_hostcall_buffer"),
            (240, 8, "hidden_queue_ptr"),
            // Outside the segment: ignored rather than written past its end.
            (294, 4, "hidden_block_count_x"),
        ]
        .into_iter()
        .map(|(offset, size, kind)| KernelArg { offset, size, value_kind: kind.into() })
        .collect();
        let launch = params([128, 2, 1], [10, 5, 1]);
        let segment = kernarg_segment(296, start.as_bytes(), &hidden, &launch, 0xabcd_0000);
        assert_eq!(&segment[..40], start.as_bytes());
        let u32_at = |at: usize| u32::from_le_bytes(segment[at..at + 4].try_into().unwrap());
        let u16_at = |at: usize| u16::from_le_bytes(segment[at..at + 2].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(segment[at..at + 8].try_into().unwrap());
        assert_eq!([u32_at(40), u32_at(44), u32_at(48)], [10, 5, 1]);
        assert_eq!([u16_at(52), u16_at(54), u16_at(56)], [128, 2, 1]);
        assert_eq!(u16_at(58), 0);
        assert_eq!(u64_at(80), 0);
        assert_eq!(u16_at(104), 2);
        assert_eq!(u64_at(120), 0, "no hostcall buffer");
        assert_eq!(u64_at(240), 0xabcd_0000);
        assert_eq!(&segment[294..296], &[0, 0]);
    }

    #[test]
    fn queue_sizes_are_powers_of_two_in_range() {
        assert_eq!(queue_size(4096, 131072), 4096);
        assert_eq!(queue_size(1, 131072), 4);
        assert_eq!(queue_size(100, 131072), 128);
        assert_eq!(queue_size(64, 16), 16);
    }
}
