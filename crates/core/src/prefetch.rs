//! Cache hints: start loading a line the caller will soon write, without waiting for it.

/// Starts bringing the line holding `addr` into this core's cache in a state ready for
/// writing (PREFETCHW on x86-64: x86-64 CPUs from before Broadwell, which lack it, run it as a
/// no-op, as they do every 0F 0D opcode). A hint only: any address is allowed, since a
/// prefetch never faults; on other architectures nothing happens.
#[inline(always)]
pub fn for_write(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch changes no state the program sees and never faults, whatever `addr`.
    unsafe {
        std::arch::asm!("prefetchw [{}]", in(reg) addr, options(nostack, preserves_flags, readonly))
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}
