//! A static embedding: one vector per vocabulary token, distilled from a sentence encoder
//! (`examples/distill_static.rs`); a text's vector is the normalised sum of its tokens'
//! vectors (their weights are baked into their lengths). No matrix multiply: a query costs a
//! tokenisation and a few hundred additions per token.
//!
//! The table's file (`static.bin`): `APIGSTA1`, the vocabulary size and the dimension as u32
//! little-endian, one f32 scale per token, then each token's vector as `dim` int8 values
//! (value × scale is the weighted vector).

use std::borrow::Cow;

/// The file's first bytes.
const MAGIC: &[u8; 8] = b"APIGSTA1";
const HEADER: usize = 16;

/// Why a table file is not one.
#[derive(Debug, thiserror::Error)]
#[error("static.bin is not a static embedding table: {0}")]
pub struct TableError(&'static str);

/// The vocabulary size and dimension a table's header gives, once its magic, their range and
/// the file's length agree.
pub(crate) fn check(bytes: &[u8]) -> Result<(usize, usize), TableError> {
    let header = bytes.get(..HEADER).ok_or(TableError("too short"))?;
    if &header[..8] != MAGIC {
        return Err(TableError("wrong magic"));
    }
    let word = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&header[at..at + 4]);
        u32::from_le_bytes(w) as usize
    };
    let (vocab, dim) = (word(8), word(12));
    if dim == 0 || dim > 4096 || vocab > 1 << 20 {
        return Err(TableError("implausible size"));
    }
    if bytes.len() != HEADER + 4 * vocab + vocab * dim {
        return Err(TableError("length does not match its header"));
    }
    Ok((vocab, dim))
}

/// The token vectors, read in place from the file's bytes (the built-in table stays in the
/// binary's read-only data).
pub(crate) struct StaticModel {
    dim: usize,
    scales: Vec<f32>,
    data: Cow<'static, [u8]>,
}

impl StaticModel {
    /// Checks `bytes` and keeps them.
    pub(crate) fn parse(bytes: Cow<'static, [u8]>) -> Result<StaticModel, TableError> {
        let (vocab, dim) = check(&bytes)?;
        let data_at = HEADER + 4 * vocab;
        let scales = bytes[HEADER..data_at]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect::<Vec<_>>();
        if scales.iter().any(|s| !s.is_finite()) {
            return Err(TableError("a scale is not finite"));
        }
        let data = match bytes {
            Cow::Borrowed(b) => Cow::Borrowed(&b[data_at..]),
            Cow::Owned(mut b) => {
                b.drain(..data_at);
                Cow::Owned(b)
            }
        };
        Ok(StaticModel { dim, scales, data })
    }

    pub(crate) fn dim(&self) -> usize {
        self.dim
    }

    /// The unit vector of a text given as token ids (ids past the table count for nothing);
    /// zeros when no token has a vector.
    pub(crate) fn embed(&self, ids: &[u32]) -> Vec<f32> {
        let mut sum = vec![0f32; self.dim];
        for &id in ids {
            let id = id as usize;
            let Some(&scale) = self.scales.get(id) else {
                continue;
            };
            let row = &self.data[id * self.dim..(id + 1) * self.dim];
            for (s, &q) in sum.iter_mut().zip(row) {
                *s += f32::from(q as i8) * scale;
            }
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 1e-12 {
            sum.iter_mut().for_each(|x| *x /= norm);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(scales: &[f32], rows: &[&[i8]]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend((scales.len() as u32).to_le_bytes());
        b.extend((rows[0].len() as u32).to_le_bytes());
        scales.iter().for_each(|s| b.extend(s.to_le_bytes()));
        rows.iter()
            .for_each(|r| b.extend(r.iter().map(|&q| q as u8)));
        b
    }

    #[test]
    fn a_text_is_the_normalised_weighted_sum_of_its_tokens() {
        let m = StaticModel::parse(Cow::Owned(table(&[1.0, 2.0], &[&[1, 0], &[0, 1]]))).unwrap();
        // 1·[1,0] + 2·[0,1] = [1,2], normalised.
        let v = m.embed(&[0, 1]);
        let n = 5f32.sqrt();
        assert!(
            (v[0] - 1.0 / n).abs() < 1e-6 && (v[1] - 2.0 / n).abs() < 1e-6,
            "{v:?}"
        );
        // Unknown ids count for nothing; nothing known gives zeros, not NaN.
        assert_eq!(m.embed(&[7, 0]), vec![1.0, 0.0]);
        assert_eq!(m.embed(&[9]), vec![0.0, 0.0]);
    }

    #[test]
    fn a_damaged_table_is_refused() {
        let good = table(&[1.0], &[&[1, 2]]);
        assert!(StaticModel::parse(Cow::Owned(good.clone())).is_ok());
        for bad in [
            good[..good.len() - 1].to_vec(),
            good[..10].to_vec(),
            [b"XXXXXXXX".as_slice(), &good[8..]].concat(),
            table(&[f32::NAN], &[&[1, 2]]),
        ] {
            assert!(StaticModel::parse(Cow::Owned(bad)).is_err());
        }
    }
}
