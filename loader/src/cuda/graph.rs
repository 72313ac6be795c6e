//! The startup's three kernels as one CUDA graph: one `cuGraphLaunch` instead of three `cuLaunchKernel` calls, and
//! the device runs the chain without the stream's gaps between kernels. The graph is built once per backend; a run
//! that launches differently (another grid, another test) updates the nodes it changes in place.

use std::ffi::c_void;

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;
use gpu_startup_protocol::abi::{Kernel, LaunchParams};

use super::errors::describe;
use crate::error::{LoaderError, Result};

/// What one node launches: its grid, its launch-sized block memory and its argument bytes.
#[derive(Clone, PartialEq, Eq)]
struct NodeLaunch {
    grid: LaunchParams,
    shared_bytes: u32,
    args: Vec<u8>,
}

impl NodeLaunch {
    /// The driver's description of this launch of `function`. The driver copies the argument bytes that
    /// `argument` points to when it takes the description, so `argument` only has to outlive the call.
    fn params(&self, function: sys::CUfunction, argument: &mut [*mut c_void; 1]) -> sys::CUDA_KERNEL_NODE_PARAMS {
        let [tx, ty, tz] = self.grid.threads;
        let [bx, by, bz] = self.grid.blocks;
        argument[0] = self.args.as_ptr().cast_mut().cast();
        sys::CUDA_KERNEL_NODE_PARAMS {
            func: function,
            gridDimX: bx,
            gridDimY: by,
            gridDimZ: bz,
            blockDimX: tx,
            blockDimY: ty,
            blockDimZ: tz,
            sharedMemBytes: self.shared_bytes,
            kernelParams: argument.as_mut_ptr(),
            extra: std::ptr::null_mut(),
            // Null: the function handle and the current context say which kernel.
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        }
    }
}

/// `_begin` → `_start` → `_end`, instantiated.
pub(super) struct StartupGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    nodes: [sys::CUgraphNode; 3],
    functions: [sys::CUfunction; 3],
    /// What each node launches now, so that a run changes only what differs.
    current: [NodeLaunch; 3],
}

impl StartupGraph {
    /// Builds and instantiates the chain of `functions` (in [`Kernel::ALL`]'s order) with these launches, its nodes
    /// linked as `chain` says.
    fn build(functions: [sys::CUfunction; 3], launches: [NodeLaunch; 3], chain: Chain) -> Result<Self> {
        let mut graph = std::ptr::null_mut();
        // SAFETY: creates an empty graph, destroyed in `Drop` (or below on failure).
        check("cuGraphCreate", None, unsafe { sys::cuGraphCreate(&mut graph, 0) })?;
        let mut this =
            Self { graph, exec: std::ptr::null_mut(), nodes: [std::ptr::null_mut(); 3], functions, current: launches };
        for (index, kernel) in Kernel::ALL.into_iter().enumerate() {
            let mut argument = [std::ptr::null_mut()];
            let params = this.current[index].params(functions[index], &mut argument);
            let mut node = std::ptr::null_mut();
            // SAFETY: the graph is ours; `params` names a function of the loaded module with its one argument of
            // the kernel's size (checked against the image before loading); no dependencies yet.
            let added = unsafe { sys::cuGraphAddKernelNode_v2(&mut node, this.graph, std::ptr::null(), 0, &params) };
            check("cuGraphAddKernelNode", Some(kernel), added)?;
            this.nodes[index] = node;
            // Each node depends on the one before it: the chain runs in order, as a stream would.
            if index > 0 {
                this.add_edge(index - 1, index, chain, kernel)?;
            }
        }
        // SAFETY: the graph is complete; the executable graph is destroyed in `Drop`.
        check("cuGraphInstantiate", None, unsafe { sys::cuGraphInstantiateWithFlags(&mut this.exec, this.graph, 0) })?;
        Ok(this)
    }

    /// Makes node `to` depend on node `from`.
    fn add_edge(&mut self, from: usize, to: usize, chain: Chain, kernel: Kernel) -> Result<()> {
        let (from, to) = (self.nodes[from], self.nodes[to]);
        let added = match chain {
            // SAFETY: both nodes belong to this graph.
            Chain::Ordered => unsafe { sys::cuGraphAddDependencies(self.graph, &from, &to, 1) },
            Chain::Early => {
                // Programmatic: `to` may launch once every block of `from` let it (`griddepcontrol.launch_dependents`)
                // or ended; it waits for `from`'s end and writes itself (`griddepcontrol.wait`).
                let edge = sys::CUgraphEdgeData {
                    from_port: sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u8,
                    to_port: 0,
                    type_: sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8,
                    reserved: [0; 5],
                };
                // SAFETY: both nodes belong to this graph; the edge data describes one edge, as `numDependencies`
                // says; the driver has the call (`Chain::for_image` checked its version).
                unsafe { sys::cuGraphAddDependencies_v2(self.graph, &from, &to, &edge, 1) }
            }
        };
        check("cuGraphAddDependencies", Some(kernel), added)
    }

    /// Launches the chain on `stream`, first updating the nodes whose launch differs from the last one's.
    fn launch(&mut self, launches: [NodeLaunch; 3], stream: sys::CUstream) -> Result<()> {
        for (index, (kernel, launch)) in Kernel::ALL.into_iter().zip(launches).enumerate() {
            if self.current[index] == launch {
                continue;
            }
            let mut argument = [std::ptr::null_mut()];
            let params = launch.params(self.functions[index], &mut argument);
            // SAFETY: the node belongs to the graph `exec` was instantiated from and keeps its function; only its
            // grid, block memory and argument change, which takes effect from the next launch of `exec`.
            let updated = unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.exec, self.nodes[index], &params) };
            check("cuGraphExecKernelNodeSetParams", Some(kernel), updated)?;
            self.current[index] = launch;
        }
        // SAFETY: the executable graph and the stream are ours.
        check("cuGraphLaunch", None, unsafe { sys::cuGraphLaunch(self.exec, stream) })
    }
}

impl Drop for StartupGraph {
    fn drop(&mut self) {
        // SAFETY: both handles are ours (null where creation stopped early) and released once; errors here cannot
        // be acted on.
        unsafe {
            if !self.exec.is_null() {
                let _ = sys::cuGraphExecDestroy(self.exec);
            }
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}

/// How the graph's nodes depend on each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Chain {
    /// Each kernel launches once the one before has ended.
    #[default]
    Ordered,
    /// Each kernel may launch while the one before still runs (programmatic dependent launch): the image's kernels
    /// wait for the one before them themselves ([`gpu_startup_protocol::abi::EARLY_LAUNCH_MARKER`]). The launch latency
    /// of `_start` and `_end` then overlaps the work of the kernel before.
    Early,
}

impl Chain {
    /// Early where the image's kernels wait for the one before them (it defines the marker) and the driver has
    /// programmatic edges in graphs (CUDA 12.3).
    pub(super) fn for_image(defines_marker: bool, driver_version: i32) -> Self {
        if defines_marker && driver_version >= 12030 { Chain::Early } else { Chain::Ordered }
    }
}

/// The startup graph of a backend: built at its first launch.
#[derive(Default)]
pub(super) struct StartupLauncher {
    graph: Option<StartupGraph>,
    chain: Chain,
}

impl StartupLauncher {
    pub(super) fn new(chain: Chain) -> Self {
        Self { graph: None, chain }
    }

    /// Launches `functions` (in [`Kernel::ALL`]'s order) on `grids` with `args` and `shared_bytes` of block memory
    /// each, as one graph on `stream`.
    pub(super) fn launch(
        &mut self,
        functions: [sys::CUfunction; 3],
        grids: [LaunchParams; 3],
        shared_bytes: [u32; 3],
        args: [&[u8]; 3],
        stream: sys::CUstream,
    ) -> Result<()> {
        let launches = [0, 1, 2].map(|index| NodeLaunch {
            grid: grids[index],
            shared_bytes: shared_bytes[index],
            args: args[index].to_vec(),
        });
        match &mut self.graph {
            Some(graph) => graph.launch(launches, stream),
            None => {
                let mut graph = StartupGraph::build(functions, launches.clone(), self.chain)?;
                // The nodes already launch what was asked: this only launches.
                graph.launch(launches, stream)?;
                self.graph = Some(graph);
                Ok(())
            }
        }
    }
}

/// `api failed: ...`, naming the kernel where the call concerned one.
fn check(api: &'static str, kernel: Option<Kernel>, status: sys::CUresult) -> Result<()> {
    status.result().map_err(|error: DriverError| LoaderError::Driver {
        api,
        message: match kernel {
            Some(kernel) => format!("`{}`: {}", kernel.name(), describe(error)),
            None => describe(error),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::Chain;

    #[test]
    fn edges_are_programmatic_only_for_a_marked_image_on_a_driver_that_has_them() {
        assert_eq!(Chain::for_image(true, 13000), Chain::Early);
        assert_eq!(Chain::for_image(true, 12030), Chain::Early);
        assert_eq!(Chain::for_image(true, 12020), Chain::Ordered);
        assert_eq!(Chain::for_image(false, 13000), Chain::Ordered);
        assert_eq!(Chain::for_image(true, 0), Chain::Ordered);
    }
}
