//! The API in a one-rank job (the program is started without the launcher): every protocol
//! path that does not need a second process, and every error path.

use activerma::{Error, Prot, RemotePtr};

#[test]
fn one_rank_job_covers_every_path() {
    let w = activerma::init().expect("a program started alone is a one-rank job");
    assert_eq!((w.rank(), w.size(), w.conduit_name()), (0, 1, "smp"));

    // Segment: put/get/atomics through the direct protocols.
    let seg = w.alloc_segment(10_000).unwrap();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31) as u8).collect();
    w.put(seg.remote(0, 0), &data).unwrap();
    let mut back = vec![0u8; 10_000];
    w.get(seg.remote(0, 0), &mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(w.explain(seg.remote(0, 0), 8, "get").unwrap().0.name(), "get_direct");
    w.put(seg.remote(0, 64), &0u64.to_le_bytes()).unwrap();
    assert_eq!(w.fetch_add(seg.remote(0, 64), 5).unwrap(), 0);
    assert_eq!(w.swap(seg.remote(0, 64), 9).unwrap(), 5);
    assert_eq!(w.compare_swap(seg.remote(0, 64), 9, 1).unwrap(), 9);
    assert_eq!(w.fetch(seg.remote(0, 64)).unwrap(), 1);

    // Private memory of our own: copies and request-based atomics to ourselves.
    let mut buf = vec![0u64; 4];
    let ptr = buf.as_mut_ptr() as *mut u8;
    // SAFETY: buf outlives the exposure, dropped below.
    let ex = unsafe { w.expose_raw(ptr, 32, Prot::ReadWrite) }.unwrap();
    let at = RemotePtr::new(0, ex.addr());
    w.put(at.offset(8), &7u64.to_le_bytes()).unwrap();
    assert_eq!(w.fetch_add(at.offset(8), 1).unwrap(), 7);
    assert_eq!(w.explain(at, 8, "atomic").unwrap().0.name(), "atomic_am");
    assert!(matches!(w.get(at.offset(30), &mut [0u8; 4]), Err(Error::NotExposed { .. })));
    assert!(matches!(w.fetch(at.offset(4)), Err(Error::Misaligned { .. })));
    drop(ex);
    assert_eq!(buf[1], 8);

    // Read-only exposure is enforced; double exposure is refused.
    let ro = [1u8; 100];
    let rx = w.expose_read_only(&ro).unwrap();
    assert!(matches!(w.put(RemotePtr::new(0, rx.addr()), &[0]), Err(Error::Protection { .. })));
    assert!(w.expose_read_only(&ro).is_err());
    drop(rx);

    assert!(matches!(w.explain(seg.remote(0, 0), 8, "teleport"), Err(Error::InvalidArgument(_))));
    w.finalize().unwrap();
    assert!(matches!(w.get(seg.remote(0, 0), &mut [0u8; 1]), Err(Error::Finalized)));
}
