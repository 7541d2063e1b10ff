//! armci.h / message.h / armcix.h and the library must not drift apart: every function a header declares
//! is exported (`#[no_mangle]`, directly or through the values/message macros), and every
//! export is declared. Source parsing, not the built .so: `cargo test` does not build the
//! cdylib, and the names are all that can drift.

use std::collections::BTreeSet;
use std::path::Path;

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = rest[i..].find("*/").map_or("", |j| &rest[i + j + 2..]);
    }
    out.push_str(rest);
    out.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

fn ident_before(s: &str) -> String {
    let t = s.trim_end();
    let start = t.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
    t[start..].to_string()
}

/// Names of the functions the header declares: statements with a parameter list that are not
/// typedefs, enums or preprocessor lines.
fn declared(header: &str) -> BTreeSet<String> {
    let text: String = strip_comments(header).lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n");
    let mut names = BTreeSet::new();
    for stmt in text.split(';') {
        let stmt = stmt.trim();
        // A statement after a closing brace (end of a struct/enum/extern "C" block).
        let stmt = stmt.rsplit('}').next().unwrap().trim();
        if stmt.starts_with("typedef") || stmt.starts_with("enum") || stmt.starts_with("struct") || !stmt.contains('(') {
            continue;
        }
        let name = ident_before(&stmt[..stmt.find('(').unwrap()]);
        names.insert(name);
    }
    names
}

/// Names the library exports: `#[no_mangle]` fns, the names passed to the macros that
/// generate exported fns, and the profiling names (`PARMCI_X => ARMCI_X(..)` in profiling.rs).
fn exported(src: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for e in std::fs::read_dir(src).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim();
            if t == "#[no_mangle]" {
                let f = lines[i + 1..].iter().find(|x| x.contains("fn ")).unwrap();
                let after = &f[f.find("fn ").unwrap() + 3..];
                let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.starts_with('$') && !name.is_empty() {
                    names.insert(name);
                }
            }
            if let Some((name, _)) = t.split_once(" => ") {
                if name.starts_with("PARMCI_") || name.starts_with("parmci_") {
                    names.insert(name.to_string());
                }
            }
            for mac in ["put_value!(", "get_value!(", "gop_export!("] {
                if let Some(args) = t.strip_prefix(mac) {
                    for arg in args.split(',') {
                        let a = arg.trim();
                        if a.starts_with("ARMCI_") || a.starts_with("armci_") {
                            names.insert(a.to_string());
                        }
                    }
                }
            }
        }
    }
    names
}

#[test]
fn headers_and_exports_agree() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut decl = declared(&std::fs::read_to_string(dir.join("include/armci.h")).unwrap());
    decl.extend(declared(&std::fs::read_to_string(dir.join("include/message.h")).unwrap()));
    decl.extend(declared(&std::fs::read_to_string(dir.join("include/armcix.h")).unwrap()));
    let exp = exported(&dir.join("src"));
    assert!(decl.len() > 90, "the parser found only {} declarations: {decl:?}", decl.len());
    let missing: Vec<_> = decl.difference(&exp).collect();
    let undeclared: Vec<_> = exp.difference(&decl).collect();
    assert!(missing.is_empty(), "declared in a header but not exported: {missing:?}");
    assert!(undeclared.is_empty(), "exported but not declared in a header: {undeclared:?}");
}

#[test]
fn the_layouts_programs_allocate_match_the_header() {
    // armci_hdl_t: two ints; armci_giov_t: two pointers and two ints; ARMCI_Group: two slots,
    // two pointers, two ints (the sizes C computes for the header's structs on LP64).
    assert_eq!(std::mem::size_of::<armci::ArmciHdl>(), 8);
    assert_eq!(std::mem::size_of::<armci::ArmciGiov>(), 24);
    assert_eq!(std::mem::size_of::<armci::ArmciGroup>(), 40);
}
