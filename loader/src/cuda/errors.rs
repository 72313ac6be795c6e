//! The driver's errors as the loader reports them.

use cudarc::driver::result::DriverError;

use crate::error::LoaderError;

/// `api failed: CUDA_ERROR_...: description`.
pub(super) fn driver_error(api: &'static str) -> impl FnOnce(DriverError) -> LoaderError {
    move |error| LoaderError::Driver { api, message: describe(error) }
}

/// The driver's name and text for `error`.
pub(super) fn describe(error: DriverError) -> String {
    let name =
        error.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", error.0));
    match error.error_string() {
        Ok(text) => format!("{name} ({})", text.to_string_lossy()),
        Err(_) => name,
    }
}
