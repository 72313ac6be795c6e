//! Spreading one binary's tests over the GPUs: one slot per GPU, each holding at most one worker (one context with
//! the module loaded) that runs one test at a time. A test takes a free slot, starting the slot's worker if it has
//! none (the first test on that GPU, or the first after a worker ended), and gives the slot back when its test ended;
//! a worker that ended (after a fault, a timeout, a lost process) is dropped, and the next test on that GPU starts a
//! new one. libtest-mimic runs as many tests at once as there are slots, so a test never waits for long.

use std::sync::{Condvar, Mutex, MutexGuard};

use super::protocol::{RunRequest, RunResult};

/// One GPU's worker, as the pool sees it.
pub trait Worker: Send {
    /// Runs one test, passing its output to `output` (`true` for stderr) as it arrives. An error means the worker is
    /// lost (its process died, or stopped answering); the pool then drops it.
    fn run(&mut self, request: &RunRequest, output: &mut dyn FnMut(bool, &[u8])) -> Result<RunResult, String>;
}

/// Starts a worker on a GPU (by ordinal), or says why it cannot.
pub type Spawn<W> = Box<dyn Fn(usize) -> Result<W, String> + Send + Sync>;

struct Slot<W> {
    device: usize,
    worker: Option<W>,
    busy: bool,
}

/// The GPUs' slots.
pub struct Pool<W: Worker> {
    slots: Mutex<Vec<Slot<W>>>,
    freed: Condvar,
    spawn: Spawn<W>,
}

impl<W: Worker> Pool<W> {
    /// A slot for each of `devices`; `started` is a worker already running on one of them.
    pub fn new(devices: &[usize], started: Option<(usize, W)>, spawn: Spawn<W>) -> Self {
        let mut slots: Vec<Slot<W>> =
            devices.iter().map(|&device| Slot { device, worker: None, busy: false }).collect();
        if let Some((device, worker)) = started
            && let Some(slot) = slots.iter_mut().find(|slot| slot.device == device)
        {
            slot.worker = Some(worker);
        }
        Self { slots: Mutex::new(slots), freed: Condvar::new(), spawn }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Slot<W>>> {
        // A panic while holding the lock (none is expected: nothing in here panics) leaves the slots consistent:
        // each change is one assignment.
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `request` on the first free GPU, preferring one whose worker is running; returns the GPU's ordinal and
    /// the result (an error: no worker could start, or the worker was lost).
    pub fn run(&self, request: &RunRequest, output: &mut dyn FnMut(bool, &[u8])) -> (usize, Result<RunResult, String>) {
        let (index, device, worker) = {
            let mut slots = self.lock();
            loop {
                let free = |slot: &&mut Slot<W>| !slot.busy;
                let chosen = slots
                    .iter_mut()
                    .enumerate()
                    .filter(|(_, slot)| free(slot))
                    .min_by_key(|(_, slot)| slot.worker.is_none());
                if let Some((index, slot)) = chosen {
                    slot.busy = true;
                    break (index, slot.device, slot.worker.take());
                }
                slots = self.freed.wait(slots).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        };
        let mut worker = match worker {
            Some(worker) => worker,
            None => match (self.spawn)(device) {
                Ok(worker) => worker,
                Err(error) => {
                    self.release(index, None);
                    return (device, Err(format!("cannot start a test worker on GPU {device}: {error}")));
                }
            },
        };
        let result = worker.run(request, output);
        let keep = matches!(&result, Ok(result) if !result.worker_ends);
        self.release(index, keep.then_some(worker));
        (device, result)
    }

    fn release(&self, index: usize, worker: Option<W>) {
        let mut slots = self.lock();
        slots[index].worker = worker;
        slots[index].busy = false;
        drop(slots);
        self.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::super::protocol::Ending;
    use super::*;

    /// What the stand-in workers did, shared by all of them.
    #[derive(Default)]
    struct Log {
        /// (device, worker number, test) for every run, in order.
        runs: Mutex<Vec<(usize, usize, String)>>,
        spawned: AtomicUsize,
        /// Tests running now, per device, and the most at once anywhere.
        running: Mutex<BTreeMap<usize, usize>>,
        most_at_once: AtomicUsize,
    }

    /// A worker without a GPU: a test named `crash...` loses the worker, `fault...` ends it the way a device fault
    /// does, every other test passes after a short sleep (so that tests overlap).
    struct StandIn {
        device: usize,
        number: usize,
        log: Arc<Log>,
    }

    impl Worker for StandIn {
        fn run(&mut self, request: &RunRequest, output: &mut dyn FnMut(bool, &[u8])) -> Result<RunResult, String> {
            {
                let mut running = self.log.running.lock().unwrap();
                let on_device = running.entry(self.device).or_default();
                *on_device += 1;
                assert_eq!(*on_device, 1, "two tests at once on GPU {}", self.device);
                let total = running.values().sum();
                self.log.most_at_once.fetch_max(total, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_millis(5));
            output(false, request.entry_symbol.as_bytes());
            self.log.runs.lock().unwrap().push((self.device, self.number, request.entry_symbol.clone()));
            *self.log.running.lock().unwrap().get_mut(&self.device).unwrap() -= 1;
            if request.entry_symbol.starts_with("crash") {
                return Err("the worker process died".into());
            }
            let fault = request.entry_symbol.starts_with("fault");
            Ok(RunResult {
                ending: if fault { Ending::Fault("stand-in fault".into()) } else { Ending::Exited(0) },
                panicked_threads: 0,
                finished: !fault,
                worker_ends: fault,
                constructors_ran: true,
                messages_given_up: 0,
                panic_message: None,
            })
        }
    }

    /// Starts stand-ins, numbered in order, except on `failing_device`.
    fn spawner(log: &Arc<Log>, failing_device: Option<usize>) -> Spawn<StandIn> {
        let log = Arc::clone(log);
        Box::new(move |device| {
            if Some(device) == failing_device {
                return Err("no such GPU".into());
            }
            let number = log.spawned.fetch_add(1, Ordering::SeqCst);
            Ok(StandIn { device, number, log: Arc::clone(&log) })
        })
    }

    fn pool(devices: &[usize], log: &Arc<Log>, failing_device: Option<usize>) -> Arc<Pool<StandIn>> {
        Arc::new(Pool::new(devices, None, spawner(log, failing_device)))
    }

    fn request(name: &str) -> RunRequest {
        RunRequest { entry_symbol: name.into(), threads: [1; 3], blocks: [1; 3], timeout: Duration::from_secs(1) }
    }

    /// Runs `tests` from `threads` threads at once, as libtest-mimic does; returns each test's device and result.
    fn run_all(pool: &Arc<Pool<StandIn>>, tests: &[String], threads: usize) -> Vec<(usize, Result<RunResult, String>)> {
        let next = AtomicUsize::new(0);
        let results = Mutex::new(vec![None; tests.len()]);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    loop {
                        let index = next.fetch_add(1, Ordering::SeqCst);
                        let Some(test) = tests.get(index) else { break };
                        let mut seen = Vec::new();
                        let result = pool.run(&request(test), &mut |_, bytes| seen.extend_from_slice(bytes));
                        if result.1.is_ok() {
                            assert_eq!(seen, test.as_bytes(), "the output reaches the test that made it");
                        }
                        results.lock().unwrap()[index] = Some(result);
                    }
                });
            }
        });
        results.into_inner().unwrap().into_iter().map(Option::unwrap).collect()
    }

    #[test]
    fn tests_spread_over_every_gpu_one_at_a_time_per_gpu() {
        let log = Arc::new(Log::default());
        let pool = pool(&[0, 1, 2], &log, None);
        let tests: Vec<String> = (0..60).map(|i| format!("test{i}")).collect();
        let results = run_all(&pool, &tests, 3);
        assert!(results.iter().all(|(_, result)| result.is_ok()));
        let runs = log.runs.lock().unwrap();
        assert_eq!(runs.len(), 60, "every test ran once");
        for device in 0..3 {
            assert!(runs.iter().any(|run| run.0 == device), "GPU {device} ran no test");
        }
        assert_eq!(log.spawned.load(Ordering::SeqCst), 3, "one worker per GPU, kept between tests");
        assert_eq!(log.most_at_once.load(Ordering::SeqCst), 3, "three GPUs, three tests at once");
    }

    #[test]
    fn a_lost_worker_fails_its_test_alone_and_is_replaced() {
        let log = Arc::new(Log::default());
        let pool = pool(&[0, 1], &log, None);
        let tests: Vec<String> = ["a", "crash1", "b", "fault1", "c", "crash2", "d", "e"].map(String::from).to_vec();
        let results = run_all(&pool, &tests, 2);
        for ((_, result), test) in results.iter().zip(&tests) {
            match test.as_str() {
                "crash1" | "crash2" => assert_eq!(result.as_ref().unwrap_err(), "the worker process died"),
                "fault1" => assert_eq!(result.as_ref().unwrap().ending, Ending::Fault("stand-in fault".into())),
                _ => assert_eq!(result.as_ref().unwrap().ending, Ending::Exited(0), "{test}"),
            }
        }
        assert_eq!(log.runs.lock().unwrap().len(), 8, "every test ran once");
        // Two workers at the start, then one for each of the three that ended (if a test still came after it).
        let spawned = log.spawned.load(Ordering::SeqCst);
        assert!((3..=5).contains(&spawned), "{spawned} workers");
        // No test ran on a worker after that worker ended.
        let runs = log.runs.lock().unwrap();
        for (at, (_, worker, test)) in runs.iter().enumerate() {
            if test.starts_with("crash") || test.starts_with("fault") {
                assert!(runs[at + 1..].iter().all(|(_, later, _)| later != worker), "worker {worker} reused");
            }
        }
    }

    #[test]
    fn a_pinned_gpu_runs_everything_in_order() {
        let log = Arc::new(Log::default());
        let pool = pool(&[3], &log, None);
        let tests: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
        run_all(&pool, &tests, 1);
        let runs = log.runs.lock().unwrap();
        assert!(runs.iter().all(|(device, worker, _)| (*device, *worker) == (3, 0)));
        assert_eq!(runs.iter().map(|run| run.2.clone()).collect::<Vec<_>>(), tests);
    }

    #[test]
    fn a_gpu_whose_worker_cannot_start_fails_its_tests_and_the_others_go_on() {
        let log = Arc::new(Log::default());
        let pool = pool(&[0, 1], &log, Some(1));
        let tests: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        let results = run_all(&pool, &tests, 2);
        let failed: Vec<_> = results.iter().filter(|(_, result)| result.is_err()).collect();
        assert!(failed.iter().all(|(device, result)| *device == 1
            && result.as_ref().unwrap_err() == "cannot start a test worker on GPU 1: no such GPU"));
        assert_eq!(log.runs.lock().unwrap().len() + failed.len(), 20);
        assert!(log.runs.lock().unwrap().iter().all(|run| run.0 == 0));
    }

    #[test]
    fn a_started_worker_is_used_first() {
        let log = Arc::new(Log::default());
        let started = StandIn { device: 1, number: 99, log: Arc::clone(&log) };
        let pool = Pool::new(&[0, 1], Some((1, started)), spawner(&log, None));
        let (device, result) = pool.run(&request("first"), &mut |_, _| {});
        assert_eq!((device, result.is_ok()), (1, true));
        assert_eq!(log.spawned.load(Ordering::SeqCst), 0, "no other worker was started");
    }
}
