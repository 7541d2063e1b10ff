//! The two uses the layers make of the MMU, on real mappings: written pages found and
//! protected again; missing pages served by another thread, coming in write-protected.

use activerma_mmu::{page_size, PageScan, Uffd};

fn map(len: usize) -> *mut u8 {
    // SAFETY: a fresh private mapping.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    p as *mut u8
}

#[test]
fn finds_the_pages_written_and_protects_them_again() {
    let page = page_size();
    let n = 2048; // more runs than one scan's vector holds
    let p = map(n * page);
    let uffd = match Uffd::open(Uffd::WP_ASYNC | Uffd::WP_UNPOPULATED) {
        Ok(u) => u,
        Err(e) => return eprintln!("skipped: {e}"),
    };
    uffd.register(p as usize, n * page, Uffd::WP).unwrap();
    uffd.write_protect(p as usize, n * page).unwrap();
    let scan = PageScan::open().unwrap();
    let (start, end) = (p as usize, p as usize + n * page);
    let touched: Vec<usize> = (0..n).step_by(2).collect();
    // SAFETY: inside the mapping.
    touched.iter().for_each(|&i| unsafe { *p.add(i * page + 7) = 1 });
    let mut got = Vec::new();
    scan.take_written(start, end, &mut |a, l| (0..l / page).for_each(|k| got.push((a - start) / page + k))).unwrap();
    assert_eq!(got, touched);
    let mut again = 0;
    scan.take_written(start, end, &mut |_, l| again += l).unwrap();
    assert_eq!(again, 0, "protected again after the scan");
    // SAFETY: as above.
    unsafe { *p.add(5 * page) = 2 };
    let mut third = Vec::new();
    scan.take_written(start, end, &mut |a, l| third.push(((a - start) / page, l / page))).unwrap();
    assert_eq!(third, vec![(5, 1)]);
}

#[test]
fn missing_pages_come_from_another_thread_and_their_stores_are_seen() {
    let page = page_size();
    let n = 8;
    let p = map(n * page) as usize;
    let uffd = match Uffd::open(Uffd::WP_ASYNC | Uffd::WP_UNPOPULATED) {
        Ok(u) => std::sync::Arc::new(u),
        Err(e) => return eprintln!("skipped: {e}"),
    };
    uffd.register(p, n * page, Uffd::MISSING | Uffd::WP).unwrap();
    uffd.write_protect(p, n * page).unwrap(); // absent pages count as protected, not written
    let server = {
        let uffd = uffd.clone();
        std::thread::spawn(move || {
            let mut served = Vec::new();
            while served.len() < 3 {
                let Some(f) = uffd.next_fault(5000).unwrap() else { panic!("no fault came") };
                let at = f.addr & !(page - 1);
                let fill = vec![((at - p) / page) as u8 + 100; page];
                // SAFETY: `fill` holds a page.
                unsafe { uffd.copy(at, fill.as_ptr(), page, true) }.unwrap();
                served.push(((at - p) / page, f.write));
            }
            served
        })
    };
    // SAFETY: inside the mapping; each first touch waits for the server.
    let (a, b) = unsafe { (*((p + 2 * page) as *const u8), *((p + 5 * page + 9) as *const u8)) };
    assert_eq!((a, b), (102, 105), "each page as the server filled it");
    unsafe { *((p + 7 * page) as *mut u8) = 1 };
    let served = server.join().unwrap();
    assert_eq!(served, vec![(2, false), (5, false), (7, true)]);
    let scan = PageScan::open().unwrap();
    let mut written = Vec::new();
    scan.take_written(p, p + n * page, &mut |a, l| written.push(((a - p) / page, l / page))).unwrap();
    assert_eq!(written, vec![(7, 1)], "pages come in protected: only the stored-to one is written");
    // SAFETY: inside the mapping, present now.
    unsafe { *((p + 2 * page + 1) as *mut u8) = 3 };
    written.clear();
    scan.take_written(p, p + n * page, &mut |a, l| written.push(((a - p) / page, l / page))).unwrap();
    assert_eq!(written, vec![(2, 1)]);
    // Dropped pages fault again.
    // SAFETY: our mapping.
    assert_eq!(unsafe { libc::madvise((p + 2 * page) as *mut libc::c_void, page, libc::MADV_DONTNEED) }, 0);
    uffd.write_protect(p + 2 * page, page).unwrap(); // absent again: protected, not written
    written.clear();
    scan.take_written(p, p + n * page, &mut |a, l| written.push(((a - p) / page, l / page))).unwrap();
    assert_eq!(written, vec![], "a dropped page is not a written one");
    let again = {
        let uffd = uffd.clone();
        std::thread::spawn(move || {
            let f = uffd.next_fault(5000).unwrap().expect("a fault after the drop");
            let fill = vec![7u8; page];
            // SAFETY: `fill` holds a page.
            unsafe { uffd.copy(f.addr & !(page - 1), fill.as_ptr(), page, true) }.unwrap();
        })
    };
    // SAFETY: as above.
    assert_eq!(unsafe { *((p + 2 * page + 1) as *const u8) }, 7);
    again.join().unwrap();
}
