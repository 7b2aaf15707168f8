//! The UMEM: the packet buffer memory an AF_XDP socket shares with the kernel, cut into
//! 4 KiB frames, on 2 MiB hugepages when the system has some free and on ordinary pages
//! otherwise (the log says which, and why).
//!
//! Frame size 4096: a 2048-byte path MTU plus headers fits in one frame. Each frame starts
//! with the kernel's 256 bytes of XDP headroom, so a frame holds at most [`FRAME_CAPACITY`]
//! bytes of packet. The kernel takes no larger frame: it refuses a chunk size above the page
//! size with `EINVAL`, on hugepages too (measured on 6.18). A 4096-byte path MTU therefore
//! takes AF_XDP multi-buffer: a packet spans up to [`MAX_PARTS`] frames, and with it on, the
//! transmit frames come in pairs of neighbours so that a packet is written in one piece
//! ([`crate::xsk`] says how it goes on the rings).
//!
//! Nothing here is on the per-packet path: this is set-up.

use std::fmt;
use std::num::NonZeroU32;

use tracing::info;
use xsk_rs::FrameDesc;
use xsk_rs::config::{FrameSize, QueueSize, UmemConfig as XskUmemConfig};

/// Bytes per UMEM frame.
pub const FRAME_SIZE: u32 = 4096;
/// The headroom the kernel keeps at the start of every frame (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// The most packet bytes one frame holds (a whole frame minus the XDP headroom).
pub const FRAME_CAPACITY: usize = (FRAME_SIZE - XDP_HEADROOM) as usize;
// A 2048-byte path MTU fits one frame: Ethernet + 802.1Q + IPv6 + UDP + BTH + RETH + 2048
// bytes of payload + ICRC.
const _: () = assert!(14 + 4 + 40 + 8 + 12 + 16 + 2048 + 4 <= FRAME_CAPACITY);
/// The most frames one packet spans with multi-buffer on.
pub const MAX_PARTS: usize = 2;
/// The most packet bytes a port with multi-buffer receives or sends in one packet.
pub const MULTI_BUFFER_CAPACITY: usize = MAX_PARTS * FRAME_CAPACITY;
// A 4096-byte path MTU fits two frames, with the largest headers (`MAX_FRAME` of the
// transport: Ethernet + 802.1Q, IPv6, UDP, BTH + AtomicETH, pad, ICRC).
const _: () = assert!(18 + 40 + 8 + 40 + 4096 + 3 + 4 <= MULTI_BUFFER_CAPACITY);

/// Rings that user space produces into (fill, TX) and the completion ring have this many
/// slots per frame. The kernel publishes how far it has consumed a ring lazily (when the
/// entries it cached run out, or at the end of a NAPI poll), so a ring with one slot per
/// frame can look full to user space for a while after the kernel took the frames.
pub(crate) const RING_SLACK: u32 = 2;

/// The hugepage size the UMEM asks for.
pub const HUGEPAGE_SIZE: usize = 2 << 20;

/// Whether to put the UMEM on hugepages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HugepagePolicy {
    /// Hugepages when the pool has enough free ones, ordinary pages otherwise.
    #[default]
    Auto,
    /// Ordinary pages.
    Never,
    /// Hugepages or an error.
    Required,
}

/// What the UMEM ended up on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// 2 MiB hugepages.
    Hugepages,
    /// Ordinary 4 KiB pages, and why not hugepages.
    Pages {
        /// Why not hugepages, for the start-up log.
        reason: String,
    },
}

impl Backing {
    /// Whether the UMEM is on hugepages.
    pub fn is_hugepages(&self) -> bool {
        matches!(self, Backing::Hugepages)
    }
}

impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backing::Hugepages => f.write_str("2 MiB hugepages"),
            Backing::Pages { reason } => write!(f, "4 KiB pages ({reason})"),
        }
    }
}

/// How big to make a UMEM.
#[derive(Clone, Copy, Debug)]
pub struct UmemConfig {
    /// Frames for receiving: the RX ring has this many slots, the fill ring twice as many. A
    /// power of two.
    pub rx_frames: u32,
    /// Frames for transmitting: the TX and completion rings have twice as many slots. A power
    /// of two.
    pub tx_frames: u32,
    /// Whether to use hugepages.
    pub hugepages: HugepagePolicy,
    /// Whether packets may span [`MAX_PARTS`] frames: each transmit frame then takes two
    /// neighbouring UMEM frames.
    pub multi_buffer: bool,
}

impl UmemConfig {
    /// UMEM frames per transmit frame: two with multi-buffer, one without.
    pub fn tx_parts(&self) -> u32 {
        if self.multi_buffer {
            MAX_PARTS as u32
        } else {
            1
        }
    }

    /// UMEM frames for transmitting.
    pub fn tx_chunks(&self) -> u32 {
        self.tx_frames * self.tx_parts()
    }
}

/// What went wrong making a UMEM.
#[derive(Debug, thiserror::Error)]
pub enum UmemError {
    /// A size that cannot work.
    #[error("invalid UMEM configuration: {0}")]
    Config(String),
    /// Hugepages were required and could not be had.
    #[error(
        "the UMEM needs {pages} free 2 MiB hugepages and could not get them ({reason}); reserve \
         some with `echo N > /proc/sys/vm/nr_hugepages` or allow ordinary pages"
    )]
    NoHugepages {
        /// Pages needed.
        pages: usize,
        /// What failed.
        reason: String,
    },
    /// The kernel refused the UMEM.
    #[error("creating the UMEM ({bytes} bytes on {on}) failed: {reason}")]
    Create {
        /// Its size.
        bytes: usize,
        /// "hugepages" or "pages".
        on: &'static str,
        /// What xsk-rs/the kernel said.
        reason: String,
    },
}

/// A UMEM: the memory and its fill and completion rings (the rings are handed out when the
/// first socket binds, see [`crate::xsk`]).
pub(crate) struct Umem {
    pub(crate) inner: xsk_rs::Umem,
    /// Every frame of the UMEM, as descriptors: the first `rx_frames` are for receiving,
    /// the rest (`tx_chunks`) for transmitting.
    pub(crate) frames: Vec<FrameDesc>,
    pub(crate) backing: Backing,
    pub(crate) config: UmemConfig,
}

impl fmt::Debug for Umem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Umem")
            .field("frames", &self.frames.len())
            .field("backing", &self.backing)
            .field("config", &self.config)
            .finish()
    }
}

impl Umem {
    /// Maps and registers a UMEM of `rx_frames + tx_frames` frames.
    pub(crate) fn new(config: UmemConfig) -> Result<Umem, UmemError> {
        for (name, n) in [
            ("rx_frames", config.rx_frames),
            ("tx_frames", config.tx_frames),
        ] {
            if !n.is_power_of_two() || n < 64 {
                return Err(UmemError::Config(format!(
                    "{name} = {n}: must be a power of two, at least 64"
                )));
            }
        }
        let frame_count = config.rx_frames + config.tx_chunks();
        let bytes = frame_count as usize * FRAME_SIZE as usize;
        let pages = bytes.div_ceil(HUGEPAGE_SIZE);

        let (inner, frames, backing) = match config.hugepages {
            HugepagePolicy::Never => {
                let (inner, frames) = create(&config, frame_count, false)?;
                (
                    inner,
                    frames,
                    Backing::Pages {
                        reason: "hugepages turned off".into(),
                    },
                )
            }
            HugepagePolicy::Required => {
                let (inner, frames) =
                    create(&config, frame_count, true).map_err(|e| UmemError::NoHugepages {
                        pages,
                        reason: e.to_string(),
                    })?;
                (inner, frames, Backing::Hugepages)
            }
            HugepagePolicy::Auto => match create(&config, frame_count, true) {
                Ok((inner, frames)) => (inner, frames, Backing::Hugepages),
                Err(e) => {
                    let reason = format!(
                        "{pages} hugepages of 2 MiB wanted, {} free: {e}",
                        free_hugepages().map_or_else(|| "unknown".into(), |n| n.to_string())
                    );
                    let (inner, frames) = create(&config, frame_count, false)?;
                    (inner, frames, Backing::Pages { reason })
                }
            },
        };
        info!("umem: {frame_count} frames of {FRAME_SIZE} bytes ({bytes} bytes) on {backing}");
        Ok(Umem {
            inner,
            frames,
            backing,
            config,
        })
    }
}

fn create(
    config: &UmemConfig,
    frame_count: u32,
    hugepages: bool,
) -> Result<(xsk_rs::Umem, Vec<FrameDesc>), UmemError> {
    let bytes = frame_count as usize * FRAME_SIZE as usize;
    let on = if hugepages { "hugepages" } else { "pages" };
    let error = |reason: String| UmemError::Create { bytes, on, reason };
    let size = |n: u32| QueueSize::new(n).map_err(|e| error(e.to_string()));
    let umem_config = XskUmemConfig::builder()
        .frame_size(FrameSize::new(FRAME_SIZE).map_err(|e| error(e.to_string()))?)
        .fill_queue_size(size(config.rx_frames * RING_SLACK)?)
        .comp_queue_size(size(config.tx_chunks() * RING_SLACK)?)
        .frame_headroom(0)
        .build()
        .map_err(|e| error(e.to_string()))?;
    let count = NonZeroU32::new(frame_count).ok_or_else(|| error("no frames".into()))?;
    xsk_rs::Umem::new(umem_config, count, hugepages).map_err(|e| error(crate::error_chain(&e)))
}

/// Free pages in the kernel's 2 MiB hugepage pool.
fn free_hugepages() -> Option<u64> {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()?
        .trim()
        .parse()
        .ok()
}
