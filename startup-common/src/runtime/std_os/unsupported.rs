//! `std_os_unsupported!`: the functions of Hermit's ABI that std calls for what a GPU program cannot have (sockets,
//! a duplicated descriptor, polling): each is defined, so that an image using them still loads, and each fails as
//! a system without them would, with `ENOSYS`, which std reports as `io::ErrorKind::Unsupported` ("Function not
//! implemented", OS error 38). Their prototypes are hermit-abi's, exactly: PTX calls a function only with its own.

/// The failing definitions, for `std_os_runtime!`.
#[doc(hidden)]
#[macro_export]
macro_rules! std_os_unsupported {
    () => {
        $crate::std_os_unsupported! {
            sys_socket(domain: i32, kind: i32, protocol: i32) -> i32;
            sys_connect(socket: i32, name: *const u8, length: u32) -> i32;
            sys_bind(socket: i32, name: *const u8, length: u32) -> i32;
            sys_listen(socket: i32, backlog: i32) -> i32;
            sys_accept(socket: i32, address: *mut u8, length: *mut u32) -> i32;
            sys_shutdown(socket: i32, how: i32) -> i32;
            sys_shutdown_socket(socket: i32, how: i32) -> i32;
            sys_getpeername(socket: i32, name: *mut u8, length: *mut u32) -> i32;
            sys_getsockname(socket: i32, name: *mut u8, length: *mut u32) -> i32;
            sys_getsockopt(socket: i32, level: i32, option: i32, value: *mut u8, length: *mut u32) -> i32;
            sys_setsockopt(socket: i32, level: i32, option: i32, value: *const u8, length: u32) -> i32;
            sys_send(socket: i32, bytes: *const u8, length: usize, flags: i32) -> isize;
            sys_sendto(socket: i32, bytes: *const u8, length: usize, flags: i32, to: *const u8, to_length: u32)
                -> isize;
            sys_recv(socket: i32, bytes: *mut u8, length: usize, flags: i32) -> isize;
            sys_recvfrom(socket: i32, bytes: *mut u8, length: usize, flags: i32, from: *mut u8, from_length: *mut u32)
                -> isize;
            sys_getaddrinfo(node: *const u8, service: *const u8, hints: *const u8, result: *mut *mut u8) -> i32;
            sys_getaddrbyname(name: *const u8, address: *mut u8, length: usize) -> i32;
            sys_poll(descriptors: *mut u8, count: usize, timeout: i32) -> i32;
            sys_ioctl(descriptor: i32, command: i32, argument: *mut u8) -> i32;
            sys_fcntl(descriptor: i32, command: i32, argument: i32) -> i32;
            sys_eventfd(initial: u64, flags: i16) -> i32;
            sys_dup(descriptor: i32) -> i32;
        }

        /// Hermit's `sys_freeaddrinfo`: `sys_getaddrinfo` never gives a list, so there is none to free.
        #[unsafe(no_mangle)]
        pub extern "C" fn sys_freeaddrinfo(_list: *mut u8) {}
    };
    ($($name:ident($($parameter:ident: $type:ty),*) -> $result:ty;)*) => {
        $(
            #[doc = concat!("Hermit's `", stringify!($name), "`: no such service on a GPU, so `-ENOSYS`.")]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name($($parameter: $type),*) -> $result {
                $(let _ = $parameter;)*
                -(<$result>::from($crate::libc::errno::ENOSYS as i16))
            }
        )*
    };
}
