//! What the runtime reports from its own threads: a GPU memory fault (a system event, which the runtime would
//! otherwise print before aborting the process) and a queue error (a trap such as `s_trap 2`, an illegal
//! instruction, a bad packet). The two callbacks record the first of each; the backend reads them
//! ([`reported`]) when it polls, while it waits for a queue slot, and before it tears anything down.

use std::ffi::c_void;
use std::sync::Mutex;

use super::runtime::Runtime;
use super::sys;

/// The first fault of each kind since the last [`reset`].
struct Faults {
    memory: Option<String>,
    queue: Option<String>,
}

static FAULTS: Mutex<Faults> = Mutex::new(Faults { memory: None, queue: None });

/// Forgets earlier faults: a backend that loads starts with none.
pub fn reset() {
    if let Ok(mut faults) = FAULTS.lock() {
        *faults = Faults { memory: None, queue: None };
    }
}

/// The fault that ends the run, if any: a memory fault first, as the queue error it causes says less.
pub fn reported() -> Option<String> {
    let faults = FAULTS.lock().ok()?;
    faults.memory.clone().or_else(|| faults.queue.clone())
}

/// The reasons of a memory fault, from `hsa_amd_gpu_memory_fault_info_t::fault_reason_mask`.
fn fault_reasons(mask: u32) -> String {
    const REASONS: [(sys::hsa_amd_memory_fault_reason_t, &str); 8] = [
        (sys::HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT, "page not present or supervisor privilege"),
        (sys::HSA_AMD_MEMORY_FAULT_READ_ONLY, "write to a read-only page"),
        (sys::HSA_AMD_MEMORY_FAULT_NX, "execute on a no-execute page"),
        (sys::HSA_AMD_MEMORY_FAULT_HOST_ONLY, "host-only page"),
        (sys::HSA_AMD_MEMORY_FAULT_DRAMECC, "DRAM ECC error"),
        (sys::HSA_AMD_MEMORY_FAULT_IMPRECISE, "address may be imprecise"),
        (sys::HSA_AMD_MEMORY_FAULT_SRAMECC, "SRAM ECC error"),
        (sys::HSA_AMD_MEMORY_FAULT_HANG, "GPU hang"),
    ];
    let reasons: Vec<&str> =
        REASONS.iter().filter(|(bit, _)| mask & (*bit as u32) != 0).map(|(_, reason)| *reason).collect();
    if reasons.is_empty() { "unknown reason".into() } else { reasons.join(", ") }
}

/// The system event handler: records a GPU memory fault and tells the runtime it was handled (otherwise the runtime
/// prints it and aborts the process). Other events keep the runtime's handling.
///
/// # Safety
/// `event` is null or a valid event for the duration of the call (as the runtime passes it).
pub unsafe extern "C" fn on_system_event(event: *const sys::hsa_amd_event_t, _data: *mut c_void) -> sys::hsa_status_t {
    if event.is_null() {
        return sys::HSA_STATUS_ERROR;
    }
    // SAFETY: the runtime passes a valid event for the duration of the call.
    let event = unsafe { &*event };
    if event.event_type != sys::HSA_AMD_GPU_MEMORY_FAULT_EVENT {
        return sys::HSA_STATUS_ERROR;
    }
    // SAFETY: for a memory fault event the union holds `memory_fault`.
    let fault = unsafe { event.__bindgen_anon_1.memory_fault };
    let message = format!(
        "GPU memory access fault at address {:#x} ({})",
        fault.virtual_address,
        fault_reasons(fault.fault_reason_mask)
    );
    if let Ok(mut faults) = FAULTS.lock() {
        faults.memory.get_or_insert(message);
    }
    sys::HSA_STATUS_SUCCESS
}

/// The queue's error callback: records the status.
///
/// # Safety
/// `data` is a `&'static Runtime` (the queue is created with the process's runtime).
pub unsafe extern "C" fn on_queue_error(status: sys::hsa_status_t, _queue: *mut sys::hsa_queue_t, data: *mut c_void) {
    // SAFETY: `data` is the runtime, which lives for the whole process (`runtime::runtime`).
    let runtime = unsafe { &*data.cast::<Runtime>() };
    let message = format!("the HSA queue reported {}", runtime.describe(status));
    if let Ok(mut faults) = FAULTS.lock() {
        faults.queue.get_or_insert(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_reasons_are_spelled_out() {
        assert_eq!(
            fault_reasons(sys::HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT as u32),
            "page not present or supervisor privilege"
        );
        let both = (sys::HSA_AMD_MEMORY_FAULT_READ_ONLY | sys::HSA_AMD_MEMORY_FAULT_IMPRECISE) as u32;
        assert_eq!(fault_reasons(both), "write to a read-only page, address may be imprecise");
        assert_eq!(fault_reasons(sys::HSA_AMD_MEMORY_FAULT_HANG as u32), "GPU hang");
        assert_eq!(fault_reasons(0), "unknown reason");
    }

    /// A memory fault reaches the backend through the handler, the runtime is told it was handled, and the first
    /// fault is the one reported; other events are left to the runtime.
    #[test]
    fn the_system_event_handler_records_the_first_memory_fault() {
        reset();
        let fault_at = |virtual_address| {
            let mut event =
                sys::hsa_amd_event_t { event_type: sys::HSA_AMD_GPU_MEMORY_FAULT_EVENT, ..Default::default() };
            event.__bindgen_anon_1.memory_fault = sys::hsa_amd_gpu_memory_fault_info_t {
                virtual_address,
                fault_reason_mask: sys::HSA_AMD_MEMORY_FAULT_READ_ONLY as u32,
                ..Default::default()
            };
            event
        };
        // SAFETY: a valid event, alive for the call.
        assert_eq!(unsafe { on_system_event(&fault_at(0x1000), std::ptr::null_mut()) }, sys::HSA_STATUS_SUCCESS);
        // SAFETY: as above.
        assert_eq!(unsafe { on_system_event(&fault_at(0x2000), std::ptr::null_mut()) }, sys::HSA_STATUS_SUCCESS);
        let other = sys::hsa_amd_event_t { event_type: sys::HSA_AMD_GPU_MEMORY_FAULT_EVENT + 1, ..Default::default() };
        // SAFETY: as above.
        assert_eq!(unsafe { on_system_event(&other, std::ptr::null_mut()) }, sys::HSA_STATUS_ERROR);
        let expected = "GPU memory access fault at address 0x1000 (write to a read-only page)";
        assert_eq!(reported().as_deref(), Some(expected));
        // SAFETY: a null event is refused before it is read.
        assert_eq!(unsafe { on_system_event(std::ptr::null(), std::ptr::null_mut()) }, sys::HSA_STATUS_ERROR);
        reset();
        assert_eq!(reported(), None);
    }
}
