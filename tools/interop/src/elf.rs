//! Just enough of ELF64 (little-endian) to build the peer image: the shared libraries a
//! program or library needs (`DT_NEEDED`) and the `.modinfo` of a kernel module.

use anyhow::{Context, Result, bail};

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn usize_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64_at(b, at)?).ok()
}

/// The NUL-terminated string at `at`.
fn c_str(b: &[u8], at: usize) -> Option<&str> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// Whether `bytes` start like an ELF file.
pub(crate) fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

fn check_header(b: &[u8]) -> Result<()> {
    if !is_elf(b) {
        bail!("not an ELF file");
    }
    if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        bail!("not a little-endian 64-bit ELF file");
    }
    Ok(())
}

struct Segment {
    kind: u32,
    offset: usize,
    vaddr: u64,
    filesz: u64,
}

fn segments(b: &[u8]) -> Option<Vec<Segment>> {
    let phoff = usize_at(b, 0x20)?;
    let phentsize = usize::from(u16_at(b, 0x36)?);
    let phnum = usize::from(u16_at(b, 0x38)?);
    (0..phnum)
        .map(|i| {
            let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
            Some(Segment {
                kind: u32_at(b, at)?,
                offset: usize_at(b, at + 8)?,
                vaddr: u64_at(b, at + 16)?,
                filesz: u64_at(b, at + 32)?,
            })
        })
        .collect()
}

/// The shared libraries (`DT_NEEDED` sonames) of an executable or shared library; empty for
/// a static one.
pub(crate) fn needed(b: &[u8]) -> Result<Vec<String>> {
    check_header(b)?;
    let segs = segments(b).context("truncated program headers")?;
    let Some(dynamic) = segs.iter().find(|s| s.kind == 2) else {
        return Ok(Vec::new());
    };
    // Dynamic entries: (tag, value) pairs of 8 bytes each.
    let mut strtab = None;
    let mut names = Vec::new();
    let end = dynamic
        .offset
        .checked_add(usize::try_from(dynamic.filesz)?)
        .context("bad dynamic segment")?;
    let mut at = dynamic.offset;
    while at + 16 <= end {
        let tag = u64_at(b, at).context("truncated dynamic segment")?;
        let val = u64_at(b, at + 8).context("truncated dynamic segment")?;
        match tag {
            0 => break,
            1 => names.push(val),
            5 => strtab = Some(val),
            _ => {}
        }
        at += 16;
    }
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let strtab = strtab.context("DT_NEEDED without DT_STRTAB")?;
    // DT_STRTAB is an address: find the loaded segment that holds it.
    let load = segs
        .iter()
        .find(|s| s.kind == 1 && s.vaddr <= strtab && strtab < s.vaddr + s.filesz)
        .context("DT_STRTAB outside every loaded segment")?;
    let base = load.offset + usize::try_from(strtab - load.vaddr)?;
    names
        .into_iter()
        .map(|off| {
            let at = base + usize::try_from(off)?;
            c_str(b, at)
                .map(str::to_owned)
                .context("DT_NEEDED name outside the file")
        })
        .collect()
}

/// The `key=value` entries of a kernel module's `.modinfo` section.
pub(crate) fn modinfo(b: &[u8]) -> Result<Vec<(String, String)>> {
    check_header(b)?;
    let shoff = usize_at(b, 0x28).context("truncated header")?;
    let shentsize = usize::from(u16_at(b, 0x3a).context("truncated header")?);
    let shnum = usize::from(u16_at(b, 0x3c).context("truncated header")?);
    let shstrndx = usize::from(u16_at(b, 0x3e).context("truncated header")?);
    let section = |i: usize| -> Option<(u32, usize, usize)> {
        let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            u32_at(b, at)?,
            usize_at(b, at + 0x18)?,
            usize_at(b, at + 0x20)?,
        ))
    };
    let (_, names_at, _) = section(shstrndx).context("no section name table")?;
    for i in 0..shnum {
        let (name, offset, size) = section(i).context("truncated section headers")?;
        if c_str(b, names_at + name as usize) != Some(".modinfo") {
            continue;
        }
        let data = b
            .get(offset..offset + size)
            .context(".modinfo outside the file")?;
        return Ok(data
            .split(|&c| c == 0)
            .filter_map(|entry| {
                let text = std::str::from_utf8(entry).ok()?;
                let (k, v) = text.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .collect());
    }
    bail!("no .modinfo section (not a kernel module)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_needs_libc() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let libs = needed(&me).unwrap();
        assert!(libs.iter().any(|l| l.starts_with("libc.so")), "{libs:?}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(needed(b"not elf").is_err());
        assert!(modinfo(b"\x7fELF").is_err());
        let mut truncated = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        truncated.truncate(100);
        assert!(needed(&truncated).is_err());
        assert!(modinfo(&truncated).is_err());
    }
}
