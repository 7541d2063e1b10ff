//! The channel that carries one of a rank's output streams to the launcher: a pipe, or a
//! pseudo-terminal when the launcher's own stream is a terminal.
//!
//! Why a pseudo-terminal then: before the launcher forwarded output, ranks wrote to the user's
//! terminal directly, and C's stdio line-buffers a terminal but block-buffers a pipe. Through a
//! plain pipe, a C rank's printf would only show when its buffer fills or the rank exits (and
//! be lost if it crashes). A raw pseudo-terminal keeps what a rank sees (isatty, line
//! buffering, the window size) as it was, while passing its bytes through unchanged.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Stdio;

pub struct Channel {
    /// The end the rank writes to (becomes its fd 1 or 2).
    pub rank_end: Stdio,
    /// The end the launcher reads from, non-blocking.
    pub launcher_end: OwnedFd,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn set_flags(fd: RawFd, fd_flags: libc::c_int, status_flags: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; no memory is passed.
    unsafe {
        let f = check(libc::fcntl(fd, libc::F_GETFD))?;
        check(libc::fcntl(fd, libc::F_SETFD, f | fd_flags))?;
        let f = check(libc::fcntl(fd, libc::F_GETFL))?;
        check(libc::fcntl(fd, libc::F_SETFL, f | status_flags))?;
    }
    Ok(())
}

/// A channel for a rank stream that the launcher writes on to `launcher_fd` (1 or 2).
pub fn for_stream(launcher_fd: RawFd) -> io::Result<Channel> {
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(launcher_fd) } == 1 {
        pseudo_terminal(launcher_fd)
    } else {
        pipe()
    }
}

fn pipe() -> io::Result<Channel> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array. CLOEXEC: no other rank may hold a
    // write end, or the launcher would never see end-of-file when this rank exits.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors are fresh and ours alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    set_flags(read.as_raw_fd(), 0, libc::O_NONBLOCK)?;
    Ok(Channel { rank_end: Stdio::from(write), launcher_end: read })
}

fn pseudo_terminal(launcher_fd: RawFd) -> io::Result<Channel> {
    let (mut leader, mut follower) = (0, 0);
    // SAFETY: winsize is plain data; TIOCGWINSZ fills it in.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: as above; on failure the size is left unset.
    let size_ptr =
        if unsafe { libc::ioctl(launcher_fd, libc::TIOCGWINSZ, &mut size) } == 0 { &mut size as *mut _ } else { std::ptr::null_mut() };
    // SAFETY: openpty writes two descriptors; the name buffer may be null; the terminal
    // settings are set below.
    check(unsafe { libc::openpty(&mut leader, &mut follower, std::ptr::null_mut(), std::ptr::null(), size_ptr) })?;
    // SAFETY: both descriptors are fresh and ours alone.
    let (leader, follower) = unsafe { (OwnedFd::from_raw_fd(leader), OwnedFd::from_raw_fd(follower)) };
    // Raw: no newline translation, no echo, no special characters: bytes pass unchanged.
    // SAFETY: termios is plain data, filled by tcgetattr before use.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        check(libc::tcgetattr(follower.as_raw_fd(), &mut t))?;
        libc::cfmakeraw(&mut t);
        check(libc::tcsetattr(follower.as_raw_fd(), libc::TCSANOW, &t))?;
    }
    set_flags(leader.as_raw_fd(), libc::FD_CLOEXEC, libc::O_NONBLOCK)?;
    set_flags(follower.as_raw_fd(), libc::FD_CLOEXEC, 0)?;
    Ok(Channel { rank_end: Stdio::from(follower), launcher_end: leader })
}
