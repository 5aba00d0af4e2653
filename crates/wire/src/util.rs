//! Checked big-endian field access over byte slices. Every function returns an error (never
//! panics) when the slice is too short.

use crate::WireError;

pub(crate) fn get<'a>(
    buf: &'a [u8],
    at: usize,
    len: usize,
    what: &'static str,
) -> Result<&'a [u8], WireError> {
    let end = at.checked_add(len).ok_or(WireError::BadLength {
        what,
        detail: "offset overflow",
    })?;
    buf.get(at..end).ok_or(WireError::Truncated {
        what,
        need: end,
        have: buf.len(),
    })
}

pub(crate) fn u8_at(buf: &[u8], at: usize, what: &'static str) -> Result<u8, WireError> {
    Ok(get(buf, at, 1, what)?.first().copied().unwrap_or_default())
}

pub(crate) fn u16_at(buf: &[u8], at: usize, what: &'static str) -> Result<u16, WireError> {
    let b = get(buf, at, 2, what)?;
    let mut a = [0u8; 2];
    a.copy_from_slice(b);
    Ok(u16::from_be_bytes(a))
}

pub(crate) fn u32_at(buf: &[u8], at: usize, what: &'static str) -> Result<u32, WireError> {
    let b = get(buf, at, 4, what)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    Ok(u32::from_be_bytes(a))
}

pub(crate) fn u64_at(buf: &[u8], at: usize, what: &'static str) -> Result<u64, WireError> {
    let b = get(buf, at, 8, what)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(u64::from_be_bytes(a))
}

/// Writes `bytes` at `at`; the caller sized `buf` (emit paths only), but we still check.
pub(crate) fn put(buf: &mut [u8], at: usize, bytes: &[u8]) -> Result<(), WireError> {
    let end = at.checked_add(bytes.len()).ok_or(WireError::BadLength {
        what: "emit",
        detail: "offset overflow",
    })?;
    let have = buf.len();
    let dst = buf.get_mut(at..end).ok_or(WireError::Truncated {
        what: "emit buffer",
        need: end,
        have,
    })?;
    dst.copy_from_slice(bytes);
    Ok(())
}

/// Rounds `n` up to a multiple of 4.
pub(crate) const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}
