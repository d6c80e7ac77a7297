//! zstd with a dictionary trained per key pattern, for string values of
//! `MIN_LEN` bytes and more (encoding/packed.rs decides which values).
//!
//! Frames are magicless, with no checksum, no content size and no
//! dictionary id: 2 bytes of frame header and 3 of block header remain. The
//! dictionary is prepared once into a CDict (compression) and a DDict
//! (decompression), as zstd's own guidance for small data says.
//!
//! Everything zstd allocates (the prepared dictionaries and the two
//! contexts) goes through the program's global allocator by way of
//! `ZSTD_customMem`, so used_memory counts it as it counts every other heap
//! byte (FSST tables included). Only the trainer's scratch memory, freed
//! before `train` returns, comes from the C library's malloc.
//!
//! Decoding: zstd's decoder is written for untrusted input (it is fuzzed
//! upstream and reports malformed frames as errors); we give it an output
//! buffer of exactly the stated length and accept only a result of that
//! length, so no stored byte can make it write elsewhere or misread.

use std::alloc::{alloc, dealloc, Layout};
use std::ffi::c_void;
use std::ptr::{self, NonNull};

use zstd_sys as z;

/// Values shorter than this are left to FSST (zstd's headers and literal
/// handling eat what a dictionary saves below ~200 bytes).
pub const MIN_LEN: usize = 200;
/// Largest dictionary trained (bytes of dictionary content and tables).
pub const DICT_BYTES: usize = 16 * 1024;
/// Compression level (the design's measurement: level 3).
const LEVEL: i32 = 3;
/// The value size zstd tunes a dictionary's parameters for: values run
/// from `MIN_LEN` to 64 KiB, most of them a few KiB.
const SIZE_HINT: u64 = 4096;

/// Bytes before each block our allocator hands zstd, holding its size
/// (zstd's free callback is not told the size). 16 keeps zstd's blocks
/// aligned as malloc's are.
const HDR: usize = 16;

unsafe extern "C" fn zalloc(_opaque: *mut c_void, size: usize) -> *mut c_void {
    let Some(total) = size.checked_add(HDR) else { return ptr::null_mut() };
    let Ok(layout) = Layout::from_size_align(total, HDR) else { return ptr::null_mut() };
    // SAFETY: the layout has a non-zero size (at least HDR).
    let base = unsafe { alloc(layout) };
    if base.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: the block is `total` >= HDR bytes, aligned to 16, so its
    // first word is writable and `base + HDR` is within (or one past) it.
    unsafe {
        base.cast::<usize>().write(size);
        base.add(HDR).cast()
    }
}

unsafe extern "C" fn zfree(_opaque: *mut c_void, p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: zstd frees only what `zalloc` returned: HDR bytes past the
    // start of a block whose first word is the size asked for, allocated
    // with exactly this layout (which was valid then).
    unsafe {
        let base = p.cast::<u8>().sub(HDR);
        let size = base.cast::<usize>().read();
        dealloc(base, Layout::from_size_align_unchecked(size + HDR, HDR));
    }
}

fn mem() -> z::ZSTD_customMem {
    z::ZSTD_customMem { customAlloc: Some(zalloc), customFree: Some(zfree), opaque: ptr::null_mut() }
}

fn is_error(code: usize) -> bool {
    // SAFETY: a pure function of its argument.
    unsafe { z::ZSTD_isError(code) != 0 }
}

/// A trained dictionary, prepared for both directions.
pub struct Dict {
    cdict: NonNull<z::ZSTD_CDict>,
    ddict: NonNull<z::ZSTD_DDict>,
}

// SAFETY: a prepared dictionary is read-only after creation; zstd allows
// a CDict and a DDict to be used from any thread, by several at once.
unsafe impl Send for Dict {}
// SAFETY: as above (shared use only reads it).
unsafe impl Sync for Dict {}

impl Drop for Dict {
    fn drop(&mut self) {
        // SAFETY: both were created by zstd in `train` and are freed once,
        // here; no context keeps a reference after a call returns
        // (`Coder` clears them).
        unsafe {
            z::ZSTD_freeCDict(self.cdict.as_ptr());
            z::ZSTD_freeDDict(self.ddict.as_ptr());
        }
    }
}

impl Dict {
    /// Trains a dictionary from `samples` and prepares it; None if zstd's
    /// trainer finds too little to work with (too few or too small
    /// samples) or memory runs out.
    pub fn train(samples: &[&[u8]]) -> Option<Dict> {
        let flat: Vec<u8> = samples.concat();
        let sizes: Vec<usize> = samples.iter().map(|s| s.len()).collect();
        if samples.len() < 8 || flat.len() < 4 * 1024 {
            return None;
        }
        let cap = DICT_BYTES.min(flat.len() / 4);
        let mut buf = vec![0u8; cap];
        // SAFETY: `buf` has room for `cap` bytes; `flat` holds exactly the
        // concatenation of `sizes.len()` samples of the lengths in `sizes`.
        let n = unsafe {
            z::ZDICT_trainFromBuffer(buf.as_mut_ptr().cast(), cap, flat.as_ptr().cast(), sizes.as_ptr(), sizes.len() as u32)
        };
        // SAFETY: a pure function of its argument.
        if unsafe { z::ZDICT_isError(n) } != 0 {
            return None;
        }
        let dict = &buf[..n];
        // SAFETY: a pure computation on its arguments.
        let params = unsafe { z::ZSTD_getCParams(LEVEL, SIZE_HINT, dict.len()) };
        // SAFETY: `dict` is valid for its length; byCopy makes zstd keep
        // its own copy (in memory from `mem()`), so `buf` may go.
        let cdict = unsafe {
            z::ZSTD_createCDict_advanced(
                dict.as_ptr().cast(),
                dict.len(),
                z::ZSTD_dictLoadMethod_e::ZSTD_dlm_byCopy,
                z::ZSTD_dictContentType_e::ZSTD_dct_auto,
                params,
                mem(),
            )
        };
        let cdict = NonNull::new(cdict)?;
        // SAFETY: as above.
        let ddict = unsafe {
            z::ZSTD_createDDict_advanced(
                dict.as_ptr().cast(),
                dict.len(),
                z::ZSTD_dictLoadMethod_e::ZSTD_dlm_byCopy,
                z::ZSTD_dictContentType_e::ZSTD_dct_auto,
                mem(),
            )
        };
        let Some(ddict) = NonNull::new(ddict) else {
            // SAFETY: created just above, referenced by nothing.
            unsafe { z::ZSTD_freeCDict(cdict.as_ptr()) };
            return None;
        };
        Some(Dict { cdict, ddict })
    }

    /// Bytes the prepared dictionary holds (both directions), as zstd
    /// counts them; they are heap blocks from our allocator.
    pub fn bytes(&self) -> usize {
        // SAFETY: both pointers are live (freed only on drop).
        unsafe { z::ZSTD_sizeof_CDict(self.cdict.as_ptr()) + z::ZSTD_sizeof_DDict(self.ddict.as_ptr()) }
    }
}

/// A compression context set up for our frames, reused for every value
/// (created on first use). Decompression uses a context per thread
/// (`decompress`), because values are read through shared references.
#[derive(Default)]
pub struct Coder {
    cctx: Option<NonNull<z::ZSTD_CCtx>>,
}

// SAFETY: the context is owned by this value alone and changed through
// `&mut self` only (`bytes` only reads its size).
unsafe impl Send for Coder {}
// SAFETY: as above.
unsafe impl Sync for Coder {}

impl Drop for Coder {
    fn drop(&mut self) {
        if let Some(c) = self.cctx {
            // SAFETY: created by zstd in `cctx`, freed once, here.
            unsafe { z::ZSTD_freeCCtx(c.as_ptr()) };
        }
    }
}

impl Coder {
    fn cctx(&mut self) -> Option<NonNull<z::ZSTD_CCtx>> {
        if self.cctx.is_none() {
            // SAFETY: creates a context with our allocator.
            let c = NonNull::new(unsafe { z::ZSTD_createCCtx_advanced(mem()) })?;
            use z::ZSTD_cParameter as P;
            let set = [
                (P::ZSTD_c_experimentalParam2, z::ZSTD_format_e::ZSTD_f_zstd1_magicless as i32),
                (P::ZSTD_c_checksumFlag, 0),
                (P::ZSTD_c_contentSizeFlag, 0),
                (P::ZSTD_c_dictIDFlag, 0),
            ];
            for (p, v) in set {
                // SAFETY: `c` is live; the parameters are valid ones.
                let r = unsafe { z::ZSTD_CCtx_setParameter(c.as_ptr(), p, v) };
                if is_error(r) {
                    // SAFETY: created above, referenced by nothing.
                    unsafe { z::ZSTD_freeCCtx(c.as_ptr()) };
                    return None;
                }
            }
            self.cctx = Some(c);
        }
        self.cctx
    }

    /// Appends the frame of `src` under `dict` to `out`, if it is at most
    /// `limit` bytes; returns whether it did (`out` is unchanged if not).
    pub fn compress(&mut self, dict: &Dict, src: &[u8], limit: usize, out: &mut Vec<u8>) -> bool {
        let Some(c) = self.cctx() else { return false };
        let start = out.len();
        out.reserve(limit);
        // SAFETY: `c` and the CDict are live; the output pointer has room
        // for `limit` bytes past `start` (reserved above), and zstd writes
        // at most the capacity it is given; the CDict reference is cleared
        // before returning, so a later free of `dict` leaves nothing
        // dangling in the context.
        let n = unsafe {
            z::ZSTD_CCtx_refCDict(c.as_ptr(), dict.cdict.as_ptr());
            let n = z::ZSTD_compress2(c.as_ptr(), out.as_mut_ptr().add(start).cast(), limit, src.as_ptr().cast(), src.len());
            z::ZSTD_CCtx_refCDict(c.as_ptr(), ptr::null());
            n
        };
        if is_error(n) || n > limit {
            return false;
        }
        // SAFETY: zstd initialised the first `n` bytes past `start`.
        unsafe { out.set_len(start + n) };
        true
    }

    /// Bytes the context holds.
    pub fn bytes(&self) -> usize {
        // SAFETY: a live context (or none: 0).
        self.cctx.map_or(0, |c| unsafe { z::ZSTD_sizeof_CCtx(c.as_ptr()) })
    }
}

/// A thread's decompression context (created on its first use, freed when
/// the thread ends).
struct Dctx(NonNull<z::ZSTD_DCtx>);

impl Drop for Dctx {
    fn drop(&mut self) {
        // SAFETY: created by zstd in `with_dctx`, freed once, here.
        unsafe { z::ZSTD_freeDCtx(self.0.as_ptr()) };
    }
}

thread_local! {
    static DCTX: std::cell::RefCell<Option<Dctx>> = const { std::cell::RefCell::new(None) };
}

fn new_dctx() -> Option<Dctx> {
    // SAFETY: creates a context with our allocator.
    let d = Dctx(NonNull::new(unsafe { z::ZSTD_createDCtx_advanced(mem()) })?);
    let magicless = z::ZSTD_format_e::ZSTD_f_zstd1_magicless as i32;
    // SAFETY: `d` is live; a valid parameter and value.
    let r = unsafe { z::ZSTD_DCtx_setParameter(d.0.as_ptr(), z::ZSTD_dParameter::ZSTD_d_experimentalParam1, magicless) };
    (!is_error(r)).then_some(d)
}

/// Appends the `len` bytes that `frame` decodes to under `dict`; None
/// (and `out` unchanged) if it is malformed or decodes to any other
/// length. The caller bounds `len` (it sizes an allocation).
pub fn decompress(dict: &Dict, frame: &[u8], len: usize, out: &mut Vec<u8>) -> Option<()> {
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(new_dctx()?);
        }
        let d = slot.as_ref()?.0;
        let start = out.len();
        out.reserve(len);
        // SAFETY: `d` and the DDict are live; the output has room for `len`
        // bytes past `start`, the capacity zstd is told; the input is a
        // valid slice. zstd checks every frame and block header against
        // the input and output bounds and returns an error code otherwise.
        let n = unsafe {
            z::ZSTD_decompress_usingDDict(
                d.as_ptr(),
                out.as_mut_ptr().add(start).cast(),
                len,
                frame.as_ptr().cast(),
                frame.len(),
                dict.ddict.as_ptr(),
            )
        };
        if is_error(n) || n != len {
            return None;
        }
        // SAFETY: zstd wrote exactly `len` bytes past `start`.
        unsafe { out.set_len(start + len) };
        Some(())
    })
}

/// A thread's contexts for frames without a dictionary (standard frames:
/// magic number, content size), made on first use with `mem()`, so
/// used_memory counts them, and freed when the thread ends.
struct Plain {
    cctx: NonNull<z::ZSTD_CCtx>,
    dctx: NonNull<z::ZSTD_DCtx>,
}

impl Drop for Plain {
    fn drop(&mut self) {
        // SAFETY: both were created by zstd in `new_plain` and are freed
        // once, here.
        unsafe {
            z::ZSTD_freeCCtx(self.cctx.as_ptr());
            z::ZSTD_freeDCtx(self.dctx.as_ptr());
        }
    }
}

thread_local! {
    static PLAIN: std::cell::RefCell<Option<Plain>> = const { std::cell::RefCell::new(None) };
}

fn new_plain() -> Option<Plain> {
    // SAFETY: creates a context with our allocator.
    let cctx = NonNull::new(unsafe { z::ZSTD_createCCtx_advanced(mem()) })?;
    // SAFETY: as above.
    let Some(dctx) = NonNull::new(unsafe { z::ZSTD_createDCtx_advanced(mem()) }) else {
        // SAFETY: created above, referenced by nothing.
        unsafe { z::ZSTD_freeCCtx(cctx.as_ptr()) };
        return None;
    };
    Some(Plain { cctx, dctx })
}

fn with_plain<R>(f: impl FnOnce(&Plain) -> Option<R>) -> Option<R> {
    PLAIN.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(new_plain()?);
        }
        f(slot.as_ref()?)
    })
}

/// Replaces `out` with the standard zstd frame of `src` at `level`, with
/// no dictionary; false (and `out` empty) if zstd failed.
pub fn compress_plain(level: i32, src: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    with_plain(|p| {
        // SAFETY: a pure function of its argument.
        let bound = unsafe { z::ZSTD_compressBound(src.len()) };
        out.reserve(bound);
        // SAFETY: the context is live and this thread's alone; the output
        // has room for `bound` bytes, the capacity zstd is told; the input
        // is a valid slice. The level is a valid parameter.
        let n = unsafe {
            z::ZSTD_CCtx_setParameter(p.cctx.as_ptr(), z::ZSTD_cParameter::ZSTD_c_compressionLevel, level);
            z::ZSTD_compress2(p.cctx.as_ptr(), out.as_mut_ptr().cast(), bound, src.as_ptr().cast(), src.len())
        };
        if is_error(n) || n > bound {
            return None;
        }
        // SAFETY: zstd initialised the first `n` bytes.
        unsafe { out.set_len(n) };
        Some(())
    })
    .is_some()
}

/// The content size a standard frame states; None if it states none or
/// the header is malformed.
pub fn plain_content_size(frame: &[u8]) -> Option<u64> {
    // SAFETY: reads at most `frame.len()` bytes of a valid slice.
    let n = unsafe { z::ZSTD_getFrameContentSize(frame.as_ptr().cast(), frame.len()) };
    // ZSTD_CONTENTSIZE_UNKNOWN is u64::MAX, ZSTD_CONTENTSIZE_ERROR u64::MAX - 1.
    (n < u64::MAX - 1).then_some(n)
}

/// Decodes standard frame `frame` into `out`; the bytes written, or None
/// if it is malformed or does not fit.
pub fn decompress_plain(frame: &[u8], out: &mut [u8]) -> Option<usize> {
    with_plain(|p| {
        // SAFETY: the context is live and this thread's alone; the output
        // is a valid slice of `out.len()` bytes, the capacity zstd is
        // told; zstd checks the frame against both bounds.
        let n = unsafe { z::ZSTD_decompressDCtx(p.dctx.as_ptr(), out.as_mut_ptr().cast(), out.len(), frame.as_ptr().cast(), frame.len()) };
        (!is_error(n) && n <= out.len()).then_some(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_frames_round_trip_and_refuse_damage() {
        let src: Vec<u8> = (0..8000u32).flat_map(|i| format!("{{\"event\":\"view\",\"n\":{}}}", i % 97).into_bytes()).collect();
        let mut z = Vec::new();
        assert!(compress_plain(1, &src, &mut z));
        assert!(z.len() < src.len() / 4);
        assert_eq!(plain_content_size(&z), Some(src.len() as u64));
        let mut back = vec![0u8; src.len()];
        assert_eq!(decompress_plain(&z, &mut back), Some(src.len()));
        assert_eq!(back, src);
        let mut short = vec![0u8; src.len() - 1];
        assert_eq!(decompress_plain(&z, &mut short), None, "does not fit");
        for cut in [0, 1, 5, z.len() / 2, z.len() - 1] {
            let _ = plain_content_size(&z[..cut]);
            let _ = decompress_plain(&z[..cut], &mut back);
        }
        let mut bad = z.clone();
        for i in (8..bad.len()).step_by(7) {
            bad[i] ^= 0x5a;
        }
        let _ = decompress_plain(&bad, &mut back);
    }

    fn record(i: usize) -> Vec<u8> {
        format!(
            "{{\"name\":\"Shape{i}\",\"type\":\"structure\",\"members\":{{\"InstanceId\":{{\"shape\":\"String\",\"documentation\":\"<p>The ID of the instance {}.</p>\",\"locationName\":\"instanceId\"}},\"DryRun\":{{\"shape\":\"Boolean\",\"documentation\":\"<p>Checks whether you have the required permissions for the action, without actually making the request.</p>\"}}}},\"required\":[\"InstanceId\"]}}",
            i * 7919 % 100_003
        )
        .into_bytes()
    }

    #[test]
    fn trains_packs_and_unpacks() {
        let samples: Vec<Vec<u8>> = (0..200).map(record).collect();
        let refs: Vec<&[u8]> = samples.iter().map(|s| &s[..]).collect();
        let dict = Dict::train(&refs).expect("trained");
        assert!(dict.bytes() > 0);
        let mut c = Coder::default();
        let mut total = (0, 0);
        for i in 1000..1100 {
            let v = record(i);
            let mut out = b"hdr".to_vec();
            assert!(c.compress(&dict, &v, v.len(), &mut out));
            let mut back = b"x".to_vec();
            decompress(&dict, &out[3..], v.len(), &mut back).unwrap();
            assert_eq!(&back[1..], &v[..]);
            assert!(decompress(&dict, &out[3..], v.len() - 1, &mut back).is_none());
            assert!(decompress(&dict, &out[3..], v.len() + 1, &mut back).is_none());
            assert_eq!(back.len(), 1 + v.len());
            total.0 += v.len();
            total.1 += out.len() - 3;
        }
        assert!(total.1 * 4 < total.0, "{total:?}");
        // Too tight a limit: nothing written.
        let mut out = Vec::new();
        assert!(!c.compress(&dict, &record(5), 4, &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn too_few_samples_train_nothing() {
        assert!(Dict::train(&[b"abc".as_slice(); 3]).is_none());
    }
}
