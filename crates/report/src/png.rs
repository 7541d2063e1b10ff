//! The PNG beside each SVG: the same SVG rendered by resvg, so the two never differ in what
//! they show. For people and tools that take no SVG (a chat, an issue, a slide).
//!
//! Text needs a font: the system's are loaded once per report. The SVG names the generic
//! "sans-serif", which fontdb maps to Arial unless told otherwise, so the generic families are
//! pointed at a font that is actually installed (DejaVu Sans on Debian). Without any font the
//! PNG is still written, without its text, and the report says so.

use resvg::tiny_skia;
use resvg::usvg::{self, fontdb};
use std::sync::Arc;

/// Fonts preferred for the plots' text, best first; else whatever sans face is installed.
const PREFERRED: [&str; 4] = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"];

pub struct Fonts {
    db: Arc<fontdb::Database>,
    /// The family "sans-serif" resolves to; None when the system has no font at all.
    pub family: Option<String>,
}

impl Fonts {
    /// The system's fonts (fontconfig's directories and the usual ones).
    pub fn system() -> Fonts {
        let mut db = fontdb::Database::new();
        db.load_system_fonts();
        let families: Vec<String> = db.faces().flat_map(|f| f.families.iter().map(|(name, _)| name.clone())).collect();
        let family = PREFERRED
            .iter()
            .find(|p| families.iter().any(|f| f == *p))
            .map(|p| p.to_string())
            .or_else(|| families.iter().find(|f| f.contains("Sans") && !f.contains("Mono")).cloned())
            .or_else(|| families.first().cloned());
        if let Some(f) = &family {
            db.set_sans_serif_family(f.clone());
            db.set_serif_family(f.clone());
        }
        Fonts { db: Arc::new(db), family }
    }
}

/// Renders `svg` at its own size to PNG bytes on a white background.
pub fn png(svg: &str, fonts: &Fonts) -> Result<Vec<u8>, String> {
    let mut opt = usvg::Options { fontdb: fonts.db.clone(), ..usvg::Options::default() };
    if let Some(f) = &fonts.family {
        opt.font_family = f.clone();
    }
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("png: the SVG does not parse: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("png: empty picture")?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::identity(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| format!("png: {e}"))
}
