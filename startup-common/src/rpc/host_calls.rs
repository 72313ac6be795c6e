//! The host's handlers of host calls of one's own ([`HostCall`], [`UserOpcode`]): the table a program embedding the
//! loader fills and the loader's server consults for every opcode of the users' range.

use core::fmt;
use std::boxed::Box;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use gpu_startup_protocol::region::MAX_LANES;

use super::{HostCall, Pod, ServerPort, UserOpcode};

/// What a handler returns when it fails: any error (`?` converts one, `"text".into()` makes one). The loader then
/// ends the run with a one-line message naming the call and this error.
pub type HostCallError = Box<dyn core::error::Error + Send + Sync>;

/// Serves one message: called with the port open and the message's first packet waiting.
type Handler = dyn FnMut(&mut ServerPort<'_>) -> Result<(), HostCallError> + Send;

/// The handlers of host calls of one's own, by opcode. Cloning shares the handlers (a clone serves with the same
/// state); the loader takes one with its options (`gpu_loader::RunOptions::host_calls`).
///
/// ```
/// use startup_common::rpc::{HostCall, HostCalls};
///
/// const LOOK_UP: HostCall<u32, u64> = HostCall::new(0x1_0000, "look up");
///
/// let table = std::collections::HashMap::from([(1u32, 10u64), (2, 20)]);
/// let mut calls = HostCalls::new();
/// calls.on_call(LOOK_UP, move |key| table.get(&key).copied().ok_or_else(|| format!("no entry for {key}").into()))?;
/// # Ok::<(), startup_common::rpc::AlreadyRegistered>(())
/// ```
#[derive(Clone, Default)]
pub struct HostCalls {
    table: BTreeMap<u32, Registered>,
}

#[derive(Clone)]
struct Registered {
    opcode: UserOpcode,
    handler: HostCallHandler,
}

/// The handler of one host call, shared by every table that holds it (a clone of [`HostCalls`], a server's dispatch
/// table).
#[derive(Clone)]
pub struct HostCallHandler(Arc<Mutex<Handler>>);

impl HostCallHandler {
    /// Serves the message open on `port` (of this handler's opcode).
    pub fn serve(&self, port: &mut ServerPort<'_>) -> Result<(), HostCallError> {
        // A handler that panicked leaves its state as the panic left it, like any `FnMut` that unwinds.
        let mut handler = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        handler(port)
    }
}

/// A second handler for an opcode that has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlreadyRegistered {
    /// The opcode as first registered.
    pub first: UserOpcode,
    /// The opcode as registered again.
    pub again: UserOpcode,
}

impl fmt::Display for AlreadyRegistered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "opcode {:#x} has a handler already: {}, so {} cannot have it",
            self.first.number(),
            self.first,
            self.again
        )
    }
}

impl core::error::Error for AlreadyRegistered {}

impl HostCalls {
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `call` with `handler`: it gets each lane's request, lowest lane first, and returns that lane's reply,
    /// or an error that ends the run. Fails when the opcode has a handler already.
    pub fn on_call<T: Pod, R: Pod>(
        &mut self,
        call: HostCall<T, R>,
        mut handler: impl FnMut(T) -> Result<R, HostCallError> + Send + 'static,
    ) -> Result<&mut Self, AlreadyRegistered> {
        self.on_message(call.opcode(), move |port| {
            let mut requests = [T::zeroed(); MAX_LANES as usize];
            port.recv(|lane, packet| requests[lane as usize] = packet.read_value());
            if port.is_abandoned() {
                // The client stopped before its request was whole: there is nothing to answer.
                return Ok(());
            }
            let mut replies = [R::zeroed(); MAX_LANES as usize];
            for lane in port.lanes() {
                replies[lane as usize] = handler(requests[lane as usize])?;
            }
            port.send(|lane, packet| packet.write_value(&replies[lane as usize]));
            Ok(())
        })
    }

    /// Serves the messages of `opcode` with `handler`, which gets the port itself and mirrors what the device side
    /// does with it: the packets, each lane's values ([`Packet::read_value`](super::Packet::read_value)) and byte
    /// streams ([`ServerPort::recv_n_with`], [`ServerPort::recv_n_vec`], [`ServerPort::send_n`]). Fails when the
    /// opcode has a handler already.
    pub fn on_message(
        &mut self,
        opcode: UserOpcode,
        handler: impl FnMut(&mut ServerPort<'_>) -> Result<(), HostCallError> + Send + 'static,
    ) -> Result<&mut Self, AlreadyRegistered> {
        self.insert(Registered { opcode, handler: HostCallHandler(Arc::new(Mutex::new(handler))) })
    }

    /// Adds every handler of `other` (sharing them, as a clone does). Fails, adding none, when an opcode of `other`
    /// has a handler here already.
    pub fn extend(&mut self, other: &HostCalls) -> Result<&mut Self, AlreadyRegistered> {
        if let Some(clash) = other.table.values().find_map(|entry| self.clash(entry.opcode)) {
            return Err(clash);
        }
        self.table.extend(other.table.iter().map(|(&number, entry)| (number, entry.clone())));
        Ok(self)
    }

    fn clash(&self, opcode: UserOpcode) -> Option<AlreadyRegistered> {
        self.table.get(&opcode.number()).map(|first| AlreadyRegistered { first: first.opcode, again: opcode })
    }

    fn insert(&mut self, entry: Registered) -> Result<&mut Self, AlreadyRegistered> {
        if let Some(clash) = self.clash(entry.opcode) {
            return Err(clash);
        }
        self.table.insert(entry.opcode.number(), entry);
        Ok(self)
    }

    /// The registered opcode numbered `number`, if any.
    pub fn opcode(&self, number: u32) -> Option<UserOpcode> {
        self.table.get(&number).map(|entry| entry.opcode)
    }

    /// The registered opcodes, lowest first.
    pub fn opcodes(&self) -> impl Iterator<Item = UserOpcode> + '_ {
        self.table.values().map(|entry| entry.opcode)
    }

    /// Each registered opcode with its handler, lowest first: what a server's dispatch table takes in.
    pub fn handlers(&self) -> impl Iterator<Item = (UserOpcode, HostCallHandler)> + '_ {
        self.table.values().map(|entry| (entry.opcode, entry.handler.clone()))
    }

    /// Serves the message open on `port` with the handler of its opcode: `None` when no handler is registered for
    /// it (the port is left as it is), else what the handler returned.
    pub fn serve(&self, port: &mut ServerPort<'_>) -> Option<Result<(), HostCallError>> {
        Some(self.table.get(&port.opcode())?.handler.serve(port))
    }
}

impl fmt::Debug for HostCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.opcodes().map(|opcode| std::format!("{opcode}"))).finish()
    }
}

/// Host calls served in one thread: the client sends, the table serves, the client receives; every wait is already
/// satisfied when it comes, so this runs quickly under Miri.
#[cfg(all(test, not(loom)))]
mod tests {
    use std::string::ToString;
    use std::vec::Vec;

    use super::super::{Client, HostRegion, Layout, Server, opcode};
    use super::*;
    use crate::gpu::HostThread;

    /// A `#[repr(C)]` struct with padding-free fields of every size, up to a whole packet.
    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
    #[repr(C)]
    struct Reading {
        sensor: u32,
        celsius: f32,
        when: u64,
        history: [u16; 24],
    }

    const RECORD: HostCall<Reading, [u8; 3]> = HostCall::new(0x1_0000, "record");
    const EMPTY: HostCall<(), ()> = HostCall::new(0x1_0001, "empty");
    const SUM: HostCall<[u32; 16], u64> = HostCall::new(0x1_0002, "sum");
    const UNREGISTERED: HostCall<u8, u8> = HostCall::new(0x1_0003, "unregistered");

    struct Channel {
        region: HostRegion,
        client: Client<HostThread>,
    }

    impl Channel {
        fn new() -> Self {
            let region = HostRegion::new(Layout::new(2, 1));
            let client = Client::new();
            // SAFETY: a fresh zeroed region laid out for 2 ports of one lane, which lives as long as the client.
            unsafe { client.reset(region.as_ptr(), 2) };
            Self { region, client }
        }

        fn server(&self) -> Server {
            // SAFETY: the region outlives the server in every test, and each test has one server.
            unsafe { Server::new(self.region.as_ptr(), 2, 1) }
        }

        /// Sends `request` for `call`, lets `calls` serve it and returns the reply, or the handler's outcome when it
        /// sent none.
        fn call<T: Pod, R: Pod>(
            &self,
            calls: &HostCalls,
            call: HostCall<T, R>,
            request: T,
        ) -> Result<R, std::string::String> {
            let mut server = self.server();
            let mut port = self.client.open(call.opcode().number());
            port.send_value(&request);
            let mut sport = server.open(port.index()).expect("a message waits");
            let served = calls.serve(&mut sport).ok_or("no handler")?;
            drop(sport);
            served.map_err(|error| error.to_string())?;
            Ok(port.recv_value())
        }
    }

    #[test]
    fn typed_values_travel_whole() {
        let channel = Channel::new();
        let mut calls = HostCalls::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        calls
            .on_call(RECORD, move |reading| {
                recorded.lock().unwrap().push(reading);
                Ok([reading.sensor as u8, reading.history[23] as u8, 7])
            })
            .and_then(|calls| calls.on_call(EMPTY, |()| Ok(())))
            .and_then(|calls| calls.on_call(SUM, |numbers| Ok(numbers.iter().map(|&n| u64::from(n)).sum())))
            .unwrap();
        let reading = Reading {
            sensor: 3,
            celsius: -4.5,
            when: u64::MAX - 1,
            history: core::array::from_fn(|i| i as u16 * 1000),
        };
        assert_eq!(size_of::<Reading>(), 64, "a whole packet");
        assert_eq!(channel.call(&calls, RECORD, reading), Ok([3, (23_000u16 & 0xff) as u8, 7]));
        assert_eq!(*seen.lock().unwrap(), [reading]);
        assert_eq!(channel.call(&calls, EMPTY, ()), Ok(()));
        assert_eq!(
            channel.call(&calls, SUM, core::array::from_fn(|i| u32::MAX - i as u32)),
            Ok(16 * u64::from(u32::MAX) - 120)
        );
    }

    #[test]
    fn a_message_without_a_handler_is_left_to_the_caller() {
        let channel = Channel::new();
        assert_eq!(channel.call(&HostCalls::new(), UNREGISTERED, 1), Err("no handler".into()));
    }

    #[test]
    fn a_handlers_error_comes_back_whole() {
        let channel = Channel::new();
        let mut calls = HostCalls::new();
        calls
            .on_call(SUM, |numbers| if numbers[0] == 0 { Err("the first number is 0".into()) } else { Ok(1) })
            .unwrap();
        assert_eq!(channel.call(&calls, SUM, [0; 16]), Err("the first number is 0".into()));
    }

    #[test]
    fn an_opcode_takes_one_handler() {
        let mut calls = HostCalls::new();
        calls.on_call(EMPTY, |()| Ok(())).unwrap();
        let same_number = UserOpcode::new(EMPTY.opcode().number(), "another");
        let clash = calls.on_message(same_number, |_| Ok(())).map(|_| ()).unwrap_err();
        assert_eq!(clash, AlreadyRegistered { first: EMPTY.opcode(), again: same_number });
        assert_eq!(
            clash.to_string(),
            "opcode 0x10001 has a handler already: `empty` (opcode 0x10001), so `another` (opcode 0x10001) cannot have it"
        );
        let mut more = HostCalls::new();
        more.on_call(SUM, |_| Ok(0)).and_then(|more| more.on_call(EMPTY, |()| Ok(()))).unwrap();
        assert!(calls.extend(&more).is_err());
        assert_eq!(calls.opcodes().collect::<Vec<_>>(), [EMPTY.opcode()], "a failed extend adds nothing");
        let mut other = HostCalls::new();
        other.on_call(SUM, |_| Ok(0)).unwrap();
        calls.extend(&other).unwrap();
        assert_eq!(calls.opcodes().collect::<Vec<_>>(), [EMPTY.opcode(), SUM.opcode()]);
        assert_eq!(calls.opcode(SUM.opcode().number()), Some(SUM.opcode()));
        assert_eq!(calls.opcode(opcode::WRITE), None);
        assert_eq!(std::format!("{calls:?}"), "{\"`empty` (opcode 0x10001)\", \"`sum` (opcode 0x10002)\"}");
    }

    /// A request given up before it is whole (its client stopped) reaches no handler.
    #[test]
    fn an_abandoned_request_is_not_answered() {
        let channel = Channel::new();
        let mut server = channel.server();
        let mut calls = HostCalls::new();
        calls.on_call(SUM, |_| panic!("the handler ran")).unwrap();
        // The client opens the port but never sends: a scribbled outbox hands it to the server with nothing in it,
        // and its watcher says the client is gone as soon as the server waits.
        let port = channel.client.open(SUM.opcode().number());
        let layout = channel.region.layout();
        super::super::Scribble {
            port: port.index(),
            opcode: SUM.opcode().number().into(),
            mask: 1,
            packet: &[],
            client_word: 1,
        }
        .write(&layout, |index, value| {
            // SAFETY: a word of the live region, which only atomic accesses touch.
            unsafe { &*channel.region.as_ptr().cast::<crate::sync::AtomicU64>().add(index) }
                .store(value, core::sync::atomic::Ordering::Release)
        });
        let mut sport = server.open(port.index()).expect("handed over");
        // The first receive finds the packet there; make the server wait for a second one by receiving twice.
        sport.recv(|_, _| {});
        let mut gone = |_| true;
        let mut sport = sport.watched(&mut gone);
        assert_eq!(calls.serve(&mut sport).map(|served| served.is_ok()), Some(true));
        assert!(sport.is_abandoned());
        core::mem::forget(port);
    }
}
