//! The learned rerank (`Tuning::learned_rerank`): a linear model over features of the first
//! stage's best `rerank_depth` operations that the stage itself combines only by hand-set
//! products (its score and rank, the lexical and dense evidence apart, coverage, intent,
//! resource and shape). The weights live in `learned.json`, written by
//! `scripts/train-rerank.py` from the features `examples/eval.rs --features` dumps.

use std::sync::OnceLock;

/// The features, in the order of the weights.
pub const FEATURES: [&str; 13] = [
    "stage",
    "stage_rank",
    "lexical",
    "lexical_rank",
    "cosine",
    "cosine_gap",
    "dense_rank",
    "coverage",
    "intent",
    "resource",
    "depth",
    "confident_lexical",
    "unsure_cosine",
];

pub type Features = [f32; FEATURES.len()];

/// The shipped model.
pub struct Model {
    pub weights: Features,
}

#[derive(serde::Deserialize)]
struct File {
    features: Vec<String>,
    weights: Vec<f32>,
}

/// The model in `learned.json`, or `None` (logged once) if it does not fit [`FEATURES`].
pub fn model() -> Option<&'static Model> {
    static MODEL: OnceLock<Option<Model>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let parsed: Result<File, _> = serde_json::from_str(include_str!("learned.json"));
            match parsed {
                Ok(f)
                    if f.features.iter().map(String::as_str).eq(FEATURES)
                        && f.weights.len() == FEATURES.len() =>
                {
                    let mut weights = [0.0; FEATURES.len()];
                    weights.copy_from_slice(&f.weights);
                    Some(Model { weights })
                }
                _ => {
                    tracing::error!("learned.json does not fit the rerank's features; not used");
                    None
                }
            }
        })
        .as_ref()
}

impl Model {
    pub fn score(&self, f: &Features) -> f32 {
        self.weights.iter().zip(f).map(|(w, x)| w * x).sum()
    }
}
