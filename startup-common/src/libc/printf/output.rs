//! Where formatted text goes: an [`Output`], behind a [`Sink`] that counts it, bounds it and pads fields.

use super::spec::Spec;
use super::{Error, MAX_OUTPUT};

/// The destination of [`super::format`].
pub trait Output {
    /// Appends `bytes`.
    fn write(&mut self, bytes: &[u8]);

    /// Appends `count` copies of `byte` (padding). A destination that drops what does not fit overrides this to do
    /// no work for what it drops, so a huge width costs nothing there.
    fn repeat(&mut self, byte: u8, mut count: usize) {
        let block = [byte; 32];
        while count > 0 {
            let n = count.min(block.len());
            self.write(&block[..n]);
            count -= n;
        }
    }
}

/// C's `snprintf` destination: keeps the first `capacity - 1` bytes and a NUL after them, and drops the rest
/// (which still counts: `snprintf` returns the length the whole text would have had).
pub struct BufferOutput<'a> {
    buffer: &'a mut [u8],
    len: usize,
}

impl<'a> BufferOutput<'a> {
    /// Writes into `buffer`, whose last byte is kept for the NUL; an empty buffer receives nothing.
    pub fn new(buffer: &'a mut [u8]) -> Self {
        Self { buffer, len: 0 }
    }

    /// Writes the NUL after the text kept; returns the text's length.
    pub fn finish(self) -> usize {
        if let Some(end) = self.buffer.get_mut(self.len) {
            *end = 0;
        }
        self.len
    }

    fn room(&self) -> usize {
        self.buffer.len().saturating_sub(1) - self.len
    }
}

impl Output for BufferOutput<'_> {
    fn write(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.room());
        self.buffer[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn repeat(&mut self, byte: u8, count: usize) {
        let n = count.min(self.room());
        self.buffer[self.len..self.len + n].fill(byte);
        self.len += n;
    }
}

/// A part of a field: bytes, or a run of `'0'`s (precision padding, digits past a float's exact expansion).
#[derive(Clone, Copy, Debug)]
pub enum Piece<'a> {
    Bytes(&'a [u8]),
    Zeros(usize),
}

impl Piece<'_> {
    fn len(&self) -> usize {
        match *self {
            Piece::Bytes(bytes) => bytes.len(),
            Piece::Zeros(count) => count,
        }
    }
}

/// How a field is padded to its width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Spaces on the left (or on the right with `-`).
    Spaces,
    /// Zeros between the prefix and the rest when the spec says `0` (and not `-`); numbers only.
    ZerosAllowed,
}

/// An [`Output`] with the count of bytes so far, refusing to go past [`MAX_OUTPUT`]. The output is a trait object:
/// one copy of the engine serves every destination (on the GPU each copy would be a large function to compile).
pub struct Sink<'a> {
    output: &'a mut dyn Output,
    count: usize,
}

impl<'a> Sink<'a> {
    pub fn new(output: &'a mut dyn Output) -> Self {
        Self { output, count: 0 }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Counts `n` more bytes, or fails if the total would pass [`MAX_OUTPUT`] (before anything is written, so the
    /// work stays bounded).
    fn reserve(&mut self, n: usize) -> Result<(), Error> {
        match self.count.checked_add(n) {
            Some(count) if count <= MAX_OUTPUT => {
                self.count = count;
                Ok(())
            }
            _ => Err(Error::Overflow),
        }
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.reserve(bytes.len())?;
        self.output.write(bytes);
        Ok(())
    }

    pub fn repeat(&mut self, byte: u8, count: usize) -> Result<(), Error> {
        self.reserve(count)?;
        self.output.repeat(byte, count);
        Ok(())
    }

    /// Writes a field: `prefix` (sign, `0x`) and `pieces`, padded to the spec's width as `padding` allows.
    pub fn field(&mut self, spec: &Spec, prefix: &[u8], pieces: &[Piece<'_>], padding: Padding) -> Result<(), Error> {
        let len = prefix.len() + pieces.iter().map(Piece::len).sum::<usize>();
        let pad = spec.width.saturating_sub(len);
        let zeros = padding == Padding::ZerosAllowed && spec.flags.zero && !spec.flags.left;
        if !spec.flags.left && !zeros {
            self.repeat(b' ', pad)?;
        }
        self.write(prefix)?;
        if zeros {
            self.repeat(b'0', pad)?;
        }
        for piece in pieces {
            match *piece {
                Piece::Bytes(bytes) => self.write(bytes)?,
                Piece::Zeros(count) => self.repeat(b'0', count)?,
            }
        }
        if spec.flags.left {
            self.repeat(b' ', pad)?;
        }
        Ok(())
    }
}
