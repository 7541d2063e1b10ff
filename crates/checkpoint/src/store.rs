//! The checkpoint store: a directory on local disk that holds, per rank, one file per
//! checkpoint (a full base, or the pages that changed since the previous checkpoint), and one
//! file of markers that say which checkpoints are complete for the whole job.
//!
//! ```text
//! DIR/rank-<r>/<epoch>.pages     header, then records (offset in the rank's heap, length,
//!                                CRC-32, bytes), then a trailer (record count, CRC-32 of all)
//! DIR/complete                   two marker slots, 4 KiB apart, written by rank 0 once every
//!                                rank's file of an epoch is durable: epoch, ranks, the epoch of
//!                                the chain's full base, CRC-32; epoch e goes to slot e % 2
//! ```
//! A checkpoint is trusted only under its marker, and the marker is written only once every
//! rank's file of it is durable (written, fsynced, its directory fsynced). So a crash in the
//! middle of a checkpoint leaves a partial file under no marker, and restart finds the previous
//! checkpoint intact. A marker is overwritten in place in a file made once, then fdatasynced:
//! no new file, no directory entry, no size change, so no journal commit — only the data block
//! and a cache flush (docs/design/checkpoint.md has the numbers). A slot torn by a crash
//! fails its CRC and counts as absent; the other slot still holds the checkpoint before it.
//! No file is written as a temporary and renamed: on ext4 that costs one
//! more journal commit per file, which the marker makes unnecessary. Restart applies the chain
//! from the newest complete marker's base up to it, checking every page's checksum.

use activerma::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const MAGIC: &[u8; 8] = b"ARMACKPT";
const VERSION: u32 = 1;
const KIND_FULL: u32 = 0;
const KIND_INCREMENTAL: u32 = 1;
/// A record's header: heap offset (8), length (4), CRC-32 (4).
pub const RECORD_HEADER: usize = 16;
/// The markers' file, its slots (each in a block of its own) and a slot's bytes.
const MARKERS: &str = "complete";
const MARKER_SLOTS: u64 = 2;
const MARKER_SLOT_BYTES: u64 = 4096;
const MARKER_MAGIC: &[u8; 8] = b"ARMAMARK";
const MARKER_BYTES: usize = 8 + 3 * 8 + 4;

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::InvalidArgument(format!("checkpoint store: cannot {what} {}: {e}", path.display()))
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("checkpoint store: {} is damaged: {why}", path.display()))
}

/// fsyncs a directory, so that a file created in it survives a crash.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_error("sync directory", dir, e))
}

/// Writes `name` in `dir` and makes it durable: write, fsync, fsync of the directory (its
/// entry). Trusted only once a marker says so (see the module's note).
fn write_durably(dir: &Path, name: &str, fill: &mut dyn FnMut(&mut BufWriter<&File>) -> Result<()>) -> Result<u64> {
    let path = dir.join(name);
    let file = File::create(&path).map_err(|e| io_error("create", &path, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, &file);
    fill(&mut w)?;
    w.flush().map_err(|e| io_error("write", &path, e))?;
    drop(w);
    file.sync_all().map_err(|e| io_error("sync", &path, e))?;
    let len = file.metadata().map_err(|e| io_error("stat", &path, e))?.len();
    sync_dir(dir)?;
    Ok(len)
}

/// One rank's view of the store.
pub struct Store {
    dir: PathBuf,
    rank_dir: PathBuf,
    rank: usize,
    /// The markers' file, opened (and made, the first time) by the first marker written.
    markers: OnceLock<File>,
}

/// A checkpoint's marker: complete for the whole job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub epoch: u64,
    pub ranks: u64,
    pub base: u64,
}

/// What a rank's checkpoint file holds, being written.
pub struct PageFile<'a, 'f> {
    w: &'a mut BufWriter<&'f File>,
    path: &'a Path,
    records: u64,
    all: crc32fast::Hasher,
    pub bytes: u64,
}

impl PageFile<'_, '_> {
    /// Appends the bytes at `offset` of the rank's heap.
    pub fn record(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let crc = crc32fast::hash(data);
        let mut head = [0u8; RECORD_HEADER];
        head[..8].copy_from_slice(&offset.to_le_bytes());
        head[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        head[12..].copy_from_slice(&crc.to_le_bytes());
        self.all.update(&head);
        self.all.update(data);
        self.w.write_all(&head).and_then(|_| self.w.write_all(data)).map_err(|e| io_error("write", self.path, e))?;
        self.records += 1;
        self.bytes += (RECORD_HEADER + data.len()) as u64;
        Ok(())
    }
}

impl Store {
    pub fn open(dir: &Path, rank: usize) -> Result<Store> {
        let rank_dir = dir.join(format!("rank-{rank}"));
        fs::create_dir_all(&rank_dir).map_err(|e| io_error("create", &rank_dir, e))?;
        Ok(Store { dir: dir.to_path_buf(), rank_dir, rank, markers: OnceLock::new() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn page_file_name(epoch: u64) -> String {
        format!("{epoch:010}.pages")
    }

    /// Writes this rank's file of `epoch` (a full base if `full`), records coming from `fill`;
    /// returns the bytes the file holds.
    pub fn write_pages(&self, epoch: u64, full: bool, fill: &mut dyn FnMut(&mut PageFile<'_, '_>) -> Result<()>) -> Result<u64> {
        let name = Self::page_file_name(epoch);
        let path = self.rank_dir.join(&name);
        write_durably(&self.rank_dir, &name, &mut |w| {
            let mut head = Vec::with_capacity(32);
            head.extend_from_slice(MAGIC);
            head.extend_from_slice(&VERSION.to_le_bytes());
            head.extend_from_slice(&(if full { KIND_FULL } else { KIND_INCREMENTAL }).to_le_bytes());
            head.extend_from_slice(&(self.rank as u64).to_le_bytes());
            head.extend_from_slice(&epoch.to_le_bytes());
            w.write_all(&head).map_err(|e| io_error("write", &path, e))?;
            let mut pf = PageFile { w, path: &path, records: 0, all: crc32fast::Hasher::new(), bytes: head.len() as u64 };
            fill(&mut pf)?;
            let (records, crc, w) = (pf.records, pf.all.finalize(), pf.w);
            w.write_all(&records.to_le_bytes()).and_then(|_| w.write_all(&crc.to_le_bytes())).map_err(|e| io_error("write", &path, e))
        })
    }

    /// Rank 0, once every rank's file of `m.epoch` is durable: the checkpoint is complete.
    pub fn write_marker(&self, m: Marker) -> Result<()> {
        let path = self.dir.join(MARKERS);
        let file = match self.markers.get() {
            Some(f) => f,
            None => {
                let f = self.open_markers(&path)?;
                self.markers.get_or_init(|| f)
            }
        };
        let mut slot = [0u8; MARKER_BYTES];
        slot[..8].copy_from_slice(MARKER_MAGIC);
        for (i, v) in [m.epoch, m.ranks, m.base].into_iter().enumerate() {
            slot[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc32fast::hash(&slot[..MARKER_BYTES - 4]);
        slot[MARKER_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
        file.write_all_at(&slot, (m.epoch % MARKER_SLOTS) * MARKER_SLOT_BYTES).map_err(|e| io_error("write", &path, e))?;
        file.sync_data().map_err(|e| io_error("sync", &path, e))
    }

    /// The markers' file, made at its full size and durable before any marker goes in, so
    /// that writing a marker later changes no metadata.
    fn open_markers(&self, path: &Path) -> Result<File> {
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(|e| io_error("open", path, e))?;
        let size = MARKER_SLOTS * MARKER_SLOT_BYTES;
        if file.metadata().map_err(|e| io_error("stat", path, e))?.len() < size {
            // Zeros, written (not a hole): an overwrite of allocated blocks needs no journal.
            file.write_all_at(&vec![0u8; size as usize], 0).map_err(|e| io_error("write", path, e))?;
            file.sync_all().map_err(|e| io_error("sync", path, e))?;
            sync_dir(&self.dir)?;
        }
        Ok(file)
    }

    /// The complete checkpoints whose markers the store still holds (at most the newest two),
    /// oldest first.
    pub fn markers(&self) -> Result<Vec<Marker>> {
        let path = self.dir.join(MARKERS);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("read", &path, e)),
        };
        let mut out: Vec<Marker> = (0..MARKER_SLOTS as usize)
            .filter_map(|i| bytes.get(i * MARKER_SLOT_BYTES as usize..).and_then(|b| b.get(..MARKER_BYTES)))
            .filter(|slot| {
                &slot[..8] == MARKER_MAGIC && crc32fast::hash(&slot[..MARKER_BYTES - 4]).to_le_bytes() == slot[MARKER_BYTES - 4..]
            })
            .map(|slot| {
                let v = |i: usize| u64::from_le_bytes(slot[8 + 8 * i..16 + 8 * i].try_into().unwrap());
                Marker { epoch: v(0), ranks: v(1), base: v(2) }
            })
            .collect();
        out.sort_by_key(|m| m.epoch);
        Ok(out)
    }

    /// Applies this rank's file of `epoch`: every record goes to `apply(offset, bytes)` after
    /// its checksum is checked. Returns the records applied.
    pub fn read_pages(&self, epoch: u64, apply: &mut dyn FnMut(u64, &[u8]) -> Result<()>) -> Result<u64> {
        let path = self.rank_dir.join(Self::page_file_name(epoch));
        let file = File::open(&path).map_err(|e| io_error("open", &path, e))?;
        let len = file.metadata().map_err(|e| io_error("stat", &path, e))?.len();
        let mut r = BufReader::with_capacity(1 << 20, file);
        let mut head = [0u8; 32];
        r.read_exact(&mut head).map_err(|e| io_error("read", &path, e))?;
        if &head[..8] != MAGIC || u32::from_le_bytes(head[8..12].try_into().unwrap()) != VERSION {
            return Err(corrupt(&path, "not an activerma checkpoint file of this version"));
        }
        let (rank, ep) = (u64::from_le_bytes(head[16..24].try_into().unwrap()), u64::from_le_bytes(head[24..32].try_into().unwrap()));
        if rank != self.rank as u64 || ep != epoch {
            return Err(corrupt(&path, format!("it holds rank {rank}'s checkpoint {ep}")));
        }
        let mut pos = 32u64;
        let mut all = crc32fast::Hasher::new();
        let mut buf = Vec::new();
        let mut records = 0u64;
        while pos + 12 < len {
            let mut rh = [0u8; RECORD_HEADER];
            r.read_exact(&mut rh).map_err(|e| io_error("read", &path, e))?;
            let offset = u64::from_le_bytes(rh[..8].try_into().unwrap());
            let n = u32::from_le_bytes(rh[8..12].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(rh[12..].try_into().unwrap());
            if pos + (RECORD_HEADER + n) as u64 + 12 > len {
                return Err(corrupt(&path, format!("record {records} runs past the end")));
            }
            buf.resize(n, 0);
            r.read_exact(&mut buf).map_err(|e| io_error("read", &path, e))?;
            if crc32fast::hash(&buf) != crc {
                return Err(corrupt(&path, format!("the checksum of the page at heap offset {offset:#x} does not match")));
            }
            all.update(&rh);
            all.update(&buf);
            apply(offset, &buf)?;
            records += 1;
            pos += (RECORD_HEADER + n) as u64;
        }
        let mut tail = [0u8; 12];
        r.read_exact(&mut tail).map_err(|e| io_error("read", &path, e))?;
        if u64::from_le_bytes(tail[..8].try_into().unwrap()) != records
            || u32::from_le_bytes(tail[8..].try_into().unwrap()) != all.finalize()
        {
            return Err(corrupt(&path, "its trailer does not match its records"));
        }
        Ok(records)
    }

    /// Removes this rank's files older than `base` (a newer complete base makes them useless;
    /// the markers' slots bound themselves).
    pub fn prune_before(&self, base: u64) -> Result<()> {
        for e in fs::read_dir(&self.rank_dir).map_err(|e| io_error("list", &self.rank_dir, e))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.strip_suffix(".pages").and_then(|n| n.parse::<u64>().ok()).is_some_and(|ep| ep < base) {
                let _ = fs::remove_file(e.path());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_trip_and_damage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), 3).unwrap();
        let pages: Vec<(u64, Vec<u8>)> = (0..5u64).map(|i| (i * 4096, vec![i as u8 + 1; 4096])).collect();
        s.write_pages(7, true, &mut |f| pages.iter().try_for_each(|(o, d)| f.record(*o, d))).unwrap();
        let mut got = Vec::new();
        let read = s.read_pages(7, &mut |o, d| {
            got.push((o, d.to_vec()));
            Ok(())
        });
        assert_eq!(read.unwrap(), 5);
        assert_eq!(got, pages);
        // One flipped byte in the third page's data is found and named.
        let path = dir.path().join("rank-3").join("0000000007.pages");
        let mut bytes = fs::read(&path).unwrap();
        bytes[32 + 2 * (RECORD_HEADER + 4096) + RECORD_HEADER + 100] ^= 1;
        fs::write(&path, bytes).unwrap();
        let e = s.read_pages(7, &mut |_, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("0x2000") && e.contains("checksum"), "{e}");
    }

    #[test]
    fn only_whole_markers_count_and_pruning_keeps_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), 0).unwrap();
        assert!(s.markers().unwrap().is_empty(), "no markers' file yet: nothing complete");
        let epochs = |s: &Store| s.markers().unwrap().iter().map(|m| m.epoch).collect::<Vec<_>>();
        for ep in 1..=3 {
            s.write_pages(ep, ep == 2, &mut |_| Ok(())).unwrap();
            s.write_marker(Marker { epoch: ep, ranks: 1, base: if ep >= 2 { 2 } else { 1 } }).unwrap();
        }
        // The newest two are kept, with what they say.
        assert_eq!(s.markers().unwrap(), vec![Marker { epoch: 2, ranks: 1, base: 2 }, Marker { epoch: 3, ranks: 1, base: 2 }]);
        // A marker torn by a crash (epoch 4 goes where 2 was) counts as absent; 3 still stands.
        let path = dir.path().join(MARKERS);
        let mut bytes = fs::read(&path).unwrap();
        bytes[8..16].copy_from_slice(&4u64.to_le_bytes());
        fs::write(&path, &bytes).unwrap();
        assert_eq!(epochs(&s), vec![3]);
        // A store opened anew reads the same file, and its markers overwrite slots in place.
        let again = Store::open(dir.path(), 0).unwrap();
        again.write_marker(Marker { epoch: 4, ranks: 1, base: 2 }).unwrap();
        assert_eq!(epochs(&s), vec![3, 4]);
        assert_eq!(fs::metadata(&path).unwrap().len(), MARKER_SLOTS * MARKER_SLOT_BYTES);
        s.prune_before(2).unwrap();
        assert!(s.read_pages(1, &mut |_, _| Ok(())).is_err());
        assert_eq!(s.read_pages(3, &mut |_, _| Ok(())).unwrap(), 0);
    }
}
