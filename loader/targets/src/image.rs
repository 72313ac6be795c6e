//! The kinds of image a target produces, and how the loader tells them apart: by their bytes (an ELF file's machine),
//! never their name.

use crate::{AMDGPU, NVPTX, Target};

/// What an image holds, decided from its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// PTX assembly text (NVIDIA; the driver compiles it for the GPU at load time).
    Ptx,
    /// An ELF `EM_CUDA` cubin (NVIDIA).
    Cubin,
    /// An ELF `EM_AMDGPU` code object (AMD).
    AmdCodeObject,
}

impl ImageKind {
    pub const ALL: [ImageKind; 3] = [ImageKind::Ptx, ImageKind::Cubin, ImageKind::AmdCodeObject];

    /// The target whose images these are, whose backend runs them.
    pub fn target(self) -> &'static Target {
        match self {
            ImageKind::Ptx | ImageKind::Cubin => &NVPTX,
            ImageKind::AmdCodeObject => &AMDGPU,
        }
    }

    /// The ELF `e_machine` of an ELF kind; `None` for text.
    pub fn elf_machine(self) -> Option<u16> {
        match self {
            ImageKind::Ptx => None,
            ImageKind::Cubin => Some(190),
            ImageKind::AmdCodeObject => Some(224),
        }
    }

    /// The ELF kind of an `e_machine`, if it is a GPU image's.
    pub fn of_elf_machine(machine: u16) -> Option<ImageKind> {
        Self::ALL.into_iter().find(|kind| kind.elf_machine() == Some(machine))
    }

    /// Whether images of this kind are ELF files.
    pub fn is_elf(self) -> bool {
        self.elf_machine().is_some()
    }
}
