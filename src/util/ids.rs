//! Random ids and hex: the OS random source ([`fill_random`]), `n` random bytes as hex
//! ([`random_hex`]), UUID v4 ([`new_uuid`], from a per-thread pool of OS random bytes), and
//! lowercase hex both ways. Used by attempts (tokens, secrets), the store (writer ids) and the
//! profiles (fake ids).

/// Fill `buf` from the OS random source. Panics only if the OS has none (nothing sensible can
/// run then: tokens would be guessable).
pub fn fill_random(buf: &mut [u8]) {
    getrandom::fill(buf).expect("the OS random source is unavailable");
}

/// [`fill_random`] through a per-thread pool of 512 OS random bytes, each handed out once
/// (ids: one `getrandom` call per 32 of them).
fn fill_random_pooled(buf: &mut [u8; 16]) {
    use std::cell::RefCell;
    const POOL: usize = 512;
    thread_local! {
        static BYTES: RefCell<([u8; POOL], usize)> = const { RefCell::new(([0; POOL], POOL)) };
    }
    BYTES.with(|p| {
        let (pool, used) = &mut *p.borrow_mut();
        let n = buf.len();
        if *used + n > POOL {
            fill_random(pool);
            *used = 0;
        }
        let taken = &mut pool[*used..*used + n];
        buf.copy_from_slice(taken);
        // Handed out once: never again from this pool.
        taken.fill(0);
        *used += n;
    });
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `n` random bytes, hex.
pub fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    fill_random(&mut b);
    hex(&b)
}

/// A random UUID v4 (`xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`): attempt ids and execution
/// attempt ids (one per call: its bytes come from a per-thread pool of OS random bytes,
/// [`fill_random_pooled`], not from a system call each).
pub fn new_uuid() -> String {
    let mut b = [0u8; 16];
    fill_random_pooled(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_shape() {
        let u = new_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
    }

    #[test]
    fn pooled_uuids_never_repeat_across_pool_refills() {
        let ids: std::collections::HashSet<String> = (0..2000).map(|_| new_uuid()).collect();
        assert_eq!(ids.len(), 2000);
        assert!(ids.iter().all(|u| &u[14..15] == "4"));
    }
}
