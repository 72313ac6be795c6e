//! Launch dimensions from the command line, checked before anything touches a GPU.

use gpu_startup_protocol::abi::LaunchParams;

use crate::error::{LoaderError, Result};

/// Checks the dimensions any GPU could run; the backend then checks them against its device's limits.
pub fn validate(params: &LaunchParams) -> Result<()> {
    for (what, dims) in [("threads", params.threads), ("blocks", params.blocks)] {
        if let Some(axis) = dims.iter().position(|&n| n == 0) {
            return Err(LoaderError::BadLaunch(format!(
                "{what} in {} is 0; each count must be at least 1",
                axis_name(axis)
            )));
        }
    }
    // Checked products: three `u32::MAX` counts overflow even a `u64`.
    let product = |counts: &[u32]| counts.iter().try_fold(1u64, |total, &n| total.checked_mul(u64::from(n)));
    let [x, y, z] = params.threads;
    if product(&params.threads).is_none_or(|per_block| per_block > u64::from(u32::MAX)) {
        return Err(LoaderError::BadLaunch(format!("{x}x{y}x{z} threads per block is absurd (over 2^32 - 1)")));
    }
    // Keeps `LaunchParams::total_threads` from overflowing: no device runs 2^64 threads.
    if product(&[params.threads, params.blocks].concat()).is_none() {
        let [bx, by, bz] = params.blocks;
        return Err(LoaderError::BadLaunch(format!(
            "{x}x{y}x{z} threads per block in {bx}x{by}x{bz} blocks is absurd: the grid would have more than 2^64 \
             threads"
        )));
    }
    Ok(())
}

/// Checks `params` against a device's limits.
pub fn check_limits(
    params: &LaunchParams,
    max_threads_per_block: u32,
    max_block_dims: [u32; 3],
    max_grid_dims: [u32; 3],
) -> Result<()> {
    let per_block = params.threads.iter().fold(1u64, |total, &n| total.saturating_mul(u64::from(n)));
    if per_block > u64::from(max_threads_per_block) {
        return Err(LoaderError::BadLaunch(format!(
            "{per_block} threads per block exceeds the device's limit of {max_threads_per_block}"
        )));
    }
    for axis in 0..3 {
        if params.threads[axis] > max_block_dims[axis] {
            return Err(LoaderError::BadLaunch(format!(
                "{} threads in {} exceeds the device's limit of {}",
                params.threads[axis],
                axis_name(axis),
                max_block_dims[axis]
            )));
        }
        if params.blocks[axis] > max_grid_dims[axis] {
            return Err(LoaderError::BadLaunch(format!(
                "{} blocks in {} exceeds the device's limit of {}",
                params.blocks[axis],
                axis_name(axis),
                max_grid_dims[axis]
            )));
        }
    }
    Ok(())
}

fn axis_name(axis: usize) -> &'static str {
    ["x", "y", "z"][axis]
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200_LIKE: (u32, [u32; 3], [u32; 3]) = (1024, [1024, 1024, 64], [i32::MAX as u32, 65535, 65535]);

    fn params(threads: [u32; 3], blocks: [u32; 3]) -> LaunchParams {
        LaunchParams { threads, blocks }
    }

    #[test]
    fn zero_counts_are_rejected_by_axis() {
        let error = validate(&params([1, 0, 1], [1, 1, 1])).unwrap_err().to_string();
        assert!(error.contains("threads in y is 0"), "{error}");
        let error = validate(&params([1, 1, 1], [1, 1, 0])).unwrap_err().to_string();
        assert!(error.contains("blocks in z is 0"), "{error}");
        validate(&params([256, 1, 1], [8, 1, 1])).unwrap();
    }

    #[test]
    fn device_limits_are_enforced() {
        let (per_block, block, grid) = H200_LIKE;
        check_limits(&params([1024, 1, 1], [1, 1, 1]), per_block, block, grid).unwrap();
        let error = check_limits(&params([2048, 1, 1], [1, 1, 1]), per_block, block, grid).unwrap_err().to_string();
        assert!(error.contains("2048 threads per block exceeds the device's limit of 1024"), "{error}");
        let error = check_limits(&params([1, 1, 128], [1, 1, 1]), per_block, block, grid).unwrap_err().to_string();
        assert!(error.contains("128 threads in z exceeds"), "{error}");
        let error = check_limits(&params([1, 1, 1], [1, 70000, 1]), per_block, block, grid).unwrap_err().to_string();
        assert!(error.contains("70000 blocks in y exceeds"), "{error}");
        let error = validate(&params([u32::MAX, u32::MAX, 1], [1, 1, 1])).unwrap_err().to_string();
        assert!(error.contains("absurd"), "{error}");
        // Three `u32::MAX` overflow a `u64` product: an error, not an overflow panic.
        let error = validate(&params([u32::MAX; 3], [1, 1, 1])).unwrap_err().to_string();
        assert!(error.contains("4294967295x4294967295x4294967295 threads per block is absurd"), "{error}");
        let error = check_limits(&params([u32::MAX; 3], [1, 1, 1]), per_block, block, grid).unwrap_err().to_string();
        assert!(error.contains("exceeds the device's limit of 1024"), "{error}");
        let error = validate(&params([1024, 1, 1], [u32::MAX, u32::MAX, u32::MAX])).unwrap_err().to_string();
        assert!(error.contains("more than 2^64 threads"), "{error}");
        validate(&params([1024, 1, 1], [u32::MAX, 65535, 1])).unwrap();
    }
}
