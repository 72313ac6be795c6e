//! Owned stream reception on the host: each lane's whole byte stream as a vector, for the server's handlers that
//! take a stream whole (the test operations' echo).

use std::vec::Vec;

use super::ServerPort;

/// One lane's whole stream, from [`ServerPort::recv_n_vec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received<const H: usize> {
    pub lane: u32,
    pub head: [u64; H],
    pub data: Vec<u8>,
}

/// A lane announced a stream longer than [`ServerPort::recv_n_vec`] was told to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTooLong {
    pub lane: u32,
    /// The length the lane announced.
    pub len: u64,
    /// The most bytes per lane the receiver holds.
    pub limit: u64,
}

impl core::fmt::Display for StreamTooLong {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "lane {} announced a stream of {} bytes, over the limit of {} a lane",
            self.lane, self.len, self.limit
        )
    }
}

impl core::error::Error for StreamTooLong {}

impl ServerPort<'_> {
    /// Receives a stream sent by `send_n_with::<H>` whole: one entry per lane, lowest lane first. A lane that announces
    /// more than `limit` bytes is refused at its first packet, before anything is held for it, and the message
    /// [abandoned](ServerPort::abandon): the client's lengths are untrusted.
    pub fn recv_n_vec<const H: usize>(&mut self, limit: u64) -> Result<Vec<Received<H>>, StreamTooLong> {
        let mut received: Vec<Received<H>> = Vec::new();
        self.recv_n_with::<H, _>(|piece| {
            if piece.offset == 0 {
                if piece.total > limit {
                    return Err(StreamTooLong { lane: piece.lane, len: piece.total, limit });
                }
                let mut data = Vec::new();
                data.extend_from_slice(piece.bytes);
                received.push(Received { lane: piece.lane, head: *piece.head, data });
            } else if let Some(entry) = received.iter_mut().find(|entry| entry.lane == piece.lane) {
                entry.data.extend_from_slice(piece.bytes);
            }
            Ok(())
        })?;
        Ok(received)
    }
}
