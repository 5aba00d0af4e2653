//! Checked access to guest linear memory from host imports.
//!
//! A guest names its memory with `(ptr, len)` pairs of `i32`s and host buffers with
//! `(off, len)`; any of them may be hostile. Here a range is valid only if both numbers are
//! non-negative, their sum does not overflow and the end is within the slice; otherwise the
//! result is `None` or [`OutOfBounds`] and nothing is touched: no panic, no partial copy.
//! Guest memory is passed as a byte slice (`Memory::data`, `Memory::data_and_store_mut`), so
//! one function serves both directions of a copy.
//!
//! The copies return the number of bytes copied, which is at most `i32::MAX` (callers hand it
//! back to the guest as an `i32`).

use std::ops::Range;

/// A guest range, or a host buffer range named by the guest, lies outside its slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("range outside guest memory or host buffer")]
pub struct OutOfBounds;

/// `ptr..ptr + len` if it lies within a slice of `size` bytes.
#[inline]
pub fn range(size: usize, ptr: i32, len: i32) -> Option<Range<usize>> {
    let p = usize::try_from(ptr).ok()?;
    let l = usize::try_from(len).ok()?;
    let end = p.checked_add(l)?;
    (end <= size).then_some(p..end)
}

/// The `len` bytes of `mem` at `ptr`.
#[inline]
pub fn slice(mem: &[u8], ptr: i32, len: i32) -> Option<&[u8]> {
    mem.get(range(mem.len(), ptr, len)?)
}

/// The `len` bytes of `mem` at `ptr`, writable.
#[inline]
pub fn slice_mut(mem: &mut [u8], ptr: i32, len: i32) -> Option<&mut [u8]> {
    let r = range(mem.len(), ptr, len)?;
    mem.get_mut(r)
}

/// Copies `len` bytes of `from` at `from_at` to `to` at `to_at`: all of them or none. Either
/// side may be guest memory (`pkt_read`: packet to guest, `pkt_write`: guest to packet).
#[inline]
pub fn copy(
    from: &[u8],
    from_at: i32,
    to: &mut [u8],
    to_at: i32,
    len: i32,
) -> Result<usize, OutOfBounds> {
    let src = slice(from, from_at, len).ok_or(OutOfBounds)?;
    let dst = slice_mut(to, to_at, len).ok_or(OutOfBounds)?;
    dst.copy_from_slice(src);
    Ok(src.len())
}

/// A short read: copies what `from` holds from `from_at` on, but at most `max` bytes (none
/// if `max` is negative), to `to` at `to_at`. `from_at` must lie within `from` (its end
/// included) and the bytes copied within `to`.
#[inline]
pub fn copy_upto(
    from: &[u8],
    from_at: i32,
    to: &mut [u8],
    to_at: i32,
    max: i32,
) -> Result<usize, OutOfBounds> {
    let at = usize::try_from(from_at).map_err(|_| OutOfBounds)?;
    let src = from.get(at..).ok_or(OutOfBounds)?;
    let n = src.len().min(usize::try_from(max).unwrap_or(0));
    // `n <= max`, so it fits an `i32`.
    let dst = slice_mut(to, to_at, n as i32).ok_or(OutOfBounds)?;
    dst.copy_from_slice(src.get(..n).ok_or(OutOfBounds)?);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_reject_negative_overflowing_and_outside() {
        assert_eq!(range(10, 2, 8), Some(2..10));
        assert_eq!(range(10, 10, 0), Some(10..10));
        assert_eq!(range(10, 2, 9), None);
        assert_eq!(range(10, -1, 1), None);
        assert_eq!(range(10, 1, -1), None);
        assert_eq!(
            range(usize::MAX, i32::MAX, i32::MAX),
            Some(0x7fff_ffff..0xffff_fffe)
        );
        assert_eq!(slice(&[1, 2, 3], 1, 2), Some(&[2, 3][..]));
        assert_eq!(slice(&[1, 2, 3], 2, 2), None);
    }

    #[test]
    fn exact_copies_are_all_or_nothing() {
        let mut mem = [0u8; 8];
        let mut host = *b"abcdef";
        assert_eq!(copy(&host, 1, &mut mem, 4, 3), Ok(3));
        assert_eq!(&mem, b"\0\0\0\0bcd\0");
        assert_eq!(copy(&host, 4, &mut mem, 0, 3), Err(OutOfBounds));
        assert_eq!(copy(&host, 0, &mut mem, 6, 3), Err(OutOfBounds));
        assert_eq!(copy(&host, 0, &mut mem, 0, -1), Err(OutOfBounds));
        assert_eq!(copy(&host, -1, &mut mem, 0, 1), Err(OutOfBounds));
        assert_eq!(&mem, b"\0\0\0\0bcd\0");
        assert_eq!(copy(&mem, 4, &mut host, 0, 3), Ok(3));
        assert_eq!(&host, b"bcddef");
        assert_eq!(copy(&mem, 0, &mut host, 6, 0), Ok(0));
        assert_eq!(copy(&mem, 0, &mut host, 7, 0), Err(OutOfBounds));
    }

    #[test]
    fn short_reads_stop_at_the_end_of_the_source() {
        let mut mem = [0u8; 4];
        assert_eq!(copy_upto(b"abcdef", 4, &mut mem, 0, 100), Ok(2));
        assert_eq!(&mem, b"ef\0\0");
        assert_eq!(copy_upto(b"abcdef", 0, &mut mem, 1, 3), Ok(3));
        assert_eq!(&mem, b"eabc");
        assert_eq!(copy_upto(b"abcdef", 6, &mut mem, 4, 9), Ok(0));
        assert_eq!(copy_upto(b"abcdef", 0, &mut mem, 0, -5), Ok(0));
        assert_eq!(copy_upto(b"abcdef", 7, &mut mem, 0, 1), Err(OutOfBounds));
        assert_eq!(copy_upto(b"abcdef", -1, &mut mem, 0, 1), Err(OutOfBounds));
        assert_eq!(copy_upto(b"abcdef", 0, &mut mem, 0, 5), Err(OutOfBounds));
        assert_eq!(&mem, b"eabc");
    }
}
