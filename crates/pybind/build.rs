//! Fingerprint the engine sources so campaign runs made by a different engine build
//! get different content addresses (a cached run is only reused by the same engine).

use std::fs;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") || p.file_name().is_some_and(|n| n == "Cargo.toml") {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in ["netunits", "aqm", "netsim"] {
        let d = root.join(krate);
        println!("cargo:rerun-if-changed={}", d.join("src").display());
        println!("cargo:rerun-if-changed={}", d.join("Cargo.toml").display());
        collect(&d.join("src"), &mut files);
        files.push(d.join("Cargo.toml"));
    }
    files.sort();
    // FNV-1a 64 over (relative path, contents) of every source file.
    let mut h: u64 = 0xcbf29ce484222325;
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f).to_string_lossy().into_owned();
        for b in rel.bytes().chain(fs::read(f).unwrap_or_default()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    println!("cargo:rustc-env=FAIRLAB_ENGINE_HASH={h:016x}");
}
