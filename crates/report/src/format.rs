//! How numbers read in the report: three significant digits in tables and readings, compact
//! tick labels on the plots. One place, so the page, the summary, the plots and the comparison
//! print the same number the same way.

/// Three significant digits without an exponent for everyday magnitudes ("0.0612", "2.10",
/// "47.9", "12345"); an exponent only below 0.0001 or from 10^9 up.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor();
    if !(-4.0..9.0).contains(&mag) {
        return format!("{v:.2e}");
    }
    let decimals = (2.0 - mag).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// A value with its unit: ratios ("x") as "2.10×", the rest as "0.061 us".
pub fn value(v: f64, unit: &str) -> String {
    match unit {
        "x" => format!("{}×", num(v)),
        "" => num(v),
        u => format!("{} {u}", num(v)),
    }
}

/// Tick labels: short ("8", "1000", "10k", "1M", "0.5"), as an axis has little room.
pub fn tick(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    // Drop the trailing zeros "2.50" would carry: ticks are round numbers.
    let mut text = num(scaled);
    if text.contains('.') && !text.contains('e') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    text + suffix
}

/// "label (unit)", or the label alone when the axis has no unit.
pub fn axis_label(label: &str, unit: &str) -> String {
    if unit.is_empty() {
        label.to_string()
    } else {
        format!("{label} ({unit})")
    }
}

/// A change from `old` to `new` in percent, signed ("+50.0 %", "-1.0 %"); "—" from zero.
pub fn change(old: f64, new: f64) -> String {
    if old == 0.0 {
        return if new == 0.0 { "0 %".into() } else { "—".into() };
    }
    format!("{:+.1} %", (new - old) / old.abs() * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(num(0.0612), "0.0612");
        assert_eq!(num(2.1), "2.10");
        assert_eq!(num(47.94), "47.9");
        assert_eq!(num(12345.0), "12345");
        assert_eq!(num(1e-6), "1.00e-6");
        assert_eq!(value(2.1, "x"), "2.10×");
        assert_eq!(value(0.061, "us"), "0.0610 us");
        assert_eq!(tick(1_048_576.0), "1.05M");
        assert_eq!(tick(1000.0), "1000");
        assert_eq!(tick(10000.0), "10k");
        assert_eq!(tick(0.5), "0.5");
        assert_eq!(change(2.0, 3.0), "+50.0 %");
        assert_eq!(change(0.0, 1.0), "—");
        assert_eq!(axis_label("latency", "us"), "latency (us)");
    }
}
