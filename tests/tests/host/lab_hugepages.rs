//! Hugepage reservations give back exactly what they took, even when pages of an earlier
//! reservation are still in use (surplus) when the next one is made: that is what happens
//! when a process starts right after another one whose UMEM the kernel has not freed yet.
//!
//! Needs root (`#[ignore]`d: `cargo xtask test` runs it).

use xroce_lab::hugepages::{self, HugepageReservation, PAGE_SIZE};

/// `pages` hugepages mapped and touched, unmapped on drop.
struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(pages: usize) -> Mapping {
        let len = pages * PAGE_SIZE;
        // Safety: an anonymous mapping at an address of the kernel's choosing.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        assert_ne!(
            addr,
            libc::MAP_FAILED,
            "mmap(MAP_HUGETLB): {}",
            std::io::Error::last_os_error()
        );
        Mapping { addr, len }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Safety: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

#[test]
#[ignore = "needs root: network namespaces, XDP, AF_XDP (cargo xtask test runs it)"]
fn lab_hugepage_reservations_survive_surplus_pages() {
    xroce_lab::require_root();
    let before = hugepages::persistent().expect("pool");
    let first = HugepageReservation::reserve(4).expect("reserving");
    assert_eq!(first.granted(), 4);
    let in_use = Mapping::new(4);
    // Given back while in use: the four pages become surplus.
    drop(first);
    assert_eq!(hugepages::persistent().expect("pool"), before);
    assert_eq!(
        hugepages::total().expect("pool"),
        before + 4,
        "four surplus pages in use"
    );

    // The next reservation turns the surplus pages into pool pages; it must count them.
    let second = HugepageReservation::reserve(16).expect("reserving");
    assert_eq!(second.granted(), 16);
    drop(in_use);
    drop(second);
    assert_eq!(
        hugepages::persistent().expect("pool"),
        before,
        "pages left in the pool"
    );
    assert_eq!(
        hugepages::total().expect("pool"),
        before,
        "surplus pages left"
    );
}
