//! The demo: every rank puts a greeting into its right neighbour's segment, gets from its left
//! neighbour's, takes a ticket from a counter on rank 0, and meets the others at a barrier.
//!
//!     activerma run -n 4 --label -- target/release/examples/demo

use activerma::Result;

fn main() {
    if let Err(e) = run() {
        eprintln!("demo: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let world = activerma::init()?;
    let (me, n) = (world.rank(), world.size());
    let seg = world.alloc_segment(4096)?;
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;

    // put: my greeting lands in my right neighbour's segment at offset 0.
    let greeting = format!("hello from rank {me}");
    let mut msg = [0u8; 64];
    msg[..greeting.len()].copy_from_slice(greeting.as_bytes());
    world.put(seg.remote(right, 0), &msg)?;
    world.barrier()?;
    let mut inbox = [0u8; 64];
    seg.read_local(0, &mut inbox);
    println!("put: rank {me} found in its segment: \"{}\"", String::from_utf8_lossy(&inbox).trim_end_matches('\0'));

    // get: read my left neighbour's segment (it holds what its own left neighbour sent).
    let mut fetched = [0u8; 64];
    world.get(seg.remote(left, 0), &mut fetched)?;
    println!("get: rank {me} read rank {left}'s segment: \"{}\"", String::from_utf8_lossy(&fetched).trim_end_matches('\0'));

    // atomics: everyone takes a ticket from the counter on rank 0.
    let counter = seg.remote(0, 1024);
    let ticket = world.fetch_add(counter, 1)?;
    world.barrier()?;
    let total = world.fetch(counter)?;
    println!("atomic: rank {me} drew ticket {ticket}; the counter on rank 0 now reads {total}");
    assert_eq!(total, n as u64, "every rank's increment arrived");

    world.barrier()?;
    if me == 0 {
        println!(
            "barrier: all {n} ranks passed; conduit {}, progress {:?}, network model {}",
            world.conduit_name(),
            world.progress_mode(),
            world.net_model()
        );
    }
    world.finalize()
}
