//! The ranking knobs ([`Tuning`]): what production uses ([`Tuning::default`]), and how
//! `apigate eval --set NAME=VALUE` changes them for a measurement ([`Tuning::with_settings`]
//! deserializes the settings over the current values).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// How many lexical fields there are, and so field boosts (`FIELD_NAMES`).
pub const FIELD_COUNT: usize = 6;

/// Ranking knobs. [`Tuning::default`] is what production uses; eval can switch ideas off to
/// measure what each contributes. Ideas that were measured and dropped (BENCHMARKS.md,
/// "Retrieval") are not knobs any more: the commit named there still has them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tuning {
    /// Vocabulary alternatives (`vocab`) join the user's words.
    #[serde(deserialize_with = "flag")]
    pub synonyms: bool,
    /// Weight of a vocabulary alternative relative to the user's own words.
    pub synonym_weight: f32,
    /// Score multiplier for a full match of the method intent: `1 + intent_boost * fit`.
    pub intent_boost: f32,
    /// Score multiplier for deprecated operations.
    pub deprecated_factor: f32,
    /// Multiplier `1 + shape_boost * fit` for the path shape the query implies: creating and
    /// listing (plural nouns, "all", "which") act on collections (`/pets`), updating and
    /// deleting on items (`/pets/{id}`).
    pub shape_boost: f32,
    /// Score divisor `1 + depth_penalty * segments`: sub-resources rank a little below the
    /// resource itself.
    pub depth_penalty: f32,
    /// Coordination: scores are multiplied by `(matched concepts / concepts) ^ coord`, so an
    /// operation that covers more of the query beats one that matches a single word often.
    pub coord: f32,
    /// In a pooled index, scores are multiplied by `(spec's strength / best strength) ^
    /// spec_affinity`, where a spec's strength is the mean of its five best scores: the API
    /// that answers the query best as a whole lends weight to its operations. No effect with
    /// one spec.
    pub spec_affinity: f32,
    /// Field boosts: summary, operationId, path, tags (with the API's title), description,
    /// parameters. 0 leaves a field out of the search.
    pub fields: [f32; FIELD_COUNT],
    /// Words are stemmed, in the index and in the query.
    #[serde(deserialize_with = "flag")]
    pub stemming: bool,
    /// Vocabulary alternatives are looked up in the first this-many fields only (the short,
    /// precise ones); the user's own words in all of them.
    pub alternative_fields: usize,
    /// A (term, field) pair found in more than this share of documents is not searched
    /// (coverage still counts it), in indexes of more than `SMALL_INDEX_DOCS` operations.
    pub common_df: f32,
    /// Hybrid ranking: `(1 - w) * lexical / best lexical + w * cosine`. 1 ranks by the
    /// embedding alone.
    pub dense_weight: f32,
    /// The dense weight in a pooled index (several APIs): a query there must first find the
    /// right API, which their words tell better than a static model's cosines.
    pub pooled_dense_weight: f32,
    /// Dense candidates: the this-many operations closest to the query (the others get no
    /// dense score).
    pub dense_candidates: usize,
    /// Spec affinity: a spec's strength is the mean of its this-many best scores.
    pub affinity_top: usize,
    /// Spec affinity: a spec's strength is divided by `operations ^ affinity_size` (a large
    /// API has more chances of a strong match by accident).
    pub affinity_size: f32,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            synonyms: true,
            synonym_weight: 0.8,
            intent_boost: 0.5,
            deprecated_factor: 0.9,
            shape_boost: 0.1,
            depth_penalty: 0.05,
            coord: 0.5,
            spec_affinity: 1.0,
            fields: [2.5, 2.0, 1.5, 1.0, 0.7, 0.4],
            stemming: true,
            alternative_fields: 6,
            common_df: 0.5,
            dense_weight: 0.45,
            pooled_dense_weight: 0.45,
            dense_candidates: 50,
            affinity_top: 5,
            affinity_size: 0.05,
        }
    }
}

impl Tuning {
    /// These knobs with the dense weight `w` for one spec and for pooled ones alike
    /// (`--dense-weight`; `1.0`: meaning only).
    pub fn with_dense_weight(self, w: f32) -> Tuning {
        Tuning {
            dense_weight: w,
            pooled_dense_weight: w,
            ..self
        }
    }

    /// The defaults of the hybrid ranker with the built-in static model (`static-api`): its
    /// cosines sit on another scale than the encoder's, and a sweep of the knobs
    /// (BENCHMARKS.md, "The fusion's knobs for the static model") found more concept coverage
    /// and a stronger discount of large APIs' affinity ranking pooled APIs better (R@1 0.558 →
    /// 0.589 on dev + extra + fresh, 0.392 → 0.416 blind), one spec alone unchanged; a lower
    /// dense weight in pooled indexes, where the APIs' words tell them apart better than the
    /// static cosines, another 0.589 → 0.602 (blind unchanged). The same values make the
    /// encoder's ranking worse, so they are the static model's only.
    pub fn static_model() -> Tuning {
        Tuning {
            coord: 0.75,
            affinity_size: 0.3,
            pooled_dense_weight: 0.4,
            ..Tuning::default()
        }
    }
}

/// Why `NAME=VALUE` settings could not be applied.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum TuningError {
    #[error("{0:?}: expected NAME=VALUE")]
    NotASetting(String),
    #[error("{0}: there are {FIELD_COUNT} field boosts, fields.0 to fields.{last}", last = FIELD_COUNT - 1)]
    NoSuchField(String),
    #[error(
        "{0}: a ranking experiment that was measured, dropped and removed from the code \
         (BENCHMARKS.md, \"Retrieval\", names the commit that still has it)"
    )]
    Dropped(String),
    /// An unknown knob, or a value of the wrong type (serde's message says which).
    #[error("ranking knobs: {0}")]
    Invalid(String),
}

/// The knobs of the experiments that were dropped and deleted, so that an old command line
/// learns what happened to them rather than only that the name is unknown.
const DROPPED: [&str; 8] = [
    "resource_boost",
    "rerank_coverage",
    "dense_rank_boost",
    "literal_penalty",
    "spec_route",
    "embed_schema_names",
    "learned_rerank",
    "rerank_depth",
];

impl Tuning {
    /// These knobs with `settings` applied, each `NAME=VALUE` (`apigate eval --set`): NAME is
    /// a field of [`Tuning`], or `fields.N` for one field boost; VALUE a number, or for the
    /// switches `true`, `false`, `1` or `0`. The settings are deserialized over the current
    /// values, so an unknown knob or a value of the wrong type is an error.
    pub fn with_settings<S: AsRef<str>>(&self, settings: &[S]) -> Result<Tuning, TuningError> {
        let mut knobs = match serde_json::to_value(self) {
            Ok(Value::Object(knobs)) => knobs,
            // Unreachable: a struct of numbers serializes to an object.
            _ => return Err(TuningError::Invalid("the knobs did not serialize".into())),
        };
        for setting in settings {
            let setting = setting.as_ref();
            let (name, value) = setting
                .split_once('=')
                .map(|(n, v)| (n.trim(), v.trim()))
                .ok_or_else(|| TuningError::NotASetting(setting.to_string()))?;
            if DROPPED.contains(&name) {
                return Err(TuningError::Dropped(name.to_string()));
            }
            match name.strip_prefix("fields.") {
                Some(i) => set_field(&mut knobs, i, value)
                    .ok_or_else(|| TuningError::NoSuchField(name.to_string()))?,
                None => {
                    knobs.insert(name.to_string(), value_of(value));
                }
            }
        }
        serde_json::from_value(Value::Object(knobs))
            .map_err(|e| TuningError::Invalid(e.to_string()))
    }
}

/// Sets field boost `index` (as written) of the serialized knobs; `None` if there is none.
fn set_field(knobs: &mut Map<String, Value>, index: &str, value: &str) -> Option<()> {
    let i: usize = index.parse().ok()?;
    let slot = knobs.get_mut("fields")?.as_array_mut()?.get_mut(i)?;
    *slot = value_of(value);
    Some(())
}

/// A setting's value as JSON: an integer as one (for the counts), else a number read as the
/// f32 the knobs hold (so `0.6` becomes exactly `0.6f32`), `true` or `false`, or else the
/// text itself (which then fails to deserialize with a message naming the type wanted).
fn value_of(text: &str) -> Value {
    if let Ok(n) = text.parse::<u64>() {
        return Value::from(n);
    }
    if let Ok(x) = text.parse::<f32>()
        && x.is_finite()
    {
        return Value::from(f64::from(x));
    }
    match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(text.to_string()),
    }
}

/// A switch: `true`/`false`, or a number (0 is off), as `--set synonyms=0` always said it.
fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Flag;
    impl serde::de::Visitor<'_> for Flag {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("true, false, 1 or 0")
        }
        fn visit_bool<E>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
        fn visit_u64<E>(self, v: u64) -> Result<bool, E> {
            Ok(v != 0)
        }
        fn visit_i64<E>(self, v: i64) -> Result<bool, E> {
            Ok(v != 0)
        }
        fn visit_f64<E>(self, v: f64) -> Result<bool, E> {
            Ok(v != 0.0)
        }
    }
    d.deserialize_any(Flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_settings_change_nothing() {
        let t = Tuning::default();
        assert_eq!(t.with_settings::<&str>(&[]), Ok(t));
    }

    #[test]
    fn knobs_are_set_by_name() {
        let t = Tuning::default()
            .with_settings(&[
                "dense_weight=0.6",
                "fields.5=0.2",
                "synonyms=0",
                " stemming = false ",
                "dense_candidates=30",
                "coord=1",
            ])
            .unwrap();
        assert_eq!(t.dense_weight, 0.6);
        assert_eq!(t.fields, [2.5, 2.0, 1.5, 1.0, 0.7, 0.2]);
        assert!(!t.synonyms);
        assert!(!t.stemming);
        assert_eq!(t.dense_candidates, 30);
        assert_eq!(t.coord, 1.0);
        // The rest stays as it was, including what earlier settings changed.
        let again = t.with_settings(&["synonyms=true"]).unwrap();
        assert_eq!(
            again,
            Tuning {
                synonyms: true,
                ..t
            }
        );
    }

    #[test]
    fn bad_settings_are_clear_errors() {
        let t = Tuning::default();
        let err = |s: &str| t.with_settings(&[s]).unwrap_err();
        assert_eq!(err("coord"), TuningError::NotASetting("coord".into()));
        assert_eq!(
            err("fields.6=0.3"),
            TuningError::NoSuchField("fields.6".into())
        );
        assert_eq!(
            err("fields.x=1"),
            TuningError::NoSuchField("fields.x".into())
        );
        for dropped in DROPPED {
            assert_eq!(
                err(&format!("{dropped}=1")),
                TuningError::Dropped(dropped.into())
            );
        }
        for (setting, named) in [
            ("no_such_knob=1", "no_such_knob"),
            ("coord=high", "high"),
            ("dense_candidates=2.5", "2.5"),
            ("synonyms=maybe", "maybe"),
        ] {
            match err(setting) {
                TuningError::Invalid(message) => {
                    assert!(message.contains(named), "{setting}: {message}")
                }
                other => panic!("{setting}: {other:?}"),
            }
        }
    }
}
