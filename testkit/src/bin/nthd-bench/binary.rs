//! The binary under test: its size and whether it is stripped.

use std::path::Path;

/// Size in bytes, and whether it has symbols (`None`: not a 64-bit little-endian ELF).
pub(crate) fn measure(nthd: &Path) -> Result<(u64, Option<bool>), String> {
    let bytes = std::fs::read(nthd).map_err(|e| {
        format!(
            "cannot read {}: {e} (build it: cargo build --release -p nthd)",
            nthd.display()
        )
    })?;
    Ok((bytes.len() as u64, elf_has_symbols(&bytes)))
}

/// Whether an ELF file has a symbol table or debug sections (i.e. is not stripped).
fn elf_has_symbols(bytes: &[u8]) -> Option<bool> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?));
    if bytes.get(0..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None; // only 64-bit little-endian ELF
    }
    let shoff = u64_at(0x28)? as usize;
    let shentsize = u16_at(0x3a)? as usize;
    let shnum = u16_at(0x3c)? as usize;
    let shstrndx = u16_at(0x3e)? as usize;
    let sh = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(sh(shstrndx) + 0x18)? as usize;
    for i in 0..shnum {
        let name_off = strtab + u32_at(sh(i))? as usize;
        let name = bytes.get(name_off..)?;
        let name = &name[..name.iter().position(|b| *b == 0)?];
        if name == b".symtab" || name.starts_with(b".debug_") {
            return Some(true);
        }
    }
    Some(false)
}
