//! The sentence encoder's side of the static embedding apigate ranks with by default
//! (`models/static-api`, made by `scripts/train-static.py`): what `models/minilm-api` answers
//! for every vocabulary token alone (`[CLS] token [SEP]`, mean-pooled, unit length: its vector
//! for a one-token query), and, with `--texts`, for whole texts (the targets the static
//! vectors are trained to reproduce). Both are written as little-endian f32 rows.
//!
//!   cargo run --example distill_static -- --out /var/tmp/static-raw.bin           (~2 min)
//!   cargo run --example distill_static -- --texts T.jsonl --out /var/tmp/teacher.bin
//!
//! `--model DIR` takes another encoder folder (default models/minilm-api).

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use apigate::index::Embedder;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

/// Tokens per forward pass when embedding the vocabulary (each input is three tokens).
const BATCH: usize = 512;

fn main() -> anyhow::Result<()> {
    let mut model = PathBuf::from("models/minilm-api");
    let mut out: Option<PathBuf> = None;
    let mut texts: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--model" => model = args.next().context("--model DIR")?.into(),
            "--out" => out = Some(args.next().context("--out FILE")?.into()),
            "--texts" => texts = Some(args.next().context("--texts FILE")?.into()),
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let out = out.context("--out FILE is required")?;
    let rows = match texts {
        Some(file) => text_vectors(&model, &file)?,
        None => token_vectors(&model)?,
    };
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out)?);
    for x in &rows {
        w.write_all(&x.to_le_bytes())?;
    }
    w.flush()?;
    eprintln!("wrote {} ({} values)", out.display(), rows.len());
    Ok(())
}

/// Each vocabulary token's unit vector as the encoder answers for `[CLS] token [SEP]`.
fn token_vectors(model: &std::path::Path) -> anyhow::Result<Vec<f32>> {
    let config: Config = serde_json::from_slice(&std::fs::read(model.join("config.json"))?)?;
    let weights = std::fs::read(model.join("model.safetensors"))?;
    let device = Device::Cpu;
    let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
    let bert = BertModel::load(vb, &config)?;
    let tokenizer = tokenizers::Tokenizer::from_file(model.join("tokenizer.json"))
        .map_err(|e| anyhow::anyhow!("tokenizer: {e}"))?;
    let vocab = tokenizer.get_vocab_size(true);
    let (cls, sep) = (
        tokenizer.token_to_id("[CLS]").context("[CLS]")?,
        tokenizer.token_to_id("[SEP]").context("[SEP]")?,
    );
    let hidden = config.hidden_size;
    let mut raw = vec![0f32; vocab * hidden];
    let started = std::time::Instant::now();
    for start in (0..vocab).step_by(BATCH) {
        let end = (start + BATCH).min(vocab);
        let ids: Vec<u32> = (start..end).flat_map(|id| [cls, id as u32, sep]).collect();
        let ids = Tensor::from_vec(ids, (end - start, 3), &device)?;
        let types = ids.zeros_like()?;
        let mask = types.ones_like()?;
        let pooled = bert.forward(&ids, &types, Some(&mask))?.mean(1)?;
        let norms = pooled
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12, f64::MAX)?;
        let pooled = pooled.broadcast_div(&norms)?.to_vec2::<f32>()?;
        for (i, row) in pooled.into_iter().enumerate() {
            raw[(start + i) * hidden..(start + i + 1) * hidden].copy_from_slice(&row);
        }
        eprint!(
            "\r{end}/{vocab} tokens, {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    eprintln!();
    Ok(raw)
}

/// The encoder's unit vector for each text of `file` (one JSON string per line), in order.
fn text_vectors(model: &std::path::Path, file: &std::path::Path) -> anyhow::Result<Vec<f32>> {
    let embedder = Embedder::load(model)?;
    let texts: Vec<String> = std::fs::read_to_string(file)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut rows = vec![Vec::new(); texts.len()];
    let started = std::time::Instant::now();
    for (n, chunk) in order.chunks(32).enumerate() {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
        for (&i, v) in chunk.iter().zip(embedder.embed_batch(&batch)?) {
            rows[i] = v;
        }
        eprint!(
            "\r{}/{} texts, {:.0} s",
            (n + 1) * 32,
            texts.len(),
            started.elapsed().as_secs_f64()
        );
    }
    eprintln!();
    Ok(rows.concat())
}
