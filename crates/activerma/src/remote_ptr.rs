/// A remote address: a rank and a virtual address in that rank's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemotePtr {
    pub rank: crate::Rank,
    pub addr: usize,
}

impl RemotePtr {
    pub fn new(rank: crate::Rank, addr: usize) -> RemotePtr {
        RemotePtr { rank, addr }
    }

    /// The address `bytes` further on.
    pub fn offset(self, bytes: usize) -> RemotePtr {
        RemotePtr { rank: self.rank, addr: self.addr + bytes }
    }
}
