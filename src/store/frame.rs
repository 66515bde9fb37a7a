//! The frame format of the journal and of the evidence files: `length u32 LE | crc32 u32 LE |
//! payload`. One writer ([`push`], then [`seal`]) and one reader ([`read`]); what the payload
//! holds and which checksum it carries are the caller's (the journal's CRC covers its epoch
//! too, an evidence frame's covers only its payload).
//!
//! A frame whose length is 0 ends the log: both files are written into space that may hold
//! zeros (the journal is pre-filled with them), so a zero length is "nothing here yet".

/// Bytes before a frame's payload: the length and the checksum.
pub(super) const OVERHEAD: usize = 8;

/// Appends one frame whose payload is `parts` concatenated, with a zero checksum that
/// [`seal`] fills in.
pub(super) fn push(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]); // the checksum, filled in by `seal`
    for p in parts {
        out.extend_from_slice(p);
    }
}

/// Fills in the checksum of each whole frame in `frames` (as [`push`] wrote them) with
/// `crc(payload)`.
pub(super) fn seal(frames: &mut [u8], crc: impl Fn(&[u8]) -> u32) {
    let mut at = 0;
    while at + OVERHEAD <= frames.len() {
        let n = u32::from_le_bytes(frames[at..at + 4].try_into().unwrap()) as usize;
        let c = crc(&frames[at + OVERHEAD..at + OVERHEAD + n]);
        frames[at + 4..at + 8].copy_from_slice(&c.to_le_bytes());
        at += OVERHEAD + n;
    }
}

/// The payloads of the frames at the start of `bytes`, up to the first one that is torn,
/// empty, or that `valid(payload, crc)` refuses; and the offset where they end.
pub(super) fn read(bytes: &[u8], valid: impl Fn(&[u8], u32) -> bool) -> (Vec<&[u8]>, usize) {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= OVERHEAD {
        let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        let Some(payload) = bytes.get(at + OVERHEAD..at + OVERHEAD + n) else {
            break;
        };
        if n == 0 || !valid(payload, crc) {
            break;
        }
        frames.push(payload);
        at += OVERHEAD + n;
    }
    (frames, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_written_and_sealed_read_back_up_to_a_torn_tail() {
        let mut out = Vec::new();
        push(&mut out, &[b"ab", b"c"]);
        push(&mut out, &[b"defg"]);
        seal(&mut out, crc32fast::hash);
        let ok = |p: &[u8], crc| crc32fast::hash(p) == crc;
        assert_eq!(read(&out, ok), (vec![&b"abc"[..], &b"defg"[..]], out.len()));
        for cut in 11..out.len() {
            assert_eq!(read(&out[..cut], ok).1, 11, "cut at {cut}");
        }
        let padded = [out.clone(), vec![0; 12]].concat();
        assert_eq!(read(&padded, ok).1, out.len());
    }
}
