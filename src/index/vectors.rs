//! Operation vectors: one unit vector per indexed operation, scored by dot product against a
//! query vector, and their on-disk cache. A cache file is named by a key over the model's hash
//! and every text that was embedded, so a changed spec or model never reuses stale vectors,
//! and replicas sharing a folder (or a folder made by `apigate index build`) reuse them.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Bumped when vectors change for the same texts (pooling, truncation, the file format's
/// meaning); the key already covers the texts and the model.
pub(crate) const TEXT_VERSION: u32 = 1;

const MAGIC: &[u8; 8] = b"APGVEC01";
const HEADER: usize = 16;

/// Why vectors could not be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    #[error("vector {row} has {got} values, expected {dim}")]
    Dim { row: usize, got: usize, dim: usize },
    #[error(
        "{rows} vectors of {dim} values do not fit {operations} operations and a model of {model_dim} dimensions"
    )]
    Mismatch {
        rows: usize,
        dim: usize,
        operations: usize,
        model_dim: usize,
    },
    #[error("{path}: not a vector file of this apigate version")]
    Format { path: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A matrix of unit vectors, one row per document of the index, in document order; scored
/// from an int8 copy ([`Codes`]).
#[derive(Debug, Clone)]
pub struct Vectors {
    dim: usize,
    data: Vec<f32>,
    codes: Codes,
}

impl PartialEq for Vectors {
    fn eq(&self, other: &Vectors) -> bool {
        self.dim == other.dim && self.data == other.data
    }
}

/// The rows as int8, each with its scale (its largest magnitude / 127): what a query is
/// scored against. A quarter of the f32 rows' bytes (GitHub's 1,223 operations × 256: 313 KB
/// instead of 1.25 MB, which stays in a core's cache), and an integer dot product the
/// compiler turns into SIMD multiply-adds ([`dots_i8`]). A cosine moves by less than 0.01:
/// over the query sets (`scripts/eval-all.sh`) no R@1, R@5 or MRR@10 of dev, extra or fresh
/// changed, blind moved by half a point at most.
#[derive(Debug, Clone, Default)]
struct Codes {
    values: Vec<i8>,
    scales: Vec<f32>,
}

impl Codes {
    fn of(dim: usize, data: &[f32]) -> Codes {
        let mut codes = Codes::default();
        if dim == 0 {
            return codes;
        }
        codes.values.reserve(data.len());
        for row in data.chunks_exact(dim) {
            let (values, scale) = quantize(row);
            codes.values.extend(values);
            codes.scales.push(scale);
        }
        codes
    }
}

/// `v` as int8 values and the scale that turns them back (value × scale ≈ `v`).
fn quantize(v: &[f32]) -> (impl Iterator<Item = i8> + '_, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 && max.is_finite() {
        max / 127.0
    } else {
        1.0
    };
    let values = v
        .iter()
        .map(move |x| (x / scale).round().clamp(-127.0, 127.0) as i8);
    (values, scale)
}

impl Vectors {
    /// Rows of equal length `dim`.
    pub fn new(dim: usize, rows: Vec<Vec<f32>>) -> Result<Vectors, VectorError> {
        let mut data = Vec::with_capacity(rows.len() * dim);
        for (row, v) in rows.into_iter().enumerate() {
            if v.len() != dim {
                return Err(VectorError::Dim {
                    row,
                    got: v.len(),
                    dim,
                });
            }
            data.extend(v);
        }
        Ok(Vectors::of(dim, data))
    }

    fn of(dim: usize, data: Vec<f32>) -> Vectors {
        let codes = Codes::of(dim, &data);
        Vectors { dim, data, codes }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Row `i` (empty past the end).
    pub(crate) fn row(&self, i: usize) -> &[f32] {
        self.data
            .get(i * self.dim..(i + 1) * self.dim)
            .unwrap_or(&[])
    }

    /// Cosine similarity of every row with `query` (a unit vector of the same length; rows
    /// are unit vectors, so this is the dot product), computed on both sides' int8 codes.
    /// Empty when the lengths differ.
    pub(crate) fn scores(&self, query: &[f32]) -> Vec<f32> {
        if query.len() != self.dim || self.dim == 0 {
            return Vec::new();
        }
        let (q, q_scale) = quantize(query);
        let q: Vec<i8> = q.collect();
        let mut dots = vec![0i32; self.codes.scales.len()];
        dots_i8(&self.codes.values, &q, &mut dots);
        dots.iter()
            .zip(&self.codes.scales)
            .map(|(&d, scale)| d as f32 * scale * q_scale)
            .collect()
    }

    /// The file format: magic, dim and rows as little-endian u32, then the values as
    /// little-endian f32.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.data.len() * 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.dim as u32).to_le_bytes());
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        for x in &self.data {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Parses [`Vectors::to_bytes`]; `None` if the bytes are not such a file.
    pub fn from_bytes(bytes: &[u8]) -> Option<Vectors> {
        let header = bytes.get(..HEADER)?;
        if &header[..8] != MAGIC {
            return None;
        }
        let dim = u32::from_le_bytes(header[8..12].try_into().ok()?) as usize;
        let rows = u32::from_le_bytes(header[12..16].try_into().ok()?) as usize;
        let body = &bytes[HEADER..];
        if dim == 0 || body.len() != dim.checked_mul(rows)?.checked_mul(4)? {
            return None;
        }
        let data = body
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Some(Vectors::of(dim, data))
    }
}

/// The dot product of `query` with each row of `rows` (rows of `query.len()` int8 values),
/// into `out`. On a CPU with AVX2 (checked once per call; the result is cached by std) the
/// loop is compiled for it: 16-bit multiply-adds over 32 bytes at a time, about four times the
/// f32 loop it replaced (GitHub's 1,223 operations: ~28 µs against ~110 µs on this project's machine).
fn dots_i8(rows: &[i8], query: &[i8], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: `dots_i8_avx2` needs nothing but AVX2, which the CPU was just found to have.
        unsafe { dots_i8_avx2(rows, query, out) };
        return;
    }
    dots_i8_plain(rows, query, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots_i8_avx2(rows: &[i8], query: &[i8], out: &mut [i32]) {
    dots_i8_plain(rows, query, out);
}

/// Integer sums may be reordered freely, so this loop vectorizes as it is (no lanes written
/// out by hand); 4,096 products of at most 127² fit an i32 many times over.
#[inline(always)]
fn dots_i8_plain(rows: &[i8], query: &[i8], out: &mut [i32]) {
    if query.is_empty() {
        return;
    }
    for (row, dot) in rows.chunks_exact(query.len()).zip(out) {
        *dot = row
            .iter()
            .zip(query)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
    }
}

/// The cache key for the vectors of `texts` under the model with hash `model`.
pub(crate) fn cache_key(model: &str, texts: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(TEXT_VERSION.to_le_bytes());
    h.update(model.as_bytes());
    h.update((texts.len() as u64).to_le_bytes());
    for t in texts {
        h.update((t.len() as u64).to_le_bytes());
        h.update(t.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

/// Where the vectors for `key` live in `dir`.
pub fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.vectors"))
}

/// The cached vectors for `key` in `dir`, if present and sound (`rows` rows). A missing file
/// is `Ok(None)`; an unreadable or damaged one is an error (the caller recomputes).
pub fn load(dir: &Path, key: &str, rows: usize) -> Result<Option<Vectors>, VectorError> {
    let path = path(dir, key);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(VectorError::Io { path, source }),
    };
    match Vectors::from_bytes(&bytes) {
        Some(v) if v.len() == rows => Ok(Some(v)),
        _ => Err(VectorError::Format { path }),
    }
}

/// Writes the vectors for `key` into `dir` (created if needed), atomically: readers see the
/// whole file or none.
pub fn save(dir: &Path, key: &str, vectors: &Vectors) -> Result<PathBuf, VectorError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VectorError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let target = path(dir, key);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    tmp.write_all(&vectors.to_bytes()).map_err(io(tmp.path()))?;
    // Readable by the other replicas and users that share the folder (temp files are 0600).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::Permissions::from_mode(0o644);
        tmp.as_file()
            .set_permissions(mode)
            .map_err(io(tmp.path()))?;
    }
    tmp.as_file().sync_all().map_err(io(tmp.path()))?;
    tmp.persist(&target).map_err(|e| VectorError::Io {
        path: target.clone(),
        source: e.error,
    })?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_scores() {
        let v = Vectors::new(2, vec![vec![1.0, 0.0], vec![0.6, 0.8]]).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(Vectors::from_bytes(&v.to_bytes()), Some(v.clone()));
        let near = |got: Vec<f32>, want: [f32; 2]| {
            got.len() == 2 && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 0.01)
        };
        assert!(near(v.scores(&[0.0, 1.0]), [0.0, 0.8]));
        assert!(near(v.scores(&[0.6, -0.8]), [0.6, -0.28]));
        assert!(v.scores(&[1.0]).is_empty());
        assert!(Vectors::new(2, vec![vec![1.0]]).is_err());
        let mut out = [0; 2];
        dots_i8(&[127, -127, 3, 1, 2, 3], &[127, 127, -2], &mut out);
        assert_eq!(out, [-6, 127 + 2 * 127 - 6]);
    }

    #[test]
    fn int8_scores_follow_the_f32_cosines() {
        // 300 pseudo-random unit vectors of 256 values against one query: every int8 cosine
        // within 0.01 of the f32 one.
        let mut seed = 7u64;
        let mut unit = || {
            let v: Vec<f32> = (0..256)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / n).collect::<Vec<f32>>()
        };
        let rows: Vec<Vec<f32>> = (0..300).map(|_| unit()).collect();
        let query = unit();
        let exact: Vec<f32> = rows
            .iter()
            .map(|r| r.iter().zip(&query).map(|(a, b)| a * b).sum())
            .collect();
        let got = Vectors::new(256, rows).unwrap().scores(&query);
        for (g, e) in got.iter().zip(&exact) {
            assert!((g - e).abs() < 0.01, "{g} vs {e}");
        }
    }

    #[test]
    fn damaged_files_are_rejected() {
        let v = Vectors::new(2, vec![vec![1.0, 0.0]]).unwrap();
        let bytes = v.to_bytes();
        assert!(Vectors::from_bytes(&bytes[..bytes.len() - 1]).is_none());
        assert!(Vectors::from_bytes(b"APGVEC01").is_none());
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path(), "k", 1).unwrap().is_none());
        save(dir.path(), "k", &v).unwrap();
        assert_eq!(load(dir.path(), "k", 1).unwrap(), Some(v));
        // The spec changed size under the same key: not used.
        assert!(load(dir.path(), "k", 2).is_err());
        std::fs::write(path(dir.path(), "k"), b"junk").unwrap();
        assert!(load(dir.path(), "k", 1).is_err());
    }

    #[test]
    fn key_changes_with_model_and_texts() {
        let texts = vec!["a".to_string(), "b".to_string()];
        let k = cache_key("m1", &texts);
        assert_eq!(k, cache_key("m1", &texts));
        assert_ne!(k, cache_key("m2", &texts));
        assert_ne!(k, cache_key("m1", &["ab".to_string()]));
    }
}
